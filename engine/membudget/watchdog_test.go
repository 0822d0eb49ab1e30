package membudget

import (
	"math/rand/v2"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/uncaged/workflow/shared/testkit"
)

const mib = 1 << 20

// fakeHeap scripts the figures the watchdog reads: a test says who
// executes, what is allocated and what stays live, tick by tick.
type fakeHeap struct {
	at       int64
	allocs   uint64
	cycles   uint64
	live     uint64 // as of the last collection
	trueLive uint64
	collects int
}

func (h *fakeHeap) read(s *sample) {
	*s = sample{at: h.at, allocs: h.allocs, cycles: h.cycles, live: h.live}
}

// collect is a collection: it finds what is truly live.
func (h *fakeHeap) collect() {
	h.cycles++
	h.live = h.trueLive
	h.collects++
}

// alloc allocates n bytes of which keep stay live.
func (h *fakeHeap) alloc(n, keep uint64) {
	h.allocs += n
	h.trueLive += keep
}

// free drops n live bytes (a runtime was closed, or let go of them).
func (h *fakeHeap) free(n uint64) { h.trueLive -= n }

type stops struct{ errs []*ExceededError }

func (s *stops) on(e *ExceededError) { s.errs = append(s.errs, e) }

func newTestWatchdog(h *fakeHeap) *Watchdog {
	w := newWatchdog(h.read, h.collect)
	w.ticking = true                         // driven by the test, not by its own goroutine
	w.room = func() *HostRoom { return nil } // the machine's memory is not the test's
	h.at = int64(time.Second)
	h.live, h.trueLive = 20*mib, 20*mib // the host's own
	return w
}

// execute says a ran JavaScript for d of the coming tick.
func execute(a *Account, d time.Duration) { a.busy.Add(int64(d)) }

// tick advances the clock by one interval and lets the watchdog look.
func tick(w *Watchdog, h *fakeHeap) {
	h.at += int64(Interval)
	w.tick()
}

func TestRunawayIsStoppedOnWhatACollectionFoundLive(t *testing.T) {
	t.Parallel()
	h := &fakeHeap{}
	w := newTestWatchdog(h)
	var st stops
	a := w.Open(64*mib, st.on)
	tick(w, h)
	for i := 0; i < 200 && len(st.errs) == 0; i++ {
		execute(a, Interval)
		h.alloc(2*mib, 2*mib)
		if i%20 == 19 {
			h.collect() // the collector's own pace
		}
		tick(w, h)
	}
	if len(st.errs) != 1 {
		t.Fatalf("stopped %d times", len(st.errs))
	}
	e := st.errs[0]
	if e.Budget != 64*mib || e.Held < 64*mib || e.Held > 72*mib || e.HostLimit != 0 {
		t.Fatalf("stopped with %+v", e)
	}
	if h.trueLive-20*mib > 72*mib {
		t.Fatalf("stopped only after %d MiB", (h.trueLive-20*mib)/mib)
	}
	// Stopped once: more growth before it closes does not call again.
	execute(a, Interval)
	h.alloc(2*mib, 2*mib)
	h.collect()
	tick(w, h)
	if len(st.errs) != 1 {
		t.Fatalf("stopped %d times", len(st.errs))
	}
}

func TestWaitingThreadIsNeverCharged(t *testing.T) {
	t.Parallel()
	h := &fakeHeap{}
	w := newTestWatchdog(h)
	var runaway, waiting stops
	r := w.Open(64*mib, runaway.on)
	b := w.Open(64*mib, waiting.on)
	tick(w, h)
	for i := 0; i < 200 && len(runaway.errs) == 0; i++ {
		execute(r, Interval)
		h.alloc(2*mib, 2*mib)
		if i%10 == 9 {
			h.collect()
		}
		tick(w, h)
		if b.Held() != 0 {
			t.Fatalf("tick %d: a thread that executes nothing is charged %d", i, b.Held())
		}
	}
	if len(runaway.errs) != 1 || len(waiting.errs) != 0 {
		t.Fatalf("runaway stopped %d times, bystander %d", len(runaway.errs), len(waiting.errs))
	}
}

func TestGarbageIsNotHeld(t *testing.T) {
	t.Parallel()
	h := &fakeHeap{}
	w := newTestWatchdog(h)
	var st stops
	a := w.Open(32*mib, st.on)
	tick(w, h)
	const ticks = 1000 // 10 s of allocating 5 MiB per 10 ms, keeping 16 MiB
	for i := 0; i < ticks; i++ {
		execute(a, Interval)
		if i < 8 {
			h.alloc(5*mib, 2*mib)
		} else {
			h.alloc(5*mib, 0)
		}
		if i%40 == 39 {
			h.collect()
		}
		tick(w, h)
	}
	t.Logf("%d collections, charged %d MiB", h.collects, a.Held()/mib)
	if len(st.errs) != 0 {
		t.Fatalf("a thread holding 16 MiB of a 32 MiB budget was stopped: %+v", st.errs[0])
	}
	if held := a.Held(); held < 15*mib || held > 32*mib+5*mib*40 {
		t.Fatalf("charged %d MiB", held/mib)
	}
	// Forced collections to tell garbage from growth are rate-limited.
	if max := int(ticks*Interval/forceGap) + ticks/40 + 1; h.collects > max {
		t.Fatalf("%d collections in %d ticks, want at most %d", h.collects, ticks, max)
	}
}

func TestBriefStepsBesideARunawayAreChargedLittle(t *testing.T) {
	t.Parallel()
	h := &fakeHeap{}
	w := newTestWatchdog(h)
	var runaway, stepper stops
	r := w.Open(64*mib, runaway.on)
	s := w.Open(64*mib, stepper.on)
	tick(w, h)
	for i := 0; i < 300 && len(runaway.errs) == 0; i++ {
		execute(r, Interval)
		execute(s, Interval/20) // a timer callback, a quick step
		h.alloc(2*mib, 2*mib)
		if i%10 == 9 {
			h.collect()
		}
		tick(w, h)
	}
	if len(runaway.errs) != 1 || len(stepper.errs) != 0 {
		t.Fatalf("runaway stopped %d times, stepper %d", len(runaway.errs), len(stepper.errs))
	}
	if held := s.Held(); held > 8*mib {
		t.Fatalf("the stepper is charged %d MiB", held/mib)
	}
}

func TestOneStopAtATimeAndTheBystanderIsJudgedAgain(t *testing.T) {
	t.Parallel()
	h := &fakeHeap{}
	w := newTestWatchdog(h)
	var st [2]stops
	accts := [2]*Account{w.Open(64*mib, st[0].on), w.Open(64*mib, st[1].on)}
	tick(w, h)
	// Both execute all the time; only the first keeps what it allocates,
	// so each is charged half of the growth.
	var kept uint64
	for i := 0; i < 400 && len(st[0].errs)+len(st[1].errs) == 0; i++ {
		execute(accts[0], Interval)
		execute(accts[1], Interval)
		h.alloc(4*mib, 2*mib)
		kept += 2 * mib
		if i%10 == 9 {
			h.collect()
		}
		tick(w, h)
	}
	t.Logf("stopped: %v %v; held %d %d MiB", len(st[0].errs), len(st[1].errs), accts[0].Held()/mib, accts[1].Held()/mib)
	if n := len(st[0].errs) + len(st[1].errs); n != 1 {
		t.Fatalf("%d runtimes stopped at once, want one", n)
	}
	stopped := 0
	if len(st[1].errs) == 1 {
		stopped = 1
	}
	other := 1 - stopped
	// Nothing else is stopped before the stopped one is closed.
	for i := 0; i < 20; i++ {
		execute(accts[other], Interval)
		h.alloc(1*mib, 0)
		h.collect()
		tick(w, h)
	}
	if len(st[other].errs) != 0 {
		t.Fatal("a second runtime was stopped before the first was closed")
	}
	accts[stopped].Close()
	if stopped == 0 {
		h.free(kept) // the runaway's memory goes with its runtime
	}
	for i := 0; i < 50; i++ {
		execute(accts[other], Interval)
		h.alloc(1*mib, 0)
		if i%10 == 9 {
			h.collect()
		}
		tick(w, h)
	}
	if stopped == 0 {
		// The bystander had been charged half of the runaway's growth; the
		// memory freed with the runaway takes it back.
		if len(st[other].errs) != 0 || accts[other].Held() > 32*mib {
			t.Fatalf("bystander stopped %d times, charged %d MiB", len(st[other].errs), accts[other].Held()/mib)
		}
	} else if len(st[other].errs) != 1 {
		// The bystander was stopped first; its memory did not go, so the
		// runaway is stopped next.
		t.Fatalf("the runaway was not stopped after the bystander")
	}
}

func TestLegitimateHolderIsLeftAlone(t *testing.T) {
	t.Parallel()
	h := &fakeHeap{}
	w := newTestWatchdog(h)
	var st stops
	a := w.Open(64*mib, st.on)
	tick(w, h)
	for i := 0; i < 300; i++ {
		execute(a, Interval)
		if i < 25 {
			h.alloc(2*mib, 2*mib) // builds 50 MiB, then only reads it
		} else {
			h.alloc(256<<10, 0)
		}
		if i%30 == 29 {
			h.collect()
		}
		tick(w, h)
	}
	if len(st.errs) != 0 {
		t.Fatalf("stopped holding 50 MiB of 64: %+v", st.errs[0])
	}
	if held := a.Held(); held < 45*mib || held > 64*mib {
		t.Fatalf("charged %d MiB for 50", held/mib)
	}
}

func TestHostLimitStopsTheBiggest(t *testing.T) {
	t.Parallel()
	h := &fakeHeap{}
	w := newTestWatchdog(h)
	w.SetHostLimit(200 * mib)
	var big, small stops
	b := w.Open(Off, big.on)
	s := w.Open(1<<30, small.on)
	tick(w, h)
	for i := 0; i < 400 && len(big.errs) == 0; i++ {
		execute(b, Interval)
		h.alloc(2*mib, 2*mib)
		if i%5 == 0 {
			execute(s, Interval)
			h.alloc(1*mib, 1*mib)
		}
		if i%10 == 9 {
			h.collect()
		}
		tick(w, h)
	}
	if len(big.errs) != 1 || len(small.errs) != 0 {
		t.Fatalf("big stopped %d times, small %d", len(big.errs), len(small.errs))
	}
	if e := big.errs[0]; e.HostLimit != 200*mib || e.Budget != Off {
		t.Fatalf("stopped with %+v", e)
	}
	if h.live > 240*mib {
		t.Fatalf("live heap reached %d MiB", h.live/mib)
	}
}

func TestTickerStopsWithTheLastAccount(t *testing.T) {
	t.Parallel()
	w := newWatchdog(readMetrics, func() {})
	a := w.Open(64*mib, func(*ExceededError) {})
	a.Enter()
	a.Leave()
	a.Close()
	a.Close()
	testkit.WaitUntil(t, "the watchdog to stop ticking with no account open", func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return !w.ticking
	})
	var nilAcct *Account
	nilAcct.Enter()
	nilAcct.Leave()
	nilAcct.Close()
}

// countingWatchdog is a watchdog on its own goroutine whose every look at
// the heap is counted.
func countingWatchdog() (*Watchdog, *atomic.Int64) {
	var reads atomic.Int64
	w := newWatchdog(func(s *sample) { readMetrics(s); reads.Add(1) }, func() {})
	w.room = func() *HostRoom { return nil }
	return w, &reads
}

// waitReads waits until the watchdog has looked at the heap n more times
// than it had at from.
func waitReads(t *testing.T, what string, reads *atomic.Int64, from, n int64) {
	t.Helper()
	testkit.WaitUntil(t, what, func() bool { return reads.Load() >= from+n })
}

// TestWatchdogParksWhileNothingExecutes: a host whose threads all wait
// (on a model, a person, a timer) must not spend CPU on the watchdog, yet
// the watchdog must look at the heap whenever JavaScript executes. Each
// round leaves the watchdog parked, then enters at a random moment
// (before, during or after the watchdog's decision to park) and checks
// that the watchdog ticks while the runtime executes: an Enter lost to a
// park would leave it parked for good and the wait would fail.
func TestWatchdogParksWhileNothingExecutes(t *testing.T) {
	t.Parallel()
	w, reads := countingWatchdog()
	a := w.Open(64*mib, func(*ExceededError) {})
	defer a.Close()
	other := w.Open(64*mib, func(*ExceededError) {}) // open, never executing
	defer other.Close()
	testkit.WaitUntil(t, "the watchdog to park with no runtime executing", w.parked.Load)
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	for round := range 60 {
		if round%2 == 0 {
			testkit.WaitUntil(t, "the watchdog to park again", w.parked.Load)
		} else {
			// Enter somewhere around the tick that decides to park.
			for range rng.IntN(2000) {
				runtime.Gosched()
			}
		}
		a.Enter()
		from := reads.Load()
		waitReads(t, "the watchdog to look while a runtime executes", reads, from, 2)
		a.Leave()
	}
	// A runtime that executes briefly between two ticks is seen too: the
	// next tick finds its busy time and does not park.
	testkit.WaitUntil(t, "the watchdog to park at the end", w.parked.Load)
	from := reads.Load()
	a.Enter()
	a.Leave()
	waitReads(t, "the watchdog to look after a short execution", reads, from, 1)
}

// TestParkedWatchdogEndsWithTheLastAccount: closing the last account
// wakes a parked watchdog, which ends, and the next account starts one.
func TestParkedWatchdogEndsWithTheLastAccount(t *testing.T) {
	t.Parallel()
	w, reads := countingWatchdog()
	a := w.Open(64*mib, func(*ExceededError) {})
	testkit.WaitUntil(t, "the watchdog to park", w.parked.Load)
	a.Close()
	testkit.WaitUntil(t, "the parked watchdog to end with no account open", func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return !w.ticking
	})
	b := w.Open(64*mib, func(*ExceededError) {})
	defer b.Close()
	b.Enter()
	defer b.Leave()
	waitReads(t, "a new watchdog goroutine to look", reads, reads.Load(), 2)
}

// TestHostLimitSparesAThreadThatOnlyHolds: the host's limit stops what is
// growing, not a thread that holds more but waits on an agent.
func TestHostLimitSparesAThreadThatOnlyHolds(t *testing.T) {
	t.Parallel()
	h := &fakeHeap{}
	w := newTestWatchdog(h)
	w.SetHostLimit(300 * mib)
	var holder, grower stops
	hd := w.Open(Off, holder.on)
	g := w.Open(Off, grower.on)
	tick(w, h)
	for i := 0; i < 45; i++ { // the holder builds 90 MiB (less than its share, a third), then waits
		execute(hd, Interval)
		h.alloc(2*mib, 2*mib)
		if i%10 == 9 {
			h.collect()
		}
		tick(w, h)
	}
	for i := 0; i < 400 && len(grower.errs) == 0; i++ {
		execute(g, Interval)
		h.alloc(1*mib, 1*mib)
		if i%10 == 9 {
			h.collect()
		}
		tick(w, h)
	}
	if len(grower.errs) != 1 || len(holder.errs) != 0 {
		t.Fatalf("grower stopped %d times, holder %d (holder charged %d MiB, grower %d MiB)", len(grower.errs), len(holder.errs), hd.Held()/mib, g.Held()/mib)
	}
	if held := grower.errs[0].Held; held > 190*mib {
		t.Fatalf("the grower was stopped only at %d MiB", held/mib)
	}
}

// TestGrowthWhileAnotherRuntimeIsFreedIsCharged: the collection that frees
// a closed runtime's memory also finds what another grew meanwhile; the
// one must not hide the other.
func TestGrowthWhileAnotherRuntimeIsFreedIsCharged(t *testing.T) {
	t.Parallel()
	h := &fakeHeap{}
	w := newTestWatchdog(h)
	var first, second stops
	a := w.Open(Off, first.on)
	tick(w, h)
	for i := 0; i < 32; i++ { // a runtime builds 64 MiB
		execute(a, Interval)
		h.alloc(2*mib, 2*mib)
		tick(w, h)
	}
	h.collect()
	tick(w, h)
	b := w.Open(8*mib, second.on)
	a.Close()
	h.free(64 * mib)
	for i := 0; i < 100 && len(second.errs) == 0; i++ { // another keeps 16 MiB
		execute(b, Interval)
		if i < 16 {
			h.alloc(1*mib, 1*mib)
		}
		tick(w, h)
	}
	if len(second.errs) != 1 {
		t.Fatalf("a runtime holding 16 MiB of an 8 MiB budget was not stopped (charged %d MiB)", b.Held()/mib)
	}
}

// TestNoRuntimeHoldsMoreThanAThirdOfTheHost: whatever its budget (none,
// or more than the host has), a runtime that executes is stopped once a
// collection finds it holding more than a third of the host's limit, and
// a request that would take it past that is refused: one operation that
// copies what it holds (s + s, which nothing asks before it allocates)
// must still fit beside it.
func TestNoRuntimeHoldsMoreThanAThirdOfTheHost(t *testing.T) {
	t.Parallel()
	for _, budget := range []int64{Off, 1 << 40} {
		h := &fakeHeap{}
		w := newTestWatchdog(h)
		w.SetHostLimit(300 * mib)
		var st stops
		a := w.Open(budget, st.on)
		tick(w, h)
		if err := a.Reserve(150 * mib); err == nil || !strings.Contains(err.Error(), "a third, of the host's memory limit") {
			t.Fatalf("budget %d: a request past a third of the host: %v", budget, err)
		}
		for i := 0; i < 200 && len(st.errs) == 0; i++ {
			execute(a, Interval)
			h.alloc(2*mib, 2*mib)
			if i%10 == 9 {
				h.collect()
			}
			tick(w, h)
		}
		if len(st.errs) != 1 || !st.errs[0].Share || st.errs[0].Held < 100*mib || st.errs[0].Held > 125*mib {
			t.Fatalf("budget %d: stopped %+v", budget, st.errs)
		}
		for _, want := range []string{"out of memory", "more than a third of what the engine host may hold (300MiB)", "memoryBudget"} {
			if !strings.Contains(st.errs[0].Error(), want) {
				t.Errorf("%q lacks %q", st.errs[0].Error(), want)
			}
		}
	}
}

// TestABurstNothingAskedForIsStoppedAtOnce: a runtime that allocates more
// than half its share of the host in one tick without reserving it (one
// operation such as s + s copying a large string, which nothing can ask
// first) is stopped at that tick, before any collection: the next such
// operation would be twice as large. What it reserved first does not
// count, nor does steady churn.
func TestABurstNothingAskedForIsStoppedAtOnce(t *testing.T) {
	t.Parallel()
	const limit = 3000 * mib // a share of 1000 MiB, bursts from 500 MiB
	cases := []struct {
		name    string
		perTick uint64 // allocated per tick, kept
		ticks   int
		reserve bool
		stopped bool
	}{
		{"one unasked burst", 600 * mib, 1, false, true},
		{"the same, reserved first", 600 * mib, 1, true, false},
		{"steady growth below the burst", 40 * mib, 10, false, false},
	}
	for _, c := range cases {
		h := &fakeHeap{}
		w := newTestWatchdog(h)
		w.SetHostLimit(limit)
		var st stops
		a := w.Open(Off, st.on)
		tick(w, h)
		for i := 0; i < c.ticks; i++ {
			if c.reserve {
				if err := a.Reserve(int64(c.perTick)); err != nil {
					t.Fatal(err)
				}
			}
			execute(a, Interval)
			h.alloc(c.perTick, c.perTick)
			collects := h.collects
			tick(w, h)
			if c.stopped && (len(st.errs) != 1 || h.collects != collects) {
				t.Fatalf("%s: stopped %d times after %d collections", c.name, len(st.errs), h.collects-collects)
			}
		}
		if (len(st.errs) > 0) != c.stopped {
			t.Fatalf("%s: stopped %+v", c.name, st.errs)
		}
		if c.stopped {
			e := st.errs[0]
			if e.Burst < 600*mib || !strings.Contains(e.Error(), "allocated about 600MiB at once") {
				t.Fatalf("%s: %+v: %v", c.name, e, e)
			}
		}
	}
}
