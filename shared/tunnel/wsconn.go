package tunnel

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
)

// serverReadBuffer is how much of the gateway's messages one read on the
// connector takes in. The HTTP/2 server reads each frame as a 9-byte header
// and then its payload; buffered, those small reads cost a copy rather than
// a trip through the WebSocket's frame reader each. The gateway's HTTP/2
// client buffers its reads itself, and holds thousands of idle tunnels, so
// its side has no buffer of ours.
const serverReadBuffer = 32 << 10

// wsConn is a net.Conn over a WebSocket, one binary message after another.
//
// websocket.NetConn does the same, but it passes a cancellable context to
// every frame read and write, and coder/websocket registers and removes a
// context.AfterFunc for each: several per request on each side, and
// measurable on the hot path. Here reads and writes carry a context that
// is never done; closing the connection is what ends a blocked read or
// write. NetConn also lifts the WebSocket's read limit; wsConn keeps it, so
// a peer still cannot send one unbounded message (the coalescing writer
// keeps ours under MaxMessage).
type wsConn struct {
	ws *websocket.Conn
	r  io.Reader
	mr *messageReader
	// closeReason, once set, makes Close say going away, and why.
	closeReason atomic.Pointer[string]
}

// newWSConn wraps ws; buffer > 0 buffers reads that much.
func newWSConn(ws *websocket.Conn, buffer int) *wsConn {
	mr := &messageReader{ws: ws}
	var r io.Reader = mr
	if buffer > 0 {
		r = bufio.NewReaderSize(r, buffer)
	}
	return &wsConn{ws: ws, r: r, mr: mr}
}

// peerReason is the reason the peer gave in its close frame, once it
// closed normally or going away ("" if it gave none or has not closed).
func (c *wsConn) peerReason() string {
	if r := c.mr.reason.Load(); r != nil {
		return *r
	}
	return ""
}

// Read reads the peer's messages as one stream of bytes. A close frame with
// a normal or going-away status is the end of that stream.
func (c *wsConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// Write sends p as one binary message.
func (c *wsConn) Write(p []byte) (int, error) {
	if err := c.ws.Write(context.Background(), websocket.MessageBinary, p); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Close closes the WebSocket with a normal closure, as NetConn does, or
// going away with the reason set by closeWith.
func (c *wsConn) Close() error {
	if r := c.closeReason.Load(); r != nil {
		return c.ws.Close(websocket.StatusGoingAway, *r)
	}
	return c.ws.Close(websocket.StatusNormalClosure, "")
}

// closeWith sets the reason a later Close sends: the HTTP/2 layer closes
// the connection itself, after flushing, and the peer should hear why.
func (c *wsConn) closeWith(reason string) { c.closeReason.Store(&reason) }

// LocalAddr is the WebSocket's end of the connection as far as it is known:
// the HTTP/2 layer only prints it.
func (c *wsConn) LocalAddr() net.Addr { return tunnelAddr{} }

// RemoteAddr is the peer as far as it is known (see LocalAddr).
func (c *wsConn) RemoteAddr() net.Addr { return tunnelAddr{} }

// errDeadline refuses a deadline: neither end's HTTP/2 sets one with the
// options used here (no WriteByteTimeout, no read timeouts), and faking one
// by closing the tunnel would turn a slow request into a dropped connector.
var errDeadline = errors.New("tunnel connection: deadlines are not supported")

// SetDeadline accepts only clearing the deadline (see errDeadline).
func (c *wsConn) SetDeadline(t time.Time) error { return noDeadline(t) }

// SetReadDeadline accepts only clearing the deadline (see errDeadline).
func (c *wsConn) SetReadDeadline(t time.Time) error { return noDeadline(t) }

// SetWriteDeadline accepts only clearing the deadline (see errDeadline).
func (c *wsConn) SetWriteDeadline(t time.Time) error { return noDeadline(t) }

func noDeadline(t time.Time) error {
	if t.IsZero() {
		return nil
	}
	return errDeadline
}

// tunnelAddr names the two ends of a tunnel connection.
type tunnelAddr struct{}

func (tunnelAddr) Network() string { return "websocket" }
func (tunnelAddr) String() string  { return "tunnel" }

// messageReader reads the WebSocket's messages back to back.
type messageReader struct {
	ws  *websocket.Conn
	cur io.Reader
	// reason is the peer's close reason (the gateway says why it closed
	// a tunnel: "token revoked", "gateway shutting down").
	reason atomic.Pointer[string]
	// messages counts the messages begun: a sign of life of the peer.
	messages atomic.Uint64
}

func (m *messageReader) Read(p []byte) (int, error) {
	for {
		if m.cur == nil {
			typ, r, err := m.ws.Reader(context.Background())
			if err != nil {
				switch websocket.CloseStatus(err) {
				case websocket.StatusNormalClosure, websocket.StatusGoingAway:
					var ce websocket.CloseError
					if errors.As(err, &ce) {
						m.reason.Store(&ce.Reason)
					}
					return 0, io.EOF
				}
				return 0, err
			}
			if typ != websocket.MessageBinary {
				err := fmt.Errorf("tunnel connection: unexpected %v message", typ)
				// Close waits for the peer's answer; the reader need not,
				// and has its error already.
				go func() { _ = m.ws.Close(websocket.StatusUnsupportedData, err.Error()) }()
				return 0, err
			}
			m.cur = r
			m.messages.Add(1)
		}
		n, err := m.cur.Read(p)
		if err == io.EOF {
			m.cur = nil
			if n == 0 {
				continue
			}
			err = nil
		}
		return n, err
	}
}
