package cluster

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/uncaged/workflow/gateway/internal/natstest"
	"github.com/uncaged/workflow/gateway/presence"
	"github.com/uncaged/workflow/shared/testkit"
)

// A replica that has just joined finds a connector another replica holds
// when it waits for the others (AwaitOnline), however soon after Start it
// asks: in the first milliseconds a plain Lookup knows nothing yet. And it
// has caught up only once every replica alive has told it what it holds,
// not just the first to answer.
func TestAJoiningReplicaWaitsForTheOthersSnapshots(t *testing.T) {
	t.Parallel()
	url := natstest.Start(t).ClientURL()
	holders := map[string]string{"laptop": "r1", "phone": "r2", "ci-box": "r3"}
	var held []*Cluster
	for name, id := range holders {
		held = append(held, member(t, url, id, time.Hour, newFakeLocal(online(name, 100))))
	}
	// The holders know each other first: what a joiner waits for is the
	// replicas the others name, and one started a moment ago is not named
	// yet by those it has not reached.
	testkit.WaitUntil(t, "the holders to hear each other", func() bool {
		for _, c := range held {
			if c.Peers() != len(held)-1 {
				return false
			}
		}
		return true
	})
	for i := range 10 {
		c := member(t, url, fmt.Sprintf("j%d", i), time.Hour, newFakeLocal())
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		r, known := c.AwaitOnline(ctx, "laptop")
		cancel()
		if !r.Online || !known || r.Replica != "r1" {
			t.Fatalf("joiner %d: route %+v, known %v; want laptop online on r1 (%s)", i, r, known, catchUpState(c))
		}
		testkit.WaitUntil(t, fmt.Sprintf("joiner %d to catch up", i), c.CaughtUp)
		for name, id := range holders {
			if r := routeOf(c, name); !r.Online || r.Replica != id {
				t.Fatalf("joiner %d has caught up, but %s's route is %+v (want online on %s)", i, name, r, id)
			}
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

// Cut off from NATS, a replica keeps what the others said last: their
// silence is its own deafness, so a connector held elsewhere stays
// online however long the outage lasts, and once NATS is back the
// snapshots take over again.
func TestACutOffReplicaKeepsTheLastKnownPresence(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	url := srv.ClientURL()
	c1 := member(t, url, "r1", 20*time.Millisecond, newFakeLocal())
	c2 := member(t, url, "r2", 20*time.Millisecond, newFakeLocal(online("laptop", 100)))
	testkit.WaitUntil(t, "r1 to see laptop", func() bool { return routeOf(c1, "laptop").Online })
	port := srv.Addr().(*net.TCPAddr).Port
	srv.Shutdown()
	testkit.WaitUntil(t, "both replicas to lose NATS", func() bool { return !c1.Connected() && !c2.Connected() })
	// An hour of outage, in r1's eyes: laptop is still where it was.
	c1.mu.RLock()
	p := c1.peers["r2"]
	believed := c1.alive(p, time.Now().Add(time.Hour))
	c1.mu.RUnlock()
	if !believed || !routeOf(c1, "laptop").Online {
		t.Fatal("a replica cut off from NATS dropped what the others said last")
	}
	natstest.StartOn(t, port)
	testkit.WaitUntil(t, "both replicas to reconnect", func() bool { return c1.Connected() && c2.Connected() })
	testkit.WaitUntil(t, "r1 to hear r2 again", func() bool {
		c1.mu.RLock()
		defer c1.mu.RUnlock()
		return c1.catch.heard
	})
	if !routeOf(c1, "laptop").Online {
		t.Fatal("laptop offline after NATS came back")
	}
}

// catchUpState describes where c stands in catching up, for a failure.
func catchUpState(c *Cluster) string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return fmt.Sprintf("connected %v ago, heard %v, expecting %v, got %v, peers %d",
		time.Since(c.catch.since).Round(time.Millisecond), c.catch.heard, c.catch.expect, c.catch.got, len(c.peers))
}

// Whatever AwaitOnline answers, it answers from one moment: a replica that
// has caught up knows every route the snapshots that caught it up carry.
// Here the snapshots of three holders land in a random order while a
// request waits, many times over; whenever the request returns, the route
// it returns must show laptop online on r1, the snapshot of r1 being one
// of those that complete the catching up.
func TestAwaitOnlineAnswersFromOneMoment(t *testing.T) {
	t.Parallel()
	holders := []message{
		{Kind: kindSnapshot, Replica: "r1", Endpoints: []presence.Endpoint{online("laptop", 100)}, Peers: []string{"r2", "r3"}},
		{Kind: kindSnapshot, Replica: "r2", Endpoints: []presence.Endpoint{online("phone", 100)}, Peers: []string{"r1", "r3"}},
		{Kind: kindSnapshot, Replica: "r3", Endpoints: []presence.Endpoint{online("ci-box", 100)}, Peers: []string{"r1", "r2"}},
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	for round := range 500 {
		c, err := New(Options{NATS: "nats://127.0.0.1:1", ReplicaID: "j", Advertise: "http://127.0.0.1:10", Key: testKey, Interval: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		c.began()
		order := rng.Perm(len(holders))
		go func() {
			for _, i := range order {
				if i%2 == 0 {
					runtime.Gosched() // vary where the request's reads fall
				}
				c.apply(holders[i])
			}
		}()
		r, known := c.AwaitOnline(context.Background(), "laptop")
		if !r.Online || !known || r.Replica != "r1" {
			t.Fatalf("round %d (snapshots in order %v): route %+v, known %v (%s)", round, order, r, known, catchUpState(c))
		}
	}
}
