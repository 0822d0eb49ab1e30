// Package legacy lets the gateway serve original TypeScript connectors
// (the original's `uncaged-workflow connect`). Such a client
// dials /ws/connect without the tunnel subprotocol and speaks JSON text
// frames: the gateway sends {"id","method","path","headers","body"} and
// the client answers {"id","status","headers","body"} — whole text bodies,
// no streaming, concurrent requests correlated by id.
//
// Conn adapts one such WebSocket to the http.RoundTripper the gateway's
// proxy uses for every connector (it satisfies presence.Conn), so both
// kinds of connector are served alike and can be online at once.
//
// Such a client also registers (POST /api/gateway/register, repeated as a
// heartbeat) the token its local API requires; Conn sends it as
// X-Client-Token. Registrations holds them (and the tombstones of those
// unregistered), SealToken / OpenToken encrypt a client token for the
// gateway's store, and SealRegistration / OpenRegistration encode one for
// the other replicas of a cluster without a store (registration.go). The
// routes and the persistence are gateway/server's, the NATS transport
// gateway/cluster's.
//
// The original's earlier clients kept no socket: they registered a URL
// where they served their API. URLFetcher reaches such a client there
// (urlconn.go), only at the hosts an AllowList admits, checked on the
// address dialed (allow.go).
package legacy

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"golang.org/x/net/http/httpguts"
)

// Defaults of Options.
const (
	// DefaultReadLimit bounds one frame from the client. A response frame
	// carries a whole body, so this is the largest response a legacy
	// client can return.
	DefaultReadLimit = 4 << 20
	// DefaultMaxBody bounds a request body sent to the client.
	DefaultMaxBody = 8 << 20
	// DefaultWriteTimeout bounds sending one frame; a client that cannot
	// take a frame for this long is dropped.
	DefaultWriteTimeout = 30 * time.Second
)

// Reasons a frame from the client is dropped, as given to Options.OnDrop.
const (
	DropBinary    = "binary"     // a binary message
	DropInvalid   = "invalid"    // not a valid response frame
	DropUnknownID = "unknown_id" // an id no request is waiting for (or one given up on)
)

// ErrBodyTooLarge is returned by RoundTrip for a request body over
// Options.MaxBody.
var ErrBodyTooLarge = errors.New("request body too large for a legacy client")

// Options tune a Conn.
type Options struct {
	// ReadLimit bounds one WebSocket message from the client
	// (0: DefaultReadLimit). A larger one closes the connection.
	ReadLimit int64
	// MaxBody bounds a request body (0: DefaultMaxBody).
	MaxBody int64
	// WriteTimeout bounds sending one frame (0: DefaultWriteTimeout).
	WriteTimeout time.Duration
	// ClientToken, when set, is asked before every request; a non-empty
	// answer is sent as X-Client-Token, which the original client's local
	// API requires (it registers the token with POST /api/gateway/register).
	ClientToken func() string
	// OnDrop, when set, hears every dropped frame with its reason (Drop*).
	OnDrop func(reason string)
}

// Conn is the gateway's side of one original client's WebSocket. It is an
// http.RoundTripper; its methods are safe for concurrent use.
type Conn struct {
	ws   *websocket.Conn
	opts Options

	// ctx lives as long as the socket; reads and writes use it, never a
	// request's context (coder/websocket closes the socket when the context
	// of a read or write ends).
	ctx    context.Context
	cancel context.CancelFunc

	mu      sync.Mutex
	pending map[string]chan ResponseFrame
	closed  bool
	err     error
	done    chan struct{}

	dropped atomic.Int64
}

// New starts serving requests over ws, an accepted WebSocket of an
// original client. The Conn reads from ws until it closes.
func New(ws *websocket.Conn, opts Options) *Conn {
	if opts.ReadLimit <= 0 {
		opts.ReadLimit = DefaultReadLimit
	}
	if opts.MaxBody <= 0 {
		opts.MaxBody = DefaultMaxBody
	}
	if opts.WriteTimeout <= 0 {
		opts.WriteTimeout = DefaultWriteTimeout
	}
	ws.SetReadLimit(opts.ReadLimit)
	ctx, cancel := context.WithCancel(context.Background())
	c := &Conn{ws: ws, opts: opts, ctx: ctx, cancel: cancel, pending: map[string]chan ResponseFrame{}, done: make(chan struct{})}
	go c.readLoop()
	return c
}

func (c *Conn) readLoop() {
	defer c.cancel()
	for {
		typ, data, err := c.ws.Read(c.ctx)
		if err != nil {
			c.fail(fmt.Errorf("legacy client websocket closed: %w", err))
			return
		}
		if typ != websocket.MessageText {
			c.drop(DropBinary)
			continue
		}
		f, err := ParseResponse(data)
		if err != nil {
			c.drop(DropInvalid)
			continue
		}
		c.mu.Lock()
		ch, ok := c.pending[f.ID]
		delete(c.pending, f.ID)
		c.mu.Unlock()
		if !ok {
			c.drop(DropUnknownID)
			continue
		}
		ch <- f // buffered: never blocks
	}
}

func (c *Conn) drop(reason string) {
	c.dropped.Add(1)
	if c.opts.OnDrop != nil {
		c.opts.OnDrop(reason)
	}
}

// fail marks the connection gone: every waiting request and every later
// one returns err.
func (c *Conn) fail(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	c.closed, c.err = true, err
	clear(c.pending)
	close(c.done)
}

// Dropped counts the frames dropped so far: binary, invalid or answering
// no waiting request.
func (c *Conn) Dropped() int64 { return c.dropped.Load() }

// Pending counts the requests waiting for their response.
func (c *Conn) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.pending)
}

// Done is closed when the connection is gone.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Ping sends a WebSocket ping and waits for the pong (the original client's
// WebSocket library answers pings by itself).
func (c *Conn) Ping(ctx context.Context) error { return c.ws.Ping(ctx) }

// closeWait is how long Close waits for the client to acknowledge the
// close; the handshake goes on in the background after that, so a client
// that stopped reading (missed heartbeats) does not hold its caller.
const closeWait = 250 * time.Millisecond

// Close fails the requests in flight and closes the WebSocket, telling the
// client why. It returns after the client acknowledged or closeWait.
func (c *Conn) Close(reason string) error {
	c.fail(errors.New("legacy client connection closed: " + reason))
	if len(reason) > 123 { // the most a close frame carries
		reason = reason[:123]
	}
	closed := make(chan error, 1)
	go func() {
		closed <- c.ws.Close(websocket.StatusGoingAway, reason)
		c.cancel()
	}()
	select {
	case err := <-closed:
		return err
	case <-time.After(closeWait):
		return nil
	}
}

func (c *Conn) closedErr() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// RoundTrip sends req as one request frame and waits for the response frame
// with its id. It returns req's context error when that ends first (a late
// answer is then dropped), and an error when the socket closes or the
// client answers a status outside 200–599.
func (c *Conn) RoundTrip(req *http.Request) (*http.Response, error) {
	frame, err := c.requestFrame(req)
	if err != nil {
		return nil, err
	}
	data, err := json.Marshal(frame)
	if err != nil {
		return nil, err
	}
	ch := make(chan ResponseFrame, 1)
	c.mu.Lock()
	if c.closed {
		err := c.err
		c.mu.Unlock()
		return nil, err
	}
	c.pending[frame.ID] = ch
	c.mu.Unlock()

	// Write on the connection's context, in the background, so a request
	// given up on neither waits for its frame to go out nor closes the
	// socket by cancelling a write.
	sent := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(c.ctx, c.opts.WriteTimeout)
		defer cancel()
		sent <- c.ws.Write(ctx, websocket.MessageText, data)
	}()
	ctx := req.Context()
	for {
		select {
		case err := <-sent:
			if err != nil {
				c.forget(frame.ID)
				if cerr := c.closedErr(); cerr != nil {
					return nil, cerr
				}
				return nil, fmt.Errorf("legacy client: sending request: %w", err)
			}
			sent = nil
		case f := <-ch:
			return response(req, f)
		case <-ctx.Done():
			c.forget(frame.ID)
			return nil, ctx.Err()
		case <-c.done:
			return nil, c.closedErr()
		}
	}
}

func (c *Conn) forget(id string) {
	c.mu.Lock()
	delete(c.pending, id)
	c.mu.Unlock()
}

// requestFrame turns req into a frame, reading (and closing) its body.
func (c *Conn) requestFrame(req *http.Request) (RequestFrame, error) {
	var body []byte
	if req.Body != nil {
		defer req.Body.Close()
		if req.Method != http.MethodGet && req.Method != http.MethodHead {
			b, err := io.ReadAll(io.LimitReader(req.Body, c.opts.MaxBody+1))
			if err != nil {
				return RequestFrame{}, fmt.Errorf("reading request body: %w", err)
			}
			if int64(len(b)) > c.opts.MaxBody {
				return RequestFrame{}, ErrBodyTooLarge
			}
			body = b
		}
	}
	f := RequestFrame{ID: newID(), Method: req.Method, Path: req.URL.RequestURI(), Headers: make(map[string]string, len(req.Header)+1)}
	for k, v := range req.Header {
		// Bodies travel as text: a compressed answer would not survive.
		if len(v) > 0 && k != "Accept-Encoding" {
			f.Headers[k] = v[0]
		}
	}
	if c.opts.ClientToken != nil {
		if tok := c.opts.ClientToken(); tok != "" {
			f.Headers["X-Client-Token"] = tok
		}
	}
	if len(body) > 0 {
		s := string(body) // JSON encoding turns invalid UTF-8 into U+FFFD, as the original's text() did
		f.Body = &s
	}
	return f, nil
}

// response rebuilds an *http.Response from a frame. Header names or values
// net/http could not send are dropped, and so are the framing headers the
// whole text body replaces.
func response(req *http.Request, f ResponseFrame) (*http.Response, error) {
	if f.Status < 200 || f.Status > 599 {
		return nil, fmt.Errorf("legacy client answered an invalid status %d", f.Status)
	}
	h := make(http.Header, len(f.Headers))
	for k, v := range f.Headers {
		if !httpguts.ValidHeaderFieldName(k) || !httpguts.ValidHeaderFieldValue(v) {
			continue
		}
		switch strings.ToLower(k) {
		case "content-length", "transfer-encoding", "connection", "keep-alive", "upgrade":
			continue
		}
		h.Add(k, v)
	}
	body := f.Body
	if req.Method == http.MethodHead || f.Status == http.StatusNoContent || f.Status == http.StatusNotModified {
		body = ""
	}
	return &http.Response{
		Status:        strconv.Itoa(f.Status) + " " + http.StatusText(f.Status),
		StatusCode:    f.Status,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        h,
		Body:          io.NopCloser(strings.NewReader(body)),
		ContentLength: int64(len(body)),
		Request:       req,
	}, nil
}

// newID is a random (version 4) UUID, as crypto.randomUUID() made.
func newID() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
