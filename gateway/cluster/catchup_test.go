package cluster

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/uncaged/workflow/gateway/internal/natstest"
	"github.com/uncaged/workflow/shared/testkit"
)

// A replica that has just joined finds a connector another replica holds
// when it waits for the others (AwaitOnline), however soon after Start it
// asks: in the first milliseconds a plain Lookup knows nothing yet. Once
// a snapshot is in, it has caught up.
func TestAJoiningReplicaWaitsForTheOthersSnapshots(t *testing.T) {
	t.Parallel()
	url := natstest.Start(t).ClientURL()
	member(t, url, "r1", time.Hour, newFakeLocal(online("laptop", 100)))
	for i := range 10 {
		c := member(t, url, fmt.Sprintf("r%d", i+2), time.Hour, newFakeLocal())
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		r, known := c.AwaitOnline(ctx, "laptop")
		cancel()
		if !r.Online || !known || r.Replica != "r1" {
			t.Fatalf("joiner %d: route %+v, known %v; want laptop online on r1", i, r, known)
		}
		if !c.CaughtUp() {
			t.Fatalf("joiner %d has laptop's route but has not caught up", i)
		}
		c.Close()
	}
}

// A lone replica has nobody's snapshot to wait for: it has caught up once
// CatchUpWindow has passed since it connected, and stays so; a request
// that gives up before then gets what is known.
func TestALoneReplicaCatchesUpAfterTheWindow(t *testing.T) {
	t.Parallel()
	url := natstest.Start(t).ClientURL()
	c := member(t, url, "r1", time.Hour, newFakeLocal())
	if c.CaughtUp() {
		t.Fatal("caught up at once, with nobody heard")
	}
	gaveUp, cancel := context.WithCancel(context.Background())
	cancel()
	if r, known := c.AwaitOnline(gaveUp, "nobody"); r.Online || known {
		t.Fatalf("route %+v, known %v", r, known)
	}
	testkit.WaitUntil(t, "the replica to greet the cluster", func() bool {
		c.mu.RLock()
		defer c.mu.RUnlock()
		return !c.catch.since.IsZero()
	})
	// As if the window had passed since it connected.
	c.mu.Lock()
	c.catch.since = c.catch.since.Add(-CatchUpWindow)
	c.mu.Unlock()
	if !c.CaughtUp() {
		t.Fatal("not caught up after the window")
	}
	if r, _ := c.AwaitOnline(context.Background(), "nobody"); r.Online {
		t.Fatalf("route %+v", r)
	}
	c.began() // a reconnection: requests wait again, readiness stays
	if !c.CaughtUp() {
		t.Fatal("a reconnection undid readiness")
	}
}
