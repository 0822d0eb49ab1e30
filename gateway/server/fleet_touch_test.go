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

// touchCounter is the store as the fleet sees it, recording every
// marking of machines seen: the unit under test is how many writes the
// fleet makes, which the store cannot tell.
type touchCounter struct {
	store.Store
	mu     sync.Mutex
	single []string   // TouchMachine's names, in order
	rounds [][]string // TouchMachines' lists, in order
	fail   error      // TouchMachines' answer when not nil
}

func (c *touchCounter) TouchMachine(ctx context.Context, name string) (store.Machine, error) {
	c.mu.Lock()
	c.single = append(c.single, name)
	c.mu.Unlock()
	return c.Store.TouchMachine(ctx, name)
}

func (c *touchCounter) TouchMachines(ctx context.Context, names []string) error {
	c.mu.Lock()
	c.rounds = append(c.rounds, slices.Sorted(slices.Values(names)))
	fail := c.fail
	c.mu.Unlock()
	if fail != nil {
		return fail
	}
	return c.Store.TouchMachines(ctx, names)
}

// counts returns copies of what was recorded so far.
func (c *touchCounter) counts() (single []string, rounds [][]string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.single), slices.Clone(c.rounds)
}

// roundsOf counts the rounds that named exactly names (sorted).
func roundsOf(rounds [][]string, names ...string) int {
	n := 0
	for _, r := range rounds {
		if slices.Equal(r, names) {
			n++
		}
	}
	return n
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
	g := New(Options{Auth: a, Heartbeat: time.Hour, RequestTimeout: testkit.WaitBound, Logger: log})
	g.started = g.started.Add(-RestartGrace)
	// Hooked to presence before any connector can connect.
	fl := g.newFleetOver(counter, touchEvery)
	srv := httptest.NewServer(g.Handler())
	t.Cleanup(func() { g.Shutdown(); srv.Close() })
	dash, _ := a.Issue(auth.RoleDashboard, "", time.Hour)
	return &fixture{t: t, auth: a, gw: g, srv: srv, dash: dash}, fl, counter
}

// lastSeen is every machine's last seen time in st.
func lastSeen(t *testing.T, st store.Store) map[string]time.Time {
	t.Helper()
	ms, err := st.ListMachines(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]time.Time{}
	for _, m := range ms {
		out[m.Name] = m.LastSeen
	}
	return out
}

// The connected machines are marked seen together, one store write a
// round, instead of a write per machine; a machine that leaves drops out
// of the rounds, and the rounds stop with the last reader.
func TestFleetTouchesConnectedMachinesInOneWrite(t *testing.T) {
	t.Parallel()
	f, fl, counter := newTouchFixture(t, 20*time.Millisecond, nil)
	disconnect := map[string]context.CancelFunc{}
	for _, name := range []string{"alpha", "beta", "gamma"} {
		disconnect[name] = f.connector(name, newFakeConnector())
	}
	// Each reader marks its machine seen as it starts.
	testkit.WaitUntil(t, "the three readers to mark their machines seen", func() bool {
		single, _ := counter.counts()
		return len(single) == 3
	})
	connected := lastSeen(t, counter.Store)

	testkit.WaitUntil(t, "every machine's last seen to advance", func() bool {
		now := lastSeen(t, counter.Store)
		for name, was := range connected {
			if !now[name].After(was) {
				return false
			}
		}
		return true
	})
	single, rounds := counter.counts()
	if len(single) != 3 {
		t.Errorf("machines marked seen one by one %v: the rounds must not write per machine", single)
	}
	if roundsOf(rounds, "alpha", "beta", "gamma") == 0 {
		t.Errorf("no round marked the three machines in one write: %v", rounds)
	}
	for _, r := range rounds {
		if len(r) != len(slices.Compact(slices.Clone(r))) {
			t.Errorf("a round named a machine twice: %v", r)
		}
	}

	// A machine that leaves is marked seen as it goes, then left out.
	disconnect["beta"]()
	f.waitStatus("beta", "offline")
	testkit.WaitUntil(t, "beta's last touch and a round of the two machines still here", func() bool {
		single, rounds := counter.counts()
		return len(single) > 3 && roundsOf(rounds, "alpha", "gamma") > 0
	})
	if single, _ := counter.counts(); !slices.Equal(single[3:], []string{"beta"}) {
		t.Errorf("after beta left, marked one by one: %v, want beta once", single[3:])
	}

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

// A store that refuses the round's write is logged once a round, not once
// per machine.
func TestFleetTouchFailureLoggedOncePerRound(t *testing.T) {
	t.Parallel()
	logs := &logBuffer{}
	log := slog.New(slog.NewJSONHandler(logs, nil))
	f, _, counter := newTouchFixture(t, 20*time.Millisecond, log)
	counter.mu.Lock()
	counter.fail = errors.New("disk full")
	counter.mu.Unlock()
	for _, name := range []string{"alpha", "beta", "gamma"} {
		f.connector(name, newFakeConnector())
	}
	const msg = `"msg":"fleet: marking the connected machines seen"`
	testkit.WaitUntil(t, "two failed rounds of the three machines to be logged", func() bool {
		return strings.Count(logs.String(), `"machines":3`) >= 2
	})
	logged := logs.String()
	_, rounds := counter.counts()
	if n := strings.Count(logged, msg); n > len(rounds) {
		t.Fatalf("%d warnings for %d failed rounds: one a round, not one per machine\n%s", n, len(rounds), logged)
	}
	if !strings.Contains(logged, "disk full") {
		t.Fatalf("the store's error is not in the warning:\n%s", logged)
	}
}

// Shutdown returns only once the connectors' last touches are written:
// the caller closes the store next, which would refuse them.
func TestShutdownWritesLastSeenBeforeReturning(t *testing.T) {
	t.Parallel()
	f, fl, counter := newTouchFixture(t, time.Hour, nil)
	f.gw.fleet = fl // as New hooks its own fleet when Options.Store is set
	f.connector("alpha", newFakeConnector())
	testkit.WaitUntil(t, "alpha's reader to mark it seen", func() bool {
		single, _ := counter.counts()
		return len(single) == 1
	})
	f.gw.Shutdown()
	if single, _ := counter.counts(); !slices.Equal(single, []string{"alpha", "alpha"}) {
		t.Fatalf("when Shutdown returned, machines marked seen: %v; want alpha's first and last touch", single)
	}
	fl.mu.Lock()
	defer fl.mu.Unlock()
	if len(fl.readers) != 0 || fl.touching != nil {
		t.Fatalf("after Shutdown: readers %v, touch loop %v", fl.readers, fl.touching)
	}
}
