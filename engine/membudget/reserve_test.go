package membudget

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
)

// TestReserveRefusesWhatTheBudgetCannotHold: a request is refused exactly
// when what the runtime holds plus what it asks for is over its budget,
// whatever the mix; a request that fits is charged, one bounded by Fits is
// not, and requests below the floor are never looked at.
func TestReserveRefusesWhatTheBudgetCannotHold(t *testing.T) {
	t.Parallel()
	const budget = 64 * mib
	cases := []struct {
		held, ask int64
		refused   bool
	}{
		{0, ReserveFloor - 1, false},
		{budget, ReserveFloor - 1, false}, // below the floor: the watchdog's
		{0, ReserveFloor, false},
		{0, budget, false},
		{0, budget + 1, true},
		{0, 1 << 40, true},
		{0, 1<<62 + 1, true},
		{8 * mib, budget - 8*mib, false},
		{8 * mib, budget - 8*mib + 1, true},
		{budget, ReserveFloor, true},
		{2 * budget, ReserveFloor, true},
		// Near the top of int64 (flat(Infinity) of an array holding
		// itself asks that much): held+ask would overflow past the budget.
		{8 * mib, math.MaxInt64, true},
		{8 * mib, math.MaxInt64 - 4*mib, true},
		{8 * mib, 1 << 63 / 2, true},
		{budget / 2, math.MaxInt64 - budget/4, true},
	}
	for _, c := range cases {
		for _, charge := range []bool{true, false} {
			t.Run(fmt.Sprintf("held%d/ask%d/charge%v", c.held, c.ask, charge), func(t *testing.T) {
				h := &fakeHeap{}
				w := newTestWatchdog(h)
				var st stops
				a := w.Open(budget, st.on)
				tick(w, h)
				// What the runtime holds, confirmed by a collection.
				execute(a, Interval)
				h.alloc(uint64(c.held), uint64(c.held))
				h.collect()
				tick(w, h)
				if got := a.Held(); got < c.held-mib || got > c.held+mib {
					t.Fatalf("held %d, want about %d", got, c.held)
				}
				before := a.Held()
				var err error
				if charge {
					err = a.Reserve(c.ask)
				} else {
					err = a.Fits(c.ask)
				}
				if (err != nil) != c.refused {
					t.Fatalf("refused: %v, want %v", err, c.refused)
				}
				want := before
				if err == nil && charge && c.ask >= ReserveFloor {
					want += c.ask
				}
				if got := a.Held(); got != want {
					t.Fatalf("held %d after the request, want %d", got, want)
				}
				if err == nil {
					return
				}
				var re *RefusedError
				if !errors.As(err, &re) || !errors.Is(err, ErrExceeded) || re.Asked != c.ask || re.Budget != budget || re.Host != nil {
					t.Fatalf("refusal %#v", err)
				}
				for _, want := range []string{"memory budget exceeded", "budget of 64MiB", "memoryBudget: ", "--memory-budget "} {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("%q lacks %q", err, want)
					}
				}
			})
		}
	}
}

// TestReserveCollectsBeforeRefusingOnGarbage: what a runtime was charged
// may be garbage by now. A request that would fit if it were is judged
// again after one collection; one that cannot fit (bigger than the whole
// budget) is refused without collecting.
func TestReserveCollectsBeforeRefusingOnGarbage(t *testing.T) {
	t.Parallel()
	h := &fakeHeap{}
	w := newTestWatchdog(h)
	var st stops
	a := w.Open(64*mib, st.on)
	tick(w, h)
	execute(a, Interval)
	h.alloc(48*mib, 48*mib)
	h.collect()
	tick(w, h)
	h.free(48 * mib) // dropped, not collected yet
	collects := h.collects
	if err := a.Reserve(100 * mib); err == nil || h.collects != collects {
		t.Fatalf("a request over the whole budget: %v, %d collections", err, h.collects-collects)
	}
	h.at += int64(forceGap)
	if err := a.Reserve(32 * mib); err != nil {
		t.Fatalf("refused on garbage: %v", err)
	}
	if h.collects != collects+1 {
		t.Fatalf("%d collections, want 1", h.collects-collects)
	}
	// The collection lowers every charge in proportion to what it found
	// freed (the watchdog cannot say whose it was): less than before, and
	// at least the request.
	if held := a.Held(); held < 32*mib || held >= 48*mib+32*mib {
		t.Fatalf("held %d MiB after the collection and the request", held/mib)
	}
	// A second refusal right after does not collect again.
	if err := a.Reserve(48 * mib); err == nil || h.collects != collects+1 {
		t.Fatalf("second request: %v, %d collections", err, h.collects-collects)
	}
	if len(st.errs) != 0 {
		t.Fatalf("stopped: %+v", st.errs[0])
	}
}

// TestReserveIsNotChargedTwice: what Reserve charged is not shared out
// again when the watchdog samples the allocation, whoever allocated it
// (the runtime itself, or Go work on its behalf while it waits).
func TestReserveIsNotChargedTwice(t *testing.T) {
	t.Parallel()
	for _, executing := range []bool{true, false} {
		h := &fakeHeap{}
		w := newTestWatchdog(h)
		var st stops
		a := w.Open(256*mib, st.on)
		tick(w, h)
		if err := a.Reserve(96 * mib); err != nil {
			t.Fatal(err)
		}
		if executing {
			execute(a, Interval)
		}
		h.alloc(96*mib, 96*mib)
		tick(w, h)
		if held := a.Held(); held != 96*mib {
			t.Fatalf("executing %v: charged %d MiB for 96 MiB", executing, held/mib)
		}
		h.collect()
		tick(w, h)
		if held := a.Held(); held < 95*mib || held > 97*mib {
			t.Fatalf("executing %v: confirmed %d MiB for 96 MiB live", executing, held/mib)
		}
	}
}

// TestReserveRefusesWhatTheHostCannotGive: with no budget, or a budget
// bigger than the host, what the host has left decides, less what other
// requests reserved and did not allocate yet; the refusal names the
// host's limit and the thread's budget.
func TestReserveRefusesWhatTheHostCannotGive(t *testing.T) {
	t.Parallel()
	for _, budget := range []int64{Off, 1 << 40} {
		h := &fakeHeap{}
		w := newTestWatchdog(h)
		base := h.trueLive
		w.room = func() *HostRoom {
			return &HostRoom{Room: 200*mib - int64(h.trueLive-base), Limit: 1 << 30, Source: "RLIMIT_AS"}
		}
		var st stops
		a := w.Open(budget, st.on)
		b := w.Open(budget, st.on)
		tick(w, h)
		if err := a.Reserve(150 * mib); err != nil {
			t.Fatal(err)
		}
		// Reserved, not allocated yet: spoken for all the same (until the
		// next sample, by which the caller has allocated it).
		w.lastForced = h.at
		if err := b.Fits(100 * mib); err == nil {
			t.Fatal("the host's room was given twice")
		}
		h.alloc(150*mib, 150*mib)
		h.at += int64(forceGap)
		err := b.Reserve(100 * mib)
		var re *RefusedError
		if !errors.As(err, &re) || re.Host == nil || re.Host.Room != 50*mib || re.Asked != 100*mib {
			t.Fatalf("budget %d: %#v", budget, err)
		}
		for _, want := range []string{"out of memory", "100MiB at once", "about 50MiB of 1GiB, from RLIMIT_AS", "GOMEMLIMIT"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%q lacks %q", err, want)
			}
		}
		if budget == Off && !strings.Contains(err.Error(), "budget is off") {
			t.Errorf("%q does not say the budget is off", err)
		}
		if err := b.Fits(40 * mib); err != nil {
			t.Fatalf("within what is left: %v", err)
		}
		// A nil account (no runtime) still asks the host.
		if err := (*Account)(nil).Fits(ReserveFloor - 1); err != nil {
			t.Fatal(err)
		}
	}
}
