package tunnel

import (
	"net"
	"sync"
)

// coalescingConn merges the small writes HTTP/2 makes (a HEADERS frame
// here, a DATA frame there, each followed by a flush) into fewer WebSocket
// messages. Writes go into a buffer that one goroutine drains; while it is
// busy sending, new writes pile up and leave together in the next message.
// Nothing waits on a timer, so an idle connection sends at once, and a busy
// one makes one system call for many frames — the same idea as group
// commit. A write blocks only while the buffer holds maxPending bytes, so a
// slow peer still pushes back.
type coalescingConn struct {
	net.Conn
	mu      sync.Mutex
	cond    *sync.Cond
	pending []byte
	spare   []byte
	sending bool
	err     error
	closed  bool
}

const maxPending = 1 << 20

// MaxMessage caps one WebSocket message the tunnel writes, well under the
// read limit either end sets (4 MiB by default; a gateway must not set one
// below this), so a long run of queued frames never trips it; larger runs
// leave as several messages.
const MaxMessage = 512 << 10

func newCoalescingConn(c net.Conn) *coalescingConn {
	cc := &coalescingConn{Conn: c}
	cc.cond = sync.NewCond(&cc.mu)
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
			c.err = err
		}
		c.cond.Broadcast()
		if c.err != nil {
			return
		}
	}
}

// Close sends what is queued, then closes the connection.
func (c *coalescingConn) Close() error {
	c.mu.Lock()
	for (len(c.pending) > 0 || c.sending) && c.err == nil {
		c.cond.Wait()
	}
	c.closed = true
	c.cond.Broadcast()
	c.mu.Unlock()
	return c.Conn.Close()
}
