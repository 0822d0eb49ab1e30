// Package wake tells the readers of a storage root when the threads they
// follow may have changed, so that they read again at once instead of on
// a timer. The readers — the connector's live streams and event feed, the
// CLI's live command — read what is new from the files exactly as a poll
// would (by position in the index, the chain and the debug log); being
// woken only decides when they look. Each subscribes before its first
// read, so a change is either in what it read or wakes it afterwards.
//
// What wakes them is the root's engine host: it publishes each change to
// the threads it runs as it happens (host.Change), and a Hub holds one
// change stream to it for all of its subscribers, and wakes those a change
// concerns. Where nothing can tell of changes (Hub.Mode), readers look on
// a timer instead: often with a host older than its change stream (Polled),
// rarely with no host (NoHost: no thread of this engine moves then; what
// changes the root is the original TypeScript engine's worker on a root
// shared with it, or a command such as `thread rm`). When the host's
// stream breaks (the host stopped or died) every subscriber is woken, and
// finds the threads it followed no longer running.
package wake

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/uncaged/workflow/engine/host"
	"github.com/uncaged/workflow/engine/storage"
)

// Source is what tells of changes as they happen: an engine host's change
// stream.
type Source interface {
	// Changes opens the host's change stream (host.Client.Changes):
	// host.ErrNoHost when no host runs, host.ErrNoChangeStream when the
	// host is older than the stream.
	Changes(ctx context.Context) (*host.ChangeStream, error)
	// HostAppeared holds a token when a host may have started since the
	// last look, so that a hub waiting to subscribe tries at once (nil:
	// the hub tries again after its retry time).
	HostAppeared() <-chan struct{}
}

// Mode is what the hub knows of the host's change stream, and so how its
// subscribers are to look when nothing wakes them.
type Mode int

const (
	// Unknown: the hub is trying to reach the host's change stream.
	Unknown Mode = iota
	// Live: the host's change stream is open; every change of a thread it
	// runs wakes the subscribers concerned.
	Live
	// NoHost: no host runs (or there is no engine), so nothing of this
	// engine writes the root.
	NoHost
	// Polled: a host runs that cannot tell of changes (or the engine is
	// not one that can): subscribers poll as they did before the stream.
	Polled
)

// What woke a Waker (Waker.Woken).
const (
	// ByLog: a debug-log line.
	ByLog uint32 = 1 << iota
	// ByOther: a step, status, start, end or removal; the host's stream
	// beginning or ending; lost changes.
	ByOther
)

// Hub wakes its subscribers when the threads they follow change.
type Hub struct {
	src   Source // nil: the mode is fixed at fixed
	fixed Mode
	// retry is how long the hub waits before trying the host again when
	// none runs (and ten times that for a host with no change stream).
	retry time.Duration
	log   *slog.Logger

	mu       sync.Mutex
	mode     Mode
	all      map[*Waker]struct{}            // subscribers to every thread
	byThread map[string]map[*Waker]struct{} // subscribers to one thread
	n        int                            // subscribers
	gen      uint64                         // of the watch loop in force
	stop     context.CancelFunc             // ends it; nil while none runs
}

// NewHub returns a hub that listens to src while it has subscribers, and
// tries again every retry when it cannot. A nil src fixes the hub's mode
// at fixed (NoHost: there is no engine; Polled: one that cannot tell of
// changes).
func NewHub(src Source, fixed Mode, retry time.Duration, log *slog.Logger) *Hub {
	h := &Hub{src: src, retry: retry, log: log, all: map[*Waker]struct{}{}, byThread: map[string]map[*Waker]struct{}{}}
	if src == nil {
		h.fixed = fixed
	}
	h.mode = h.fixed
	return h
}

// Mode is the hub's mode now.
func (h *Hub) Mode() Mode {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.mode
}

// Waker is one subscription: C holds a token once something it follows
// may have changed.
type Waker struct {
	// C holds a token once something the waker follows may have changed
	// since the last receive.
	C      <-chan struct{}
	c      chan struct{}
	hub    *Hub
	thread string // "": every thread
	logs   bool   // debug-log lines wake it too
	why    atomic.Uint32
}

// Subscribe wakes the returned waker when thread changes ("": any
// thread; logs: its debug-log lines too), when the host's stream begins
// or ends, and when changes were lost. The first subscriber starts the
// hub's stream to the host; the last one to close stops it.
func (h *Hub) Subscribe(thread string, logs bool) *Waker {
	c := make(chan struct{}, 1)
	w := &Waker{C: c, c: c, hub: h, thread: thread, logs: logs}
	h.mu.Lock()
	defer h.mu.Unlock()
	if thread == "" {
		h.all[w] = struct{}{}
	} else {
		if h.byThread[thread] == nil {
			h.byThread[thread] = map[*Waker]struct{}{}
		}
		h.byThread[thread][w] = struct{}{}
	}
	h.n++
	if h.src != nil && h.stop == nil {
		ctx, cancel := context.WithCancel(context.Background())
		h.gen++
		h.stop = cancel
		go h.watch(ctx, h.gen)
	}
	return w
}

// Close ends the subscription.
func (w *Waker) Close() {
	h := w.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	if w.thread == "" {
		delete(h.all, w)
	} else if subs := h.byThread[w.thread]; subs != nil {
		delete(subs, w)
		if len(subs) == 0 {
			delete(h.byThread, w.thread)
		}
	}
	h.n--
	if h.n == 0 && h.stop != nil {
		h.stop()
		h.stop = nil
		h.gen++ // the loop stopping has no say any more
		h.mode = h.fixed
	}
}

func (w *Waker) wake(why uint32) {
	w.why.Or(why)
	select {
	case w.c <- struct{}{}:
	default: // a token waits already
	}
}

// Woken returns what woke w since the last call (ByLog, ByOther; 0 for a
// token whose cause an earlier call took already).
func (w *Waker) Woken() uint32 { return w.why.Swap(0) }

// wakeAll wakes every subscriber. Callers hold h.mu.
func (h *Hub) wakeAll() {
	for w := range h.all {
		w.wake(ByOther)
	}
	for _, subs := range h.byThread {
		for w := range subs {
			w.wake(ByOther)
		}
	}
}

// deliver wakes the subscribers a change concerns.
func (h *Hub) deliver(c host.Change) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if c.Kind == host.ChangeLost {
		h.wakeAll()
		return
	}
	why := ByOther
	if c.Kind == host.ChangeLog {
		why = ByLog
	}
	for w := range h.byThread[c.ThreadID] {
		if w.logs || why != ByLog {
			w.wake(why)
		}
	}
	for w := range h.all {
		if w.logs || why != ByLog {
			w.wake(why)
		}
	}
}

// setMode records what the loop of generation gen found, waking everyone
// when it differs from before, or always with wakeAll.
func (h *Hub) setMode(gen uint64, m Mode, wakeAll bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if gen != h.gen {
		return // a loop that was stopped
	}
	if h.mode != m || wakeAll {
		h.mode = m
		h.wakeAll()
	}
}

// watch holds the host's change stream open while there are subscribers,
// and says, through the mode, how the readers are to look when it cannot.
func (h *Hub) watch(ctx context.Context, gen uint64) {
	var lastErr string
	for ctx.Err() == nil {
		began := time.Now()
		stream, err := h.src.Changes(ctx)
		var wait time.Duration
		switch {
		case err == nil:
			lastErr = ""
			// Everyone reads again: what changed before the stream began
			// told no one.
			h.setMode(gen, Live, true)
			for {
				c, err := stream.Next()
				if err != nil {
					break
				}
				h.deliver(c)
			}
			stream.Close()
			// The host stopped, died or dropped the stream: every reader
			// looks again (the threads it followed may have stopped), and
			// the hub tries again — at once, unless the stream did not
			// last, so that a host that keeps dropping it is not spun on.
			h.setMode(gen, Unknown, true)
			if time.Since(began) < h.retry {
				wait = h.retry
			}
		case ctx.Err() != nil:
			return
		case errors.Is(err, host.ErrNoChangeStream):
			h.setMode(gen, Polled, false)
			wait = 10 * h.retry
		default:
			if !errors.Is(err, host.ErrNoHost) && err.Error() != lastErr && h.log != nil {
				h.log.Warn("the engine host's change stream could not be opened; looking for changes on a timer meanwhile", "err", err)
			}
			lastErr = err.Error()
			h.setMode(gen, NoHost, false)
			wait = h.retry
		}
		if wait > 0 && !h.pause(ctx, wait) {
			return
		}
	}
}

// pause waits d, or less when a host may have started; false when ctx
// ended.
func (h *Hub) pause(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
	case <-h.src.HostAppeared():
	}
	return true
}

// Dialer is a Source that dials the root's engine host for each stream:
// for a process that holds no client of its own (the CLI).
type Dialer struct{ Layout storage.Layout }

// Changes implements Source.
func (d Dialer) Changes(ctx context.Context) (*host.ChangeStream, error) {
	c, err := host.Dial(d.Layout)
	if err != nil {
		return nil, err
	}
	s, err := c.Changes(ctx)
	if err != nil {
		c.Close()
		return nil, err
	}
	return s, nil
}

// HostAppeared implements Source: a Dialer learns of a host only by
// trying again.
func (Dialer) HostAppeared() <-chan struct{} { return nil }
