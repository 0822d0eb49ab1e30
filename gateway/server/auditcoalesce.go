package server

import (
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/uncaged/workflow/gateway/store"
)

// Some audit entries come at a pace someone else sets: refusals of
// requests anyone can send, and the connections of two roots that share
// an instance key and replace each other at every reconnection. So that
// neither floods the log nor goes unseen, those entries are coalesced: of
// one kind (an action and a machine, or an action and a client address)
// the first auditBurst of each auditWindow are written as they come; the
// rest are counted and written as one summary entry when the window ends
// (or the gateway stops), naming how many there were, from when to when,
// and the last one. The number of kinds tracked at once is bounded too:
// past maxCoalesceKinds the newcomers share one kind per action.

// auditBurst is how many entries of one kind are written each window.
const auditBurst = 5

// auditWindow is how long a kind's burst lasts.
const auditWindow = time.Minute

// maxCoalesceKinds bounds the kinds tracked at once: an address per
// refused client, a name per flapping connector.
const maxCoalesceKinds = 4096

// overflowKind is the kind an entry shares when maxCoalesceKinds are
// tracked already.
func overflowKind(action string) string { return action + "|*" }

// burst is one kind's current window.
type burst struct {
	start   time.Time
	written int
	// held counts the entries not written, from firstHeld to last.
	held      int
	firstHeld time.Time
	last      store.AuditEntry
}

// coalescer writes entries through write, coalescing each kind's past
// its burst.
type coalescer struct {
	write  func(store.AuditEntry)
	now    func() time.Time
	window time.Duration
	// coalesced counts the entries folded into summaries, by action.
	coalesced *prometheus.CounterVec

	mu    sync.Mutex
	kinds map[string]*burst
}

func newCoalescer(write func(store.AuditEntry), now func() time.Time, window time.Duration) *coalescer {
	return &coalescer{write: write, now: now, window: window, kinds: map[string]*burst{},
		coalesced: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "uncaged_gateway_audit_coalesced_total",
			Help: "Audit entries not written one by one but counted in a summary entry, by action: past the burst of refusals from one address, or of connections under one name, in a minute.",
		}, []string{"action"})}
}

// add writes e, or counts it in its kind's summary when the kind's burst
// is spent.
func (c *coalescer) add(kind string, e store.AuditEntry) {
	now := c.now()
	if e.Time.IsZero() {
		e.Time = now
	}
	var summaries []store.AuditEntry
	c.mu.Lock()
	b := c.kinds[kind]
	if b != nil && now.Sub(b.start) >= c.window {
		summaries = appendSummary(summaries, b)
		delete(c.kinds, kind)
		b = nil
	}
	if b == nil && len(c.kinds) >= maxCoalesceKinds {
		summaries = c.sweepLocked(now, summaries)
		if len(c.kinds) >= maxCoalesceKinds {
			kind = overflowKind(e.Action)
			b = c.kinds[kind]
		}
	}
	if b == nil {
		b = &burst{start: now}
		c.kinds[kind] = b
	}
	write := b.written < auditBurst
	if write {
		b.written++
	} else {
		if b.held == 0 {
			b.firstHeld = e.Time
		}
		b.held++
		b.last = e
	}
	c.mu.Unlock()
	for _, s := range summaries {
		c.write(s)
	}
	if write {
		c.write(e)
	} else {
		c.coalesced.WithLabelValues(e.Action).Inc()
	}
}

// sweep writes the summaries of the windows that ended by now and
// forgets them.
func (c *coalescer) sweep() {
	c.mu.Lock()
	summaries := c.sweepLocked(c.now(), nil)
	c.mu.Unlock()
	for _, s := range summaries {
		c.write(s)
	}
}

func (c *coalescer) sweepLocked(now time.Time, summaries []store.AuditEntry) []store.AuditEntry {
	for kind, b := range c.kinds {
		if now.Sub(b.start) >= c.window {
			summaries = appendSummary(summaries, b)
			delete(c.kinds, kind)
		}
	}
	return summaries
}

// flush writes every pending summary, windows ended or not (the gateway
// is stopping).
func (c *coalescer) flush() {
	c.mu.Lock()
	var summaries []store.AuditEntry
	for kind, b := range c.kinds {
		summaries = appendSummary(summaries, b)
		delete(c.kinds, kind)
	}
	c.mu.Unlock()
	for _, s := range summaries {
		c.write(s)
	}
}

// appendSummary adds b's summary entry, if it held any back: the last
// entry held, its target saying how many there were and when.
func appendSummary(summaries []store.AuditEntry, b *burst) []store.AuditEntry {
	if b.held == 0 {
		return summaries
	}
	s := b.last
	s.Target = cleanTarget(fmt.Sprintf("%d more like this from %s to %s, coalesced; the last: %s", b.held,
		b.firstHeld.UTC().Format(time.RFC3339), b.last.Time.UTC().Format(time.RFC3339), b.last.Target))
	return append(summaries, s)
}

// run sweeps every quarter window until stop is closed.
func (c *coalescer) run(stop <-chan struct{}) {
	t := time.NewTicker(max(c.window/4, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			c.sweep()
		}
	}
}
