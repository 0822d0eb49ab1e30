package server

import (
	"context"
	"errors"
	"log/slog"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/uncaged/workflow/gateway/auth"
	"github.com/uncaged/workflow/gateway/store"
	"github.com/uncaged/workflow/shared/testkit"
)

// touchCounter is the store as the fleet's queue reaches it, recording
// every marking of machines seen: the unit under test is how many writes
// the fleet makes, which the store cannot tell.
type touchCounter struct {
	store.Store
	mu    sync.Mutex
	calls [][]string // TouchMachinesAt's lists, sorted, in order
	fail  error      // TouchMachinesAt's answer when not nil
}

func (c *touchCounter) TouchMachinesAt(ctx context.Context, names []string, at time.Time) error {
	c.mu.Lock()
	c.calls = append(c.calls, slices.Sorted(slices.Values(names)))
	fail := c.fail
	c.mu.Unlock()
	if fail != nil {
		return fail
	}
	return c.Store.TouchMachinesAt(ctx, names, at)
}

// counts returns a copy of what was recorded so far.
func (c *touchCounter) counts() [][]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.calls)
}

// indexOf is the index of the first call at or after from that named
// exactly names (sorted), -1 when none did.
func indexOf(calls [][]string, from int, names ...string) int {
	for i := from; i < len(calls); i++ {
		if slices.Equal(calls[i], names) {
			return i
		}
	}
	return -1
}

// newTouchFixture is a gateway whose fleet's memory is kept in a
// touchCounter over a SQLite store and marks its machines seen every
// touchEvery instead of every minute.
func newTouchFixture(t *testing.T, touchEvery time.Duration, log *slog.Logger) (*fixture, *fleetMemory, *touchCounter) {
	t.Helper()
	st, err := store.Open(context.Background(), store.Config{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() }) // after the gateway's own cleanup
	counter := &touchCounter{Store: st}
	a, err := auth.New([]byte(strings.Repeat("k", 32)), "shared-secret")
	if err != nil {
		t.Fatal(err)
	}
	g := New(Options{Auth: a, Heartbeat: time.Hour, RequestTimeout: testkit.WaitBound, Logger: log, Store: counter, fleetTouchEvery: touchEvery})
	g.started = g.started.Add(-RestartGrace)
	srv := httptest.NewServer(g.Handler())
	t.Cleanup(func() { g.Shutdown(); srv.Close() })
	dash, _ := a.Issue(auth.RoleDashboard, "", time.Hour)
	return &fixture{t: t, auth: a, gw: g, srv: srv, dash: dash}, g.fleet, counter
}

// The connected machines are marked seen together, one store write a
// round, instead of a write per machine; a machine that leaves is marked
// seen as it goes and drops out of the rounds, and the rounds stop with
// the last reader.
func TestFleetTouchesConnectedMachinesInOneWrite(t *testing.T) {
	t.Parallel()
	f, fl, counter := newTouchFixture(t, 20*time.Millisecond, nil)
	disconnect := map[string]context.CancelFunc{}
	for _, name := range []string{"alpha", "beta", "gamma"} {
		disconnect[name] = f.connector(name, newFakeConnector())
	}
	// Each reader's first touch is queued before any round names it, so
	// once a round names all three every write is a round of all three,
	// until one leaves.
	var first int
	testkit.WaitUntil(t, "a round marking the three machines in one write", func() bool {
		first = indexOf(counter.counts(), 0, "alpha", "beta", "gamma")
		return first >= 0
	})
	testkit.WaitUntil(t, "three more rounds", func() bool { return len(counter.counts()) >= first+4 })
	calls := counter.counts()
	for _, c := range calls[first : first+4] {
		if !slices.Equal(c, []string{"alpha", "beta", "gamma"}) {
			t.Fatalf("with three machines connected, a write marked %v: every round writes all of them at once, never per machine (%v)", c, calls[first:])
		}
	}
	for _, c := range calls {
		if len(c) != len(slices.Compact(slices.Clone(c))) {
			t.Errorf("a write named a machine twice: %v", c)
		}
	}

	// A machine that leaves is marked seen as it goes, then left out.
	before := len(counter.counts())
	disconnect["beta"]()
	f.waitStatus("beta", "offline")
	testkit.WaitUntil(t, "beta's last touch, then a round of the two machines still here", func() bool {
		calls := counter.counts()
		last := indexOf(calls, before, "beta")
		return last >= 0 && indexOf(calls, last, "alpha", "gamma") >= 0
	})

	// With the last reader gone, the rounds stop.
	fl.mu.Lock()
	toucher := fl.touching
	fl.mu.Unlock()
	if toucher == nil {
		t.Fatal("no touch loop while machines are connected")
	}
	disconnect["alpha"]()
	disconnect["gamma"]()
	testkit.WaitUntil(t, "the touch loop to stop with no machine connected", func() bool {
		select {
		case <-toucher.done:
			return true
		default:
			return false
		}
	})
	fl.mu.Lock()
	defer fl.mu.Unlock()
	if fl.touching != nil || len(fl.readers) != 0 {
		t.Fatalf("after every machine left: touch loop %v, readers %v", fl.touching, fl.readers)
	}
}

// A store that refuses the round's write (for another reason than being
// out of reach) is logged once a round, not once per machine: each
// round's record is dropped after its attempts, said so, and counted.
func TestFleetTouchFailureLoggedOncePerRound(t *testing.T) {
	t.Parallel()
	logs := &logBuffer{}
	log := slog.New(slog.NewJSONHandler(logs, nil))
	f, _, counter := newTouchFixture(t, 20*time.Millisecond, log)
	counter.mu.Lock()
	counter.fail = errors.New("constraint failed")
	counter.mu.Unlock()
	for _, name := range []string{"alpha", "beta", "gamma"} {
		f.connector(name, newFakeConnector())
	}
	const msg = `"msg":"store queue: record lost"`
	testkit.WaitUntil(t, "two lost rounds of the three machines to be logged", func() bool {
		return strings.Count(logs.String(), `"machines":3`) >= 2
	})
	logged := logs.String()
	if n, writes := strings.Count(logged, msg), len(counter.counts()); n > writes {
		t.Fatalf("%d lines for %d failed writes: one a record, not one per machine\n%s", n, writes, logged)
	}
	if !strings.Contains(logged, "constraint failed") || !strings.Contains(logged, `"reason":"refused"`) {
		t.Fatalf("the store's error is not in the line:\n%s", logged)
	}
	_, metrics := f.do("GET", "/metrics", "", nil)
	if strings.Contains(metrics, `uncaged_gateway_store_dropped_total{kind="seen",reason="refused"} 0`) {
		t.Fatal("the lost rounds are not counted")
	}
}

// The connectors' last touches are queued by the time Shutdown returns,
// and written by the time the queue is flushed (closeAudit, which Run
// calls before it closes the store).
func TestShutdownWritesLastSeenBeforeTheStoreCloses(t *testing.T) {
	t.Parallel()
	f, fl, counter := newTouchFixture(t, time.Hour, nil)
	f.connector("alpha", newFakeConnector())
	testkit.WaitUntil(t, "alpha's reader to mark it seen", func() bool { return len(counter.counts()) == 1 })
	f.gw.Shutdown()
	if err := f.gw.closeAudit(context.Background()); err != nil {
		t.Fatal(err)
	}
	if calls := counter.counts(); !slices.EqualFunc(calls, [][]string{{"alpha"}, {"alpha"}}, slices.Equal) {
		t.Fatalf("when the queue was flushed, machines marked seen: %v; want alpha's first and last touch", calls)
	}
	fl.mu.Lock()
	defer fl.mu.Unlock()
	if len(fl.readers) != 0 || fl.touching != nil {
		t.Fatalf("after Shutdown: readers %v, touch loop %v", fl.readers, fl.touching)
	}
}
