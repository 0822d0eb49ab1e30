package membudget

import (
	"fmt"
)

// ReserveFloor is the smallest request Reserve and Fits look at: one call
// allocating less cannot take a host down, and a runtime that makes many
// of them is the watchdog's to judge. Above it a request costs a look at
// the books and at the host's memory, which is small beside allocating
// (and zeroing) a MiB.
const ReserveFloor = 1 << 20

// RefusedError is why one call of a runtime was refused before it
// allocated: what it asked for at once would not fit in what its thread's
// budget leaves, or in what the host can still give.
type RefusedError struct {
	// Asked is what the call would have allocated at once (bytes).
	Asked int64
	// Budget is the thread's budget (Off: none), Held what the runtime
	// was charged when it asked.
	Budget, Held int64
	// Host is set when it was the host's memory, not the thread's budget,
	// that refused: what it had left, its limit and where that comes from.
	Host *HostRoom
}

// Is makes errors.Is(err, ErrExceeded) true: a refused call is the budget
// (or the host's limit) speaking, as a stopped runtime is.
func (e *RefusedError) Is(target error) bool { return target == ErrExceeded }

// Error says what the call asked for, what limit refused it, and what to
// do: raise the budget when the host could give that much, else allocate
// less at once.
func (e *RefusedError) Error() string {
	budget := "off"
	if e.Budget > 0 {
		budget = FormatSize(e.Budget)
	}
	if e.Host != nil {
		return fmt.Sprintf("out of memory: one call would allocate %s at once, more than the engine host has left (about %s of %s, from %s); "+
			"this thread's memory budget is %s and its JavaScript holds about %s. "+
			"Allocate less at once (read or build the data in parts), or give the host more memory (GOMEMLIMIT, or the limit of its container or ulimit)",
			FormatSize(e.Asked), FormatSize(max(e.Host.Room, 0)), FormatSize(e.Host.Limit), e.Host.Source, budget, FormatSize(e.Held))
	}
	suggest := FormatSize(nextPowerOfTwo(2 * (e.Held + e.Asked)))
	return fmt.Sprintf("memory budget exceeded: one call would allocate %s at once, more than this thread's budget of %s leaves (its JavaScript holds about %s). "+
		"If the workflow needs that much, raise memoryBudget in the config section of workflow.yaml (memoryBudget: %s) "+
		"or start the engine host with --memory-budget %s; \"off\" removes the budget. Otherwise allocate less at once (read or build the data in parts)",
		FormatSize(e.Asked), budget, FormatSize(e.Held), suggest, suggest)
}

// HostRoom is how much more memory the host process can take at once, as
// far as one of its limits says.
type HostRoom struct {
	// Room is what is left (bytes), Limit the whole of that limit.
	Room, Limit int64
	// Source names the limit: "the Go memory limit", "RLIMIT_AS" or
	// "available memory".
	Source string
}

// Reserve asks for n bytes that one call of the runtime is about to
// allocate at once, and counts them as the runtime's when they fit: in
// what its budget leaves beside what it holds, and in what the host has
// left. Otherwise it returns a *RefusedError and the caller must allocate
// nothing. n is what the call will allocate, not a bound (see Fits).
// Requests below ReserveFloor always fit. A nil account only asks the
// host. Any goroutine may call it.
func (a *Account) Reserve(n int64) error { return a.admit(n, true) }

// Fits is Reserve for a bound on what a call may allocate rather than what
// it will: nothing is counted, since the call may take much less.
func (a *Account) Fits(n int64) error { return a.admit(n, false) }

func (a *Account) admit(n int64, charge bool) error {
	if n < ReserveFloor {
		return nil
	}
	if a == nil {
		if h := Default.room(); h != nil && n > h.Room {
			return &RefusedError{Asked: n, Host: h}
		}
		return nil
	}
	w := a.w
	for collected := false; ; collected = true {
		err, garbage := w.judgeAsk(a, n, charge)
		if err == nil {
			return nil
		}
		// Memory the runtime (or the host) let go of counts until a
		// collection: find out before refusing, though not more often
		// than the watchdog itself forces one.
		if collected || !garbage || !w.mayCollect(n) {
			return err
		}
		w.collectNow()
	}
}

// judgeAsk decides one request, and counts it when charge is set and it
// fits. garbage says a collection could change the answer.
func (w *Watchdog) judgeAsk(a *Account, n int64, charge bool) (err *RefusedError, garbage bool) {
	host := w.room() // system calls: outside the lock
	w.mu.Lock()
	defer w.mu.Unlock()
	held := int64(a.confirmed + a.pending)
	// Compared as what is left, never as held+n: a request near the top
	// of int64 (a length a script computed) would overflow the sum past
	// every limit.
	if a.budget > 0 && n > a.budget-held {
		return &RefusedError{Asked: n, Budget: a.budget, Held: held}, n <= a.budget
	}
	if w.hostLimit > 0 {
		// One runtime's share of the host: see threadShare.
		share := w.hostLimit / threadShare
		if n > share-held {
			room := &HostRoom{Room: share - held, Limit: share, Source: "one thread's share, a third, of the host's memory limit"}
			return &RefusedError{Asked: n, Budget: a.budget, Held: held, Host: room}, n <= share
		}
	}
	if host != nil {
		// What was reserved since the last sample may not be allocated
		// yet: it is spoken for all the same.
		host.Room -= int64(w.explicit)
		if n > host.Room {
			return &RefusedError{Asked: n, Budget: a.budget, Held: held, Host: host}, n <= host.Limit
		}
	}
	if charge {
		a.pending += float64(n)
		a.ran = true
		w.explicit += float64(n)
	}
	return nil, false
}

// mayCollect says whether a request for n bytes may force a collection
// now: when the watchdog has not forced one lately, or when at least n
// bytes were allocated since the last (a role that churns large buffers
// makes that much garbage between two refusals). A script that retries a
// refused request without allocating meanwhile forces none.
func (w *Watchdog) mayCollect(n int64) bool {
	var s sample
	w.read(&s)
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lastForced == 0 || s.at-w.lastForced >= int64(forceGap) || s.allocs-w.forcedAllocs >= uint64(n)
}

// collectNow forces a collection and settles the books on it, as a tick
// that forces one does, and stops whom it finds over.
func (w *Watchdog) collectNow() {
	w.tickMu.Lock()
	defer w.tickMu.Unlock()
	var s sample
	w.read(&s)
	t0 := s.at
	w.collect()
	w.read(&s)
	w.mu.Lock()
	v := w.observe(s, t0)
	w.lastForced, w.forcedAllocs = s.at, s.allocs
	w.nextForce = max(w.nextForce, s.at+int64(forceGap))
	w.mu.Unlock()
	if v.stop != nil {
		v.stop.onOver(v.err)
	}
}
