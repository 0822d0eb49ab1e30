package server

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/uncaged/workflow/gateway/store"
)

// coalesceRig is a coalescer writing to a slice on a clock the test
// moves.
type coalesceRig struct {
	mu      sync.Mutex
	now     time.Time
	written []store.AuditEntry
	c       *coalescer
}

func newCoalesceRig() *coalesceRig {
	r := &coalesceRig{now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	r.c = newCoalescer(func(e store.AuditEntry) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.written = append(r.written, e)
	}, func() time.Time { r.mu.Lock(); defer r.mu.Unlock(); return r.now }, time.Minute)
	return r
}

func (r *coalesceRig) advance(d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.now = r.now.Add(d)
}

// take returns what was written since the last take.
func (r *coalesceRig) take() []store.AuditEntry {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.written
	r.written = nil
	return out
}

// Of each kind, a burst is written as it comes and the rest counted into
// one summary when its window ends; kinds do not share bursts; nothing is
// lost, whatever the pace and the number of kinds.
func TestCoalescerBoundsEveryKind(t *testing.T) {
	t.Parallel()
	for _, n := range []int{1, auditBurst, auditBurst + 1, 3 * auditBurst, 1000} {
		r := newCoalesceRig()
		for i := range n {
			r.c.add("replace|m1", store.AuditEntry{Action: ActionReplace, Machine: "m1", Target: fmt.Sprint("event ", i)})
			r.c.add("refused|10.0.0.1", store.AuditEntry{Action: ActionRefused, Source: "10.0.0.1"})
			r.advance(time.Millisecond)
		}
		got := r.take()
		if want := 2 * min(n, auditBurst); len(got) != want {
			t.Fatalf("%d each: %d written at once, want %d", n, len(got), want)
		}
		r.c.sweep() // within the window: nothing yet
		if got := r.take(); len(got) != 0 {
			t.Fatalf("%d each: summaries before the window ended: %+v", n, got)
		}
		r.advance(time.Minute)
		r.c.sweep()
		summaries := r.take()
		held := n - min(n, auditBurst)
		if held == 0 {
			if len(summaries) != 0 {
				t.Fatalf("%d each: summaries of nothing: %+v", n, summaries)
			}
			continue
		}
		if len(summaries) != 2 {
			t.Fatalf("%d each: %d summaries", n, len(summaries))
		}
		for _, s := range summaries {
			if !strings.HasPrefix(s.Target, fmt.Sprintf("%d more like this from ", held)) {
				t.Errorf("%d each: summary %+v", n, s)
			}
			if s.Action == ActionReplace && (s.Machine != "m1" || !strings.HasSuffix(s.Target, fmt.Sprint("the last: event ", n-1))) {
				t.Errorf("%d each: summary %+v", n, s)
			}
		}
		if got := counterValue(r.c.coalesced.WithLabelValues(ActionReplace)); got != float64(held) {
			t.Errorf("%d each: coalesced %v", n, got)
		}
		// A new window starts with a new burst.
		r.c.add("replace|m1", store.AuditEntry{Action: ActionReplace})
		if got := r.take(); len(got) != 1 {
			t.Fatalf("%d each: the next window wrote %d", n, len(got))
		}
	}
}

// However many kinds come (an address each, rotated by an attacker), the
// coalescer tracks a bounded number, and what does not fit shares one
// kind per action: still bounded, still counted.
func TestCoalescerBoundsTheKinds(t *testing.T) {
	t.Parallel()
	r := newCoalesceRig()
	const kinds = maxCoalesceKinds + 1000
	for i := range kinds {
		r.c.add(fmt.Sprint("refused|", i), store.AuditEntry{Action: ActionRefused, Source: fmt.Sprint(i)})
	}
	if got := len(r.take()); got != maxCoalesceKinds+auditBurst {
		t.Fatalf("%d written", got)
	}
	r.c.mu.Lock()
	tracked := len(r.c.kinds)
	r.c.mu.Unlock()
	if tracked != maxCoalesceKinds+1 {
		t.Fatalf("%d kinds tracked", tracked)
	}
	r.c.flush()
	summaries := r.take()
	if len(summaries) != 1 || !strings.HasPrefix(summaries[0].Target, fmt.Sprintf("%d more like this", 1000-auditBurst)) {
		t.Fatalf("summaries %+v", summaries)
	}
	// Windows that ended make room again.
	r.advance(time.Minute)
	r.c.add("refused|new", store.AuditEntry{Action: ActionRefused, Source: "new"})
	r.c.mu.Lock()
	_, own := r.c.kinds["refused|new"]
	r.c.mu.Unlock()
	if !own {
		t.Fatal("a new kind went to the overflow after the windows ended")
	}
}
