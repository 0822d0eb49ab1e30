package store

import (
	"context"
	"sync"
)

// maxQueued bounds the changes waiting for one subscriber. Past it they
// collapse into one ChangeReload: the subscriber then re-reads everything,
// which costs one query, whereas an unbounded queue would cost memory
// without limit if it stopped reading.
const maxQueued = 256

// hub fans changes out to subscribers. Publishing never blocks: each
// subscriber has its own queue and goroutine, so a slow one delays no one.
type hub struct {
	mu     sync.Mutex
	subs   map[*subscriber]struct{}
	done   chan struct{}
	closed bool
}

// subscriber is one Subscribe call's queue.
type subscriber struct {
	mu    sync.Mutex
	queue []Change
	wake  chan struct{}
	out   chan Change
}

func newHub() *hub {
	return &hub{subs: map[*subscriber]struct{}{}, done: make(chan struct{})}
}

// subscribe registers a subscriber now (so nothing published from here on
// is missed) and returns its channel and a function that unregisters it.
func (h *hub) subscribe(ctx context.Context) (<-chan Change, func()) {
	s := &subscriber{wake: make(chan struct{}, 1), out: make(chan Change)}
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		close(s.out)
		return s.out, func() {}
	}
	h.subs[s] = struct{}{}
	h.mu.Unlock()
	ctx, cancel := context.WithCancel(ctx)
	go h.run(ctx, s)
	return s.out, cancel
}

// run hands s's queued changes to its reader until ctx ends or the hub
// closes.
func (h *hub) run(ctx context.Context, s *subscriber) {
	defer func() {
		h.mu.Lock()
		delete(h.subs, s)
		h.mu.Unlock()
		close(s.out)
	}()
	for {
		s.mu.Lock()
		if len(s.queue) == 0 {
			s.mu.Unlock()
			select {
			case <-s.wake:
				continue
			case <-ctx.Done():
				return
			case <-h.done:
				return
			}
		}
		c := s.queue[0]
		s.queue = s.queue[1:]
		s.mu.Unlock()
		select {
		case s.out <- c:
		case <-ctx.Done():
			return
		case <-h.done:
			return
		}
	}
}

// publish queues c for every subscriber.
func (h *hub) publish(c Change) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs {
		s.mu.Lock()
		if len(s.queue) >= maxQueued {
			s.queue = append(s.queue[:0], Change{Kind: ChangeReload})
		} else {
			s.queue = append(s.queue, c)
		}
		s.mu.Unlock()
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
}

// close ends every subscription; later ones get a closed channel.
func (h *hub) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.closed {
		h.closed = true
		close(h.done)
	}
}
