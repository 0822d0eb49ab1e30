package logging

import (
	"context"
	"io"
	"log/slog"
	"sync"
)

// maxQueued bounds the bytes waiting in a Queue; a line beyond it waits
// for the writer, so a log that cannot keep up slows its callers rather
// than growing without bound.
const maxQueued = 1 << 20

// Queue is a log writer that takes lines without a system call each: one
// goroutine writes whatever has gathered, so lines that come while it is
// writing leave together in its next write. Nothing waits on a timer: a
// line that finds the writer idle is written at once.
//
// A request log writes a line per request; on a busy gateway that write
// was one of its six system calls per proxied request. Lines still in the
// queue when a process dies are lost, which is why a logger built by
// NewQueued flushes after every warning and error: those are the lines
// that explain a death.
type Queue struct {
	w io.Writer

	mu      sync.Mutex
	cond    *sync.Cond
	pending []byte
	spare   []byte
	writing bool
	// queued and written count bytes since the start; Flush waits for
	// written to reach what queued was when it was called.
	queued, written uint64
	closed          bool
	wake            chan struct{}
}

// NewQueue starts a Queue writing to w; Close stops it.
func NewQueue(w io.Writer) *Queue {
	q := &Queue{w: w, wake: make(chan struct{}, 1)}
	q.cond = sync.NewCond(&q.mu)
	go q.drain()
	return q
}

// Write queues p (one whole log line, as slog's handlers write them).
// After Close it writes p itself.
func (q *Queue) Write(p []byte) (int, error) {
	q.mu.Lock()
	for len(q.pending) >= maxQueued && !q.closed {
		q.cond.Wait()
	}
	if q.closed {
		q.mu.Unlock()
		return q.w.Write(p)
	}
	q.pending = append(q.pending, p...)
	q.queued += uint64(len(p))
	if !q.writing {
		q.writing = true
		// Under the lock: Close may not close the channel meanwhile.
		select {
		case q.wake <- struct{}{}:
		default:
		}
	}
	q.mu.Unlock()
	return len(p), nil
}

// drain writes what is pending, batch after batch, until Close.
func (q *Queue) drain() {
	for range q.wake {
		q.mu.Lock()
		for len(q.pending) > 0 {
			batch := q.pending
			q.pending, q.spare = q.spare[:0], nil
			q.mu.Unlock()
			// A log that cannot be written has nowhere to say so.
			_, _ = q.w.Write(batch)
			q.mu.Lock()
			q.written += uint64(len(batch))
			if cap(batch) <= maxQueued {
				q.spare = batch[:0]
			}
			q.cond.Broadcast()
		}
		q.writing = false
		done := q.closed
		q.mu.Unlock()
		if done {
			return
		}
	}
}

// Flush waits until every line queued before it has been written.
func (q *Queue) Flush() {
	q.mu.Lock()
	target := q.queued
	for q.written < target {
		q.cond.Wait()
	}
	q.mu.Unlock()
}

// Close writes what is queued and stops the writer; later lines are
// written by their callers, unbatched.
func (q *Queue) Close() {
	q.Flush()
	q.mu.Lock()
	if !q.closed {
		q.closed = true
		close(q.wake)
	}
	q.cond.Broadcast()
	q.mu.Unlock()
}

// NewQueued returns a logger like o.New(q) that flushes q after every
// line at warning level or above, so that those lines, and every line
// before them, are out before the caller goes on (and perhaps dies).
// Text or JSON is decided by the writer q writes to, as New decides it.
func (o Options) NewQueued(q *Queue) *slog.Logger {
	return slog.New(flushingHandler{Handler: o.handler(q, isTerminal(q.w)), q: q})
}

// flushingHandler flushes its queue after a warning or an error.
type flushingHandler struct {
	slog.Handler
	q *Queue
}

func (h flushingHandler) Handle(ctx context.Context, r slog.Record) error {
	err := h.Handler.Handle(ctx, r)
	if r.Level >= slog.LevelWarn {
		h.q.Flush()
	}
	return err
}

func (h flushingHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return flushingHandler{Handler: h.Handler.WithAttrs(attrs), q: h.q}
}

func (h flushingHandler) WithGroup(name string) slog.Handler {
	return flushingHandler{Handler: h.Handler.WithGroup(name), q: h.q}
}
