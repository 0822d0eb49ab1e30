package server

import (
	"errors"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// A listener closed at once resets the connections the kernel has
// accepted that the server has not yet taken: a balancer that had sent a
// request on one (nginx does, the moment its connect succeeds) gets a
// reset, and since the request was sent it fails it rather than trying
// another replica (a POST is not retried). So a stop first has the kernel
// complete no new connection (stopHandshakes: a socket filter on Linux),
// then takes what is queued, and closes the moment a short wait brings
// nothing more.

// drainWait is how long a drain waits for another queued connection
// before it takes the queue for empty; drainMax bounds a drain that
// keeps finding more (a balancer that keeps sending).
const (
	drainWait = time.Millisecond
	drainMax  = 500 * time.Millisecond
)

// deadliner is a listener whose Accept can be given a deadline, as a
// *net.TCPListener's can.
type deadliner interface {
	SetDeadline(time.Time) error
}

// drainingListener is a listener that Drain closes without resetting
// what the kernel has queued.
type drainingListener struct {
	net.Listener
	draining atomic.Bool
	until    time.Time // drainMax after Drain began; set before draining
	closed   chan struct{}
	once     sync.Once
}

func newDrainingListener(ln net.Listener) *drainingListener {
	return &drainingListener{Listener: ln, closed: make(chan struct{})}
}

// Drain has Accept hand out what is queued and then close the listener;
// Closed is closed then. A listener without deadlines is closed at once.
func (l *drainingListener) Drain() {
	d, ok := l.Listener.(deadliner)
	if !ok {
		_ = l.Close() // nothing to drain it with
		return
	}
	// No new connection completes from here (on Linux): what is queued is
	// all there is to take.
	stopHandshakes(l.Listener)
	l.until = time.Now().Add(drainMax)
	l.draining.Store(true)
	_ = d.SetDeadline(time.Now().Add(drainWait)) // wakes an Accept waiting without one
}

// Closed is closed once the listener is.
func (l *drainingListener) Closed() <-chan struct{} { return l.closed }

// Close closes the listener.
func (l *drainingListener) Close() error {
	var err error
	l.once.Do(func() {
		err = l.Listener.Close()
		close(l.closed)
	})
	return err
}

// Accept is the listener's, except while draining: each wait for the next
// connection is drainWait at most, and the first wait that ends empty (or
// drainMax) closes the listener.
func (l *drainingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if !l.draining.Load() {
		return c, err
	}
	if err == nil && time.Now().Before(l.until) {
		_ = l.Listener.(deadliner).SetDeadline(time.Now().Add(drainWait))
		return c, nil
	}
	if err == nil {
		_ = c.Close() // past drainMax: as if it had come after the close
	} else if !errors.Is(err, os.ErrDeadlineExceeded) {
		return nil, err
	}
	_ = l.Close() // the queue is empty: nothing is reset
	return nil, net.ErrClosed
}
