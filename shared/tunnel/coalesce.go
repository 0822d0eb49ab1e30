package tunnel

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"time"
)

// coalescingConn merges the small writes HTTP/2 makes (a HEADERS frame
// here, a DATA frame there, each followed by a flush) into fewer WebSocket
// messages. Writes go into a buffer that one goroutine drains; while it is
// busy sending, new writes pile up and leave together in the next message.
// Nothing waits on a timer, so an idle connection sends at once, and a busy
// one makes one system call for many frames — the same idea as group
// commit. A write blocks only while the buffer holds maxPending bytes, so a
// slow peer still pushes back.
//
// A peer that stops reading altogether must not hold the connection, and
// everyone writing to it, forever: a send that takes longer than
// writeTimeout aborts the carrier (see watch), and Close waits at most
// closeFlush for what is queued.
type coalescingConn struct {
	net.Conn
	// abort closes the carrier at once, without a handshake, so that a
	// send blocked on a peer that does not read returns.
	abort        func()
	writeTimeout time.Duration
	// flushTimeout is closeFlush but for tests, which cannot spend
	// seconds on each peer that stops reading.
	flushTimeout time.Duration

	mu      sync.Mutex
	cond    *sync.Cond
	pending []byte
	spare   []byte
	sending bool
	err     error
	// cause is why this side gave up on the peer (a stalled send, a flush
	// that did not finish); the failed send then reports it.
	cause  error
	closed bool

	// The watchdog: sends counts the sends begun, watched is the one
	// in progress when the timer was last set, armed says it is set. A send
	// still in progress at two checks a writeTimeout apart has taken at
	// least that long. Idle connections keep no timer running, and a busy
	// one resets it once per writeTimeout, not per send.
	watchdog *time.Timer
	sends    uint64
	watched  uint64
	armed    bool
}

const maxPending = 1 << 20

// MaxMessage caps one WebSocket message the tunnel writes, well under the
// read limit either end sets (4 MiB by default; a gateway must not set one
// below this), so a long run of queued frames never trips it; larger runs
// leave as several messages.
const MaxMessage = 512 << 10

// DefaultWriteTimeout bounds one WebSocket message the tunnel sends (at most
// MaxMessage): a peer that takes none of it for this long is cut off. The
// gateway's heartbeats notice such a connector sooner; this is the bound
// that holds even when nothing else looks.
const DefaultWriteTimeout = 30 * time.Second

// closeFlush bounds how long Close waits for queued frames (a GOAWAY, the
// end of a response) to leave before it aborts the carrier.
const closeFlush = 2 * time.Second

// errStalled is the cause given when the peer takes no data: a send that
// outlived writeTimeout, or a queue Close could not flush.
var errStalled = errors.New("tunnel: the peer stopped taking data")

// newCoalescingConn starts draining writes to c. abort must close c's
// carrier at once; writeTimeout 0 turns the watchdog off.
func newCoalescingConn(c net.Conn, abort func(), writeTimeout time.Duration) *coalescingConn {
	cc := &coalescingConn{Conn: c, abort: abort, writeTimeout: writeTimeout, flushTimeout: closeFlush}
	cc.cond = sync.NewCond(&cc.mu)
	if writeTimeout > 0 {
		cc.watchdog = time.AfterFunc(time.Hour, cc.watch)
		cc.watchdog.Stop()
	}
	go cc.drain()
	return cc
}

// Write queues p; it returns the error of an earlier failed send.
func (c *coalescingConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(c.pending) >= maxPending && c.err == nil && !c.closed {
		c.cond.Wait()
	}
	if c.err != nil {
		return 0, c.err
	}
	if c.closed {
		return 0, net.ErrClosed
	}
	c.pending = append(c.pending, p...)
	c.cond.Broadcast()
	return len(p), nil
}

func (c *coalescingConn) drain() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		for len(c.pending) == 0 && !c.closed {
			c.cond.Wait()
		}
		if len(c.pending) == 0 && c.closed {
			return
		}
		out := c.pending
		c.pending = c.spare[:0]
		c.sending = true
		c.sends++
		// The queue has room again: a writer waiting for it goes on now,
		// not when this send ends (which, to a peer that stopped reading,
		// is never).
		c.cond.Broadcast()
		if c.watchdog != nil && !c.armed {
			c.armed, c.watched = true, c.sends
			c.watchdog.Reset(c.writeTimeout)
		}
		c.mu.Unlock()
		var err error
		for rest := out; len(rest) > 0 && err == nil; {
			n := min(len(rest), MaxMessage)
			_, err = c.Conn.Write(rest[:n])
			rest = rest[n:]
		}
		c.mu.Lock()
		c.sending = false
		c.spare = out[:0]
		if err != nil && c.err == nil {
			if c.cause != nil {
				err = c.cause
			}
			c.err = err
		}
		c.cond.Broadcast()
		if c.err != nil {
			return
		}
	}
}

// watch is the watchdog's check (see the fields): it aborts the carrier
// under a send that has not finished since the last check.
func (c *coalescingConn) watch() {
	c.mu.Lock()
	stalled := c.sending && c.sends == c.watched && !c.closed
	if c.sending && !stalled && !c.closed {
		c.watched = c.sends
		c.watchdog.Reset(c.writeTimeout)
	} else {
		c.armed = false
	}
	c.mu.Unlock()
	if stalled {
		c.giveUp(fmt.Errorf("%w: one message took over %s", errStalled, c.writeTimeout))
	}
}

// giveUp aborts the carrier, so that the send in progress fails with
// cause. It records only the cause: a Close waiting on the queue goes on
// waiting until the abort has ended the send, since its close handshake
// would otherwise wait for the very send that is stuck. A timer that fires
// as the send finishes, or after Close, does nothing.
func (c *coalescingConn) giveUp(cause error) {
	c.mu.Lock()
	if c.closed || c.err != nil || !c.sending && len(c.pending) == 0 {
		c.mu.Unlock()
		return
	}
	if c.cause == nil {
		c.cause = cause
	}
	c.mu.Unlock()
	c.abort()
}

// Err is why this side gave up on the peer: nil unless a send stalled or a
// close found the queue stuck.
func (c *coalescingConn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cause
}

// Close sends what is queued, waiting at most closeFlush, then closes the
// connection.
func (c *coalescingConn) Close() error {
	c.mu.Lock()
	if (len(c.pending) > 0 || c.sending) && c.err == nil {
		t := time.AfterFunc(c.flushTimeout, func() {
			c.giveUp(fmt.Errorf("%w: queued frames not sent within %s of closing", errStalled, c.flushTimeout))
		})
		for (len(c.pending) > 0 || c.sending) && c.err == nil {
			c.cond.Wait()
		}
		t.Stop()
	}
	c.closed = true
	if c.watchdog != nil {
		c.watchdog.Stop()
	}
	c.cond.Broadcast()
	c.mu.Unlock()
	return c.Conn.Close()
}
