package membudget

import (
	"runtime"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"time"
)

// Interval is how often the watchdog samples the heap while any runtime
// executes (or has just executed; see Watchdog.parked). A role allocating as fast as goja can (about 100 MB/s of
// objects) gets one more MiB per sample; reading the figures costs about a
// microsecond.
const Interval = 10 * time.Millisecond

const (
	// forceGap is the least time between two collections the watchdog
	// forces, and forceCostFactor keeps forced collections below a fifth
	// of the watchdog's time when they are slow (a large heap), up to
	// maxForceGap: their wall time also grows when the machine is busy,
	// which must not leave a runaway unjudged for long.
	forceGap        = 100 * time.Millisecond
	forceCostFactor = 4
	maxForceGap     = time.Second
	// holdoff is how long the watchdog waits for a runtime it stopped to be
	// closed before it will stop another: one at a time, so that a
	// bystander charged a share of the runaway's growth is judged again
	// after the runaway's memory has been given back.
	holdoff = 2 * time.Second
	// releasedCycles is how many collections memory of closed runtimes is
	// expected to be freed within; what is not freed by then belongs to the
	// host.
	releasedCycles = 2
	// releaseCollectMin is how much closed runtimes must have been charged
	// for the watchdog to collect soon after, so that what they held is
	// known to be gone: otherwise its going hides as much growth of others
	// in the same collection.
	releaseCollectMin = 8 << 20
	// hostShare is the least share of the live heap the runtime stopped for
	// the host's limit must hold: stopping it must make a difference.
	hostShare = 4 // one quarter
	// threadShare bounds what one runtime may hold of the host's limit,
	// whatever its budget: one operation that copies what it holds (s + s,
	// which nothing can ask before it allocates) must still fit beside it.
	threadShare = 3 // one third
)

// Default is the process's watchdog: the heap is the process's, so there
// is one.
var Default = newWatchdog(readMetrics, runtime.GC)

// Open gives a runtime an account with Default. See Watchdog.Open.
func Open(budget int64, onOver func(*ExceededError)) *Account { return Default.Open(budget, onOver) }

// Watchdog samples the heap and charges what runtimes hold to them. See
// the package documentation for how.
type Watchdog struct {
	read    func(*sample)
	collect func()
	// room reads what the host has left (nil: no limit known).
	room func() *HostRoom
	// tickMu makes a tick and a collection a request forces (collectNow)
	// take turns: each samples, collects and settles as one.
	tickMu sync.Mutex

	mu       sync.Mutex
	accounts map[*Account]struct{}
	ticking  bool
	// parked is set while the watchdog's goroutine waits for an account
	// to enter or close instead of ticking: nothing executed in its last
	// tick and nothing waits on a collection. A runtime that does not
	// execute allocates nothing to charge, so an engine host whose
	// threads all wait (on a model, a person, a timer) spends no CPU on
	// the watchdog. Enter and Close take it (parked → false) and send
	// wakeup a token.
	parked    atomic.Bool
	wakeup    chan struct{}
	hostLimit int64 // bytes of live heap the host may hold (0: unknown)

	// The books, under mu. Charges are float64: shares of a byte.
	started        bool
	last           sample
	lastLive       float64
	otherPending   float64 // allocated while no runtime ran JavaScript
	otherConfirmed float64 // live heap nobody's JavaScript is charged for
	released       float64 // charges of closed runtimes not yet seen freed
	releasedAge    int
	// releasedSince is the first sample after the last close (0: not
	// taken yet); a collection that starts an Interval after it cannot
	// find the closed runtimes' memory live.
	releasedSince int64
	firing        *Account // stopped, not yet closed
	firedAt       int64
	settleFirst   bool // a stopped runtime closed: count its memory freed before judging again
	nextForce     int64
	lastForced    int64  // when the last forced collection ended
	forcedAllocs  uint64 // and the bytes ever allocated then
	// growing says the last collection found a runtime's charge up by an
	// eighth of its budget or more: it is building, not churning, and the
	// next collection to judge it may come sooner.
	growing bool
	// explicit is what Reserve counted since the last sample: already
	// charged to the runtimes that asked, so not shared out again.
	explicit float64
}

// sample is one reading of the runtime's heap figures.
type sample struct {
	at     int64  // monotonic nanoseconds (nanotime)
	allocs uint64 // bytes ever allocated on the heap
	cycles uint64 // collections completed
	live   uint64 // live heap marked by the last collection
}

func newWatchdog(read func(*sample), collect func()) *Watchdog {
	return &Watchdog{read: read, collect: collect, room: hostRoom, accounts: map[*Account]struct{}{}, wakeup: make(chan struct{}, 1)}
}

var metricNames = []metrics.Sample{
	{Name: "/gc/heap/allocs:bytes"},
	{Name: "/gc/cycles/total:gc-cycles"},
	{Name: "/gc/heap/live:bytes"},
}

var metricsMu sync.Mutex

func readMetrics(s *sample) {
	metricsMu.Lock()
	defer metricsMu.Unlock()
	metrics.Read(metricNames)
	s.at = nanotime()
	s.allocs = metricNames[0].Value.Uint64()
	s.cycles = metricNames[1].Value.Uint64()
	s.live = metricNames[2].Value.Uint64()
}

var epoch = time.Now()

// nanotime is a monotonic clock, never 0 (0 means "not executing").
func nanotime() int64 { return int64(time.Since(epoch)) + 1 }

// SetHostLimit sets the live heap the whole host may hold (bytes; 0: no
// limit). When a collection finds more live than that, the runtime charged
// the most is stopped, whatever its own budget.
func (w *Watchdog) SetHostLimit(n int64) {
	w.mu.Lock()
	w.hostLimit = n
	w.mu.Unlock()
}

// Account is one runtime's standing with the watchdog. Enter and Leave are
// called on the runtime's own goroutine; the rest is the watchdog's.
type Account struct {
	w      *Watchdog
	budget int64
	onOver func(*ExceededError)

	enteredAt atomic.Int64 // nanotime of Enter; 0 while not executing
	busy      atomic.Int64 // nanoseconds executed, finished intervals only

	// Under w.mu.
	seenBusy int64
	share    int64 // executed since the last sample
	// ran and ranBefore say whether it executed since the last collection
	// and in the cycle before: only such a runtime can have grown.
	ran, ranBefore bool
	pending        float64
	confirmed      float64
	// burst is what it was charged in the last tick beyond what it had
	// reserved: an operation nothing asked first (s + s) allocating
	// that much in one go.
	burst   float64
	settled float64 // confirmed after the previous collection
	fired   bool
	closed  bool
}

// Open registers a runtime with budget bytes (Off: none; the host's limit
// still applies). onOver is called once, from the watchdog's goroutine,
// when the runtime must stop, and must not block. Close the account
// when the runtime is dropped.
func (w *Watchdog) Open(budget int64, onOver func(*ExceededError)) *Account {
	a := &Account{w: w, budget: budget, onOver: onOver}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.accounts[a] = struct{}{}
	if !w.ticking {
		w.ticking = true
		go w.run()
	}
	return a
}

// Enter marks the start of JavaScript execution (or of Go work on the
// runtime's behalf on its goroutine). It is two atomic operations and a
// clock read; a nil account does nothing.
func (a *Account) Enter() {
	if a != nil && a.enteredAt.Load() == 0 {
		a.enteredAt.Store(nanotime())
		// After the store: a watchdog that parks at the same moment
		// either sees this account executing or finds parked taken.
		a.w.unpark()
	}
}

// unpark wakes the watchdog's goroutine if it is parked.
func (w *Watchdog) unpark() {
	if w.parked.Load() && w.parked.CompareAndSwap(true, false) {
		select {
		case w.wakeup <- struct{}{}:
		default:
		}
	}
}

// Leave marks the end of execution: the runtime waits for Go work, or a
// step is over.
func (a *Account) Leave() {
	if a == nil {
		return
	}
	if t := a.enteredAt.Load(); t != 0 {
		a.busy.Add(nanotime() - t)
		a.enteredAt.Store(0)
	}
}

// busyUpTo is how long the runtime has executed by now. busy is read
// before enteredAt: a Leave in between is then missed once and counted at
// the next sample, never counted twice.
func (a *Account) busyUpTo(now int64) int64 {
	b := a.busy.Load()
	if t := a.enteredAt.Load(); t != 0 && now > t {
		b += now - t
	}
	return b
}

// Close drops the account. What the runtime was charged is expected back
// at the next collections.
func (a *Account) Close() {
	if a == nil {
		return
	}
	w := a.w
	w.mu.Lock()
	defer w.mu.Unlock()
	if a.closed {
		return
	}
	// What it held is to be seen freed, and with no account left the
	// goroutine ends: either needs ticks.
	defer w.unpark()
	a.closed = true
	delete(w.accounts, a)
	w.released += a.confirmed
	w.releasedAge, w.releasedSince = 0, 0
	if a.fired {
		w.settleFirst = true
	}
	if w.firing == a {
		w.firing = nil
	}
}

// Held is what the account is charged now (bytes): its share of the live
// heap at the last collection and of what it allocated since.
func (a *Account) Held() int64 {
	a.w.mu.Lock()
	defer a.w.mu.Unlock()
	return int64(a.confirmed + a.pending)
}

func (w *Watchdog) run() {
	t := time.NewTicker(Interval)
	defer t.Stop()
	for range t.C {
		switch w.tick() {
		case tickDone:
			return
		case tickPark:
			t.Stop()
			<-w.wakeup
			t.Reset(Interval)
		}
	}
}

// tickOutcome is what a tick leaves the watchdog's goroutine to do.
type tickOutcome int

const (
	tickOn   tickOutcome = iota // tick again after Interval
	tickPark                    // wait for wakeup (parked is set)
	tickDone                    // no account is open: end
)

// verdict is what a look at the books decided.
type verdict struct {
	force bool // collect now to learn what is live
	stop  *Account
	err   *ExceededError
}

// tick samples the heap once and acts on it. It reports tickDone (and
// the ticker stops) when no account is open, and tickPark when the
// watchdog may wait for an account to enter.
func (w *Watchdog) tick() tickOutcome {
	w.tickMu.Lock()
	defer w.tickMu.Unlock()
	var s sample
	w.read(&s)
	w.mu.Lock()
	if len(w.accounts) == 0 {
		w.ticking, w.started = false, false
		w.mu.Unlock()
		return tickDone
	}
	v := w.observe(s, 0)
	park := !v.force && v.stop == nil && w.mayPark(s.at)
	w.mu.Unlock()
	if v.force {
		t0 := s.at
		w.collect()
		w.read(&s)
		w.mu.Lock()
		v = w.observe(s, t0)
		gap := int64(forceGap)
		if w.growing {
			gap = int64(Interval)
		}
		w.nextForce = s.at + max(gap, min(forceCostFactor*(s.at-t0), int64(maxForceGap)))
		w.lastForced, w.forcedAllocs = s.at, s.allocs
		w.mu.Unlock()
	}
	if v.stop != nil {
		v.stop.onOver(v.err)
	}
	if park {
		return tickPark
	}
	return tickOn
}

// mayPark sets parked if no account executed since the last sample nor
// does now, and the books wait on nothing a tick would do: no runtime
// stopped and not yet closed, no closed runtime's memory to see freed,
// no runtime seen growing. Under w.mu.
func (w *Watchdog) mayPark(now int64) bool {
	if w.firing != nil || w.released > 0 || w.growing {
		return false
	}
	quiet := func() bool {
		for a := range w.accounts {
			if a.share > 0 || a.busyUpTo(now) > a.seenBusy || a.enteredAt.Load() != 0 {
				return false
			}
		}
		return true
	}
	if !quiet() {
		return false
	}
	w.parked.Store(true)
	// An account that entered between the look and the store did not see
	// parked set, so look again; if it did see it, it took parked back
	// and its token is waiting for the goroutine.
	if quiet() || !w.parked.CompareAndSwap(true, false) {
		return true
	}
	return false
}

// observe charges the allocations since the last sample to the runtimes
// that executed meanwhile, settles the charges when a collection has
// finished, and judges. forced is when the collection the watchdog forced
// just before s began (0: none, and observe may ask for one). Under w.mu.
func (w *Watchdog) observe(s sample, forced int64) verdict {
	if !w.started {
		// First sample: what is live now is the host's.
		w.started = true
		w.last, w.lastLive, w.otherConfirmed = s, float64(s.live), float64(s.live)
		w.otherPending, w.released, w.explicit = 0, 0, 0
		for a := range w.accounts {
			a.seenBusy = a.busyUpTo(s.at)
		}
		return verdict{}
	}
	if w.released > 0 && w.releasedSince == 0 {
		w.releasedSince = s.at
	}
	w.charge(s)
	if s.cycles != w.last.cycles {
		freed := forced > 0 && w.releasedSince > 0 && forced >= w.releasedSince+int64(Interval)
		w.settle(float64(s.live), freed)
	}
	w.last = s
	return w.judge(s, forced == 0)
}

// charge splits what was allocated since the last sample between the
// runtimes by how long each executed, as a share of the elapsed time (or
// of their total, when several ran at once). The rest was allocated by Go
// work with no JavaScript running: the host's.
func (w *Watchdog) charge(s sample) {
	alloc := float64(0)
	if s.allocs > w.last.allocs {
		alloc = float64(s.allocs - w.last.allocs)
	}
	alloc = max(alloc-w.explicit, 0)
	w.explicit = 0
	var total int64
	for a := range w.accounts {
		cur := a.busyUpTo(s.at)
		a.share = 0
		if cur > a.seenBusy {
			a.ran = true
			a.share = cur - a.seenBusy
			a.seenBusy = cur
			total += a.share
		}
	}
	elapsed := s.at - w.last.at
	norm := max(total, elapsed, 1)
	given := 0.0
	for a := range w.accounts {
		a.burst = 0
		if a.share > 0 {
			g := alloc * float64(a.share) / float64(norm)
			a.pending += g
			a.burst = g
			given += g
		}
	}
	w.otherPending += max(alloc-given, 0)
}

// settle updates the charges for the live heap a collection found. Growth
// is split by what each allocated since the previous collection, at most
// all of it: survivors are the survivors of those allocations. A decrease
// first pays back the memory of closed runtimes, then lowers every charge
// in proportion. freed says the collection began well after the last
// runtime closed: what closed runtimes held is gone, and the rest of the
// change is growth or release of the others.
func (w *Watchdog) settle(live float64, freed bool) {
	dL := live - w.lastLive
	w.lastLive = live
	if freed {
		dL += w.released
		w.released = 0
	}
	if dL >= 0 {
		total := w.otherPending
		for a := range w.accounts {
			total += a.pending
		}
		given := 0.0
		if total > 0 {
			for a := range w.accounts {
				g := min(a.pending, dL*a.pending/total)
				a.confirmed += g
				given += g
			}
		}
		w.otherConfirmed += dL - given
	} else {
		drop := -dL
		back := min(w.released, drop)
		w.released -= back
		drop -= back
		if drop > 0 {
			sum := w.otherConfirmed
			for a := range w.accounts {
				sum += a.confirmed
			}
			f := 0.0
			if sum > drop {
				f = 1 - drop/sum
			}
			w.otherConfirmed *= f
			for a := range w.accounts {
				a.confirmed *= f
			}
		}
	}
	w.otherPending = 0
	w.growing = false
	for a := range w.accounts {
		a.pending = 0
		a.ranBefore, a.ran = a.ran, false
		if a.budget > 0 && a.confirmed-a.settled >= float64(a.budget)/8 {
			w.growing = true
		}
		a.settled = a.confirmed
	}
	if w.released > 0 {
		if w.releasedAge++; w.releasedAge >= releasedCycles {
			w.otherConfirmed += w.released
			w.released = 0
		}
	}
	if w.released == 0 {
		w.releasedSince = 0
	}
	w.settleFirst = false
}

// judge decides whether a runtime must stop, or a collection is needed to
// tell. A runtime is stopped on what a collection found live (its
// confirmed charge), never on allocation alone: garbage is not held. One
// runtime at a time, the one charged the most.
func (w *Watchdog) judge(s sample, mayForce bool) verdict {
	if v, ok := w.judgeBursts(s); ok {
		return v
	}
	if w.firing != nil {
		if s.at-w.firedAt < int64(holdoff) {
			return verdict{}
		}
		w.firing = nil // stuck closing; do not let it shield the others
	}
	var worst *Account
	worstOver := 0.0
	suspect := false
	// biggest is the host limit's choice: of the runtimes that executed
	// lately, and so may be what grew, the one charged the most. A thread
	// that holds much but waits on an agent is not what filled the heap.
	var biggest, overShare *Account
	pendingTotal := w.otherPending
	share := float64(w.hostLimit) / threadShare
	for a := range w.accounts {
		pendingTotal += a.pending
		if a.fired {
			continue
		}
		if (a.ran || a.ranBefore) && (biggest == nil || a.confirmed > biggest.confirmed) {
			biggest = a
		}
		// A runtime that waits cannot copy what it holds; it is judged
		// on its share once it executes again.
		if w.hostLimit > 0 && (a.ran || a.ranBefore) {
			if a.confirmed > share {
				if overShare == nil || a.confirmed > overShare.confirmed {
					overShare = a
				}
			} else if a.confirmed+a.pending > share {
				suspect = true
			}
		}
		if a.budget <= 0 {
			continue
		}
		b := float64(a.budget)
		if a.confirmed > b {
			if over := a.confirmed / b; over > worstOver {
				worst, worstOver = a, over
			}
		} else if a.confirmed+a.pending > b {
			suspect = true
		}
	}
	var err *ExceededError
	switch {
	case worst != nil:
		err = &ExceededError{Budget: worst.budget, Held: int64(worst.confirmed)}
	case w.hostLimit > 0 && w.lastLive > float64(w.hostLimit) && biggest != nil && biggest.confirmed*hostShare >= w.lastLive:
		worst = biggest
		err = &ExceededError{Budget: biggest.budget, Held: int64(biggest.confirmed), HostLimit: w.hostLimit}
	case overShare != nil:
		worst = overShare
		err = &ExceededError{Budget: overShare.budget, Held: int64(overShare.confirmed), HostLimit: w.hostLimit, Share: true}
	case w.hostLimit > 0 && w.lastLive+pendingTotal > float64(w.hostLimit):
		suspect = true
	}
	if worst != nil && w.settleFirst {
		// Memory of the runtime stopped last may still count as live
		// (and as others' growth); a collection sorts that out first.
		if mayForce {
			return verdict{force: true}
		}
		return verdict{}
	}
	if worst != nil {
		worst.fired = true
		w.firing, w.firedAt = worst, s.at
		return verdict{stop: worst, err: err}
	}
	if suspect && mayForce && s.at >= w.nextForce {
		return verdict{force: true}
	}
	// Once per release, and not held back as long as collections for
	// suspects are: the next judgement depends on it.
	if mayForce && w.released >= releaseCollectMin && w.releasedSince > 0 && s.at >= w.releasedSince+int64(Interval) && s.at >= w.lastForced+int64(forceGap) {
		return verdict{force: true}
	}
	return verdict{}
}

// judgeBursts stops, at once, a runtime that allocated more than half its
// share of the host's limit within the last tick without asking (one
// operation such as s + s copying a large string): the next such
// operation, twice as large, would take the host past its limit before
// a collection could confirm what it holds. What calls reserved does not
// count (see Reserve). It does not wait for another stop to settle.
func (w *Watchdog) judgeBursts(s sample) (verdict, bool) {
	if w.hostLimit <= 0 {
		return verdict{}, false
	}
	limit := float64(w.hostLimit) / threadShare / 2
	var worst *Account
	for a := range w.accounts {
		if !a.fired && a.burst > limit && (worst == nil || a.burst > worst.burst) {
			worst = a
		}
	}
	if worst == nil {
		return verdict{}, false
	}
	worst.fired = true
	w.firing, w.firedAt = worst, s.at
	err := &ExceededError{Budget: worst.budget, Held: int64(worst.confirmed + worst.pending), HostLimit: w.hostLimit, Burst: int64(worst.burst)}
	return verdict{stop: worst, err: err}, true
}
