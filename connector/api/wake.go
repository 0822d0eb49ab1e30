package api

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/uncaged/workflow/engine/host"
)

// The readers of the root that stay open — the live route's streams and
// the event feed — wait until something they show may have changed, then
// read what is new from the files exactly as a poll would: by position in
// the index, the chain and the debug log. So what they send, in what
// order, and what a reconnect resumes from, are the files' alone; being
// woken only decides when they look. Each subscribes before its first
// read, so a change is either in what it read or wakes it afterwards.
//
// What wakes them is the root's engine host: it publishes each change to
// the threads it runs as it happens (host.Change), and wakeHub holds one
// change stream to it for all of them, and wakes those a change concerns.
// Where nothing can tell of changes, they look on a timer instead
// (server.pollEvery):
//
//   - a host older than its change stream, or an Engine that is not a
//     HostEngine: every LivePoll, as before there was a stream;
//   - no host (or none reached yet): every SlowPoll. No thread of this
//     engine moves then; what changes the root is the original TypeScript
//     engine's worker on a root shared with it, or a command such as
//     `thread rm`. A stream on a thread nobody runs ends at once;
//   - a thread the original's worker runs, even with a host: every
//     SlowPoll, as the host does not know of it.
//
// When the host's stream breaks (the host stopped or died) every reader is
// woken, and finds the threads it followed no longer running.

// pollEvery is how often a reader that waits for changes looks at the
// files by itself: never (0) while the engine host tells of every change,
// except for a thread the original engine's worker runs (elsewhere),
// which the host knows nothing of.
func (s *server) pollEvery(elsewhere bool) time.Duration {
	switch s.wakes.current() {
	case pushLive:
		if elsewhere {
			return s.opts.SlowPoll
		}
		return 0
	case pushPolled:
		return s.opts.LivePoll
	}
	return s.opts.SlowPoll // no host, or none reached yet (which wakes everyone when it is)
}

// changeSource is an Engine that tells of changes as they happen:
// HostEngine, through its host's change stream.
type changeSource interface {
	// changes opens the host's change stream (host.Client.Changes):
	// host.ErrNoHost when no host runs, host.ErrNoChangeStream when the
	// host is older than the stream.
	changes(ctx context.Context) (*host.ChangeStream, error)
	// hostAppeared holds a token when a host may have started since the
	// last look, so that a hub waiting to subscribe tries at once.
	hostAppeared() <-chan struct{}
}

// pushMode is what the hub knows of the host's change stream.
type pushMode int

const (
	// pushUnknown: the hub is trying to reach the host's change stream.
	pushUnknown pushMode = iota
	// pushLive: the host's change stream is open; every change of a
	// thread it runs wakes the readers concerned.
	pushLive
	// pushNoHost: no host runs (or the API has no Engine), so nothing of
	// this engine writes the root.
	pushNoHost
	// pushPolled: a host runs that cannot tell of changes, or the Engine
	// is not a HostEngine: readers poll as they did before the stream.
	pushPolled
)

// wakeHub wakes the API's readers when the threads they follow change.
type wakeHub struct {
	src   changeSource // nil: the mode is fixed at fixed
	fixed pushMode
	// retry is how long the hub waits before trying the host again when
	// none runs (and ten times that for a host with no change stream).
	retry time.Duration
	log   *slog.Logger

	mu       sync.Mutex
	mode     pushMode
	all      map[*waker]struct{}            // subscribers to every thread
	byThread map[string]map[*waker]struct{} // subscribers to one thread
	n        int                            // subscribers
	gen      uint64                         // of the watch loop in force
	stop     context.CancelFunc             // ends it; nil while none runs
}

// waker is one subscription: c holds a token once something it follows
// may have changed, and why says what (wokeBy bits) since the last look.
type waker struct {
	hub    *wakeHub
	thread string // "": every thread
	logs   bool   // debug-log lines wake it too
	c      chan struct{}
	why    atomic.Uint32
}

// What woke a waker.
const (
	wokeByLog   uint32 = 1 << iota // a debug-log line
	wokeByOther                    // a step, status, start, end or removal; the host's stream beginning or ending; lost changes
)

func newWakeHub(engine Engine, retry time.Duration, log *slog.Logger) *wakeHub {
	h := &wakeHub{retry: retry, log: log, all: map[*waker]struct{}{}, byThread: map[string]map[*waker]struct{}{}}
	switch src, ok := engine.(changeSource); {
	case ok:
		h.src = src
	case engine == nil:
		h.fixed = pushNoHost
	default:
		h.fixed = pushPolled
	}
	h.mode = h.fixed
	return h
}

// current is the hub's mode now.
func (h *wakeHub) current() pushMode {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.mode
}

// subscribe wakes the returned waker when thread changes ("": any
// thread; logs: its debug-log lines too), when the host's stream begins
// or ends, and when changes were lost. The first subscriber starts the
// hub's stream to the host; the last one to close stops it.
func (h *wakeHub) subscribe(thread string, logs bool) *waker {
	w := &waker{hub: h, thread: thread, logs: logs, c: make(chan struct{}, 1)}
	h.mu.Lock()
	defer h.mu.Unlock()
	if thread == "" {
		h.all[w] = struct{}{}
	} else {
		if h.byThread[thread] == nil {
			h.byThread[thread] = map[*waker]struct{}{}
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

// close ends the subscription.
func (w *waker) close() {
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

func (w *waker) wake(why uint32) {
	w.why.Or(why)
	select {
	case w.c <- struct{}{}:
	default: // a token waits already
	}
}

// woken returns what woke w since the last call (wokeBy bits; 0 for a
// token whose cause an earlier call took already).
func (w *waker) woken() uint32 { return w.why.Swap(0) }

// wakeAll wakes every subscriber. Callers hold h.mu.
func (h *wakeHub) wakeAll() {
	for w := range h.all {
		w.wake(wokeByOther)
	}
	for _, subs := range h.byThread {
		for w := range subs {
			w.wake(wokeByOther)
		}
	}
}

// deliver wakes the subscribers a change concerns.
func (h *wakeHub) deliver(c host.Change) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if c.Kind == host.ChangeLost {
		h.wakeAll()
		return
	}
	why := wokeByOther
	if c.Kind == host.ChangeLog {
		why = wokeByLog
	}
	for w := range h.byThread[c.ThreadID] {
		w.wake(why)
	}
	for w := range h.all {
		if w.logs || why != wokeByLog {
			w.wake(why)
		}
	}
}

// setMode records what the loop of generation gen found, waking everyone
// when it differs from before, or always with wakeAll.
func (h *wakeHub) setMode(gen uint64, m pushMode, wakeAll bool) {
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
func (h *wakeHub) watch(ctx context.Context, gen uint64) {
	var lastErr string
	for ctx.Err() == nil {
		began := time.Now()
		stream, err := h.src.changes(ctx)
		var wait time.Duration
		switch {
		case err == nil:
			lastErr = ""
			// Everyone reads again: what changed before the stream began
			// told no one.
			h.setMode(gen, pushLive, true)
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
			h.setMode(gen, pushUnknown, true)
			if time.Since(began) < h.retry {
				wait = h.retry
			}
		case ctx.Err() != nil:
			return
		case errors.Is(err, host.ErrNoChangeStream):
			h.setMode(gen, pushPolled, false)
			wait = 10 * h.retry
		default:
			if !errors.Is(err, host.ErrNoHost) && err.Error() != lastErr {
				h.log.Warn("the engine host's change stream could not be opened; looking for changes on a timer meanwhile", "err", err)
			}
			lastErr = err.Error()
			h.setMode(gen, pushNoHost, false)
			wait = h.retry
		}
		if wait > 0 && !h.pause(ctx, wait) {
			return
		}
	}
}

// pause waits d, or less when a host may have started; false when ctx
// ended.
func (h *wakeHub) pause(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
	case <-h.src.hostAppeared():
	}
	return true
}
