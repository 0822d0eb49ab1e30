// Package tunnel carries HTTP between the gateway and a connector over the
// one WebSocket the connector dials out: the gateway is an HTTP/2 client
// and the connector an HTTP/2 server on that connection. HTTP/2 gives
// multiplexed streams, flow control, streaming bodies (SSE passes through
// live), cancellation and binary bodies, so there is no request framing of
// our own.
package tunnel

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"golang.org/x/net/http2"
)

// Subprotocol marks a connector that speaks HTTP/2 over the WebSocket. A
// client that does not offer it is an original TypeScript connector
// speaking JSON frames.
const Subprotocol = "uncaged-workflow.h2"

// ConnectPath is the gateway route connectors dial.
const ConnectPath = "/ws/connect"

// DefaultReadLimit bounds one WebSocket message. HTTP/2 writes arrive as
// messages of at most a few frames, so this is generous while still
// refusing a peer that sends unbounded messages.
const DefaultReadLimit = 4 << 20

// headerTableSize turns off HPACK's dynamic table on the tunnel, both ways
// (1 byte holds no header). Every proxied request carries a fresh
// X-Request-Id, so with a table each request adds an entry and evicts
// another, on both ends, and that path is deep enough to grow the
// per-request goroutine's stack: about 8% of the tunnel's instructions per
// small request. The price is bytes: header values travel in full
// (Huffman-coded; names still come from the static table), a few hundred
// bytes per request, small beside the bodies the dashboard fetches.
const headerTableSize = 1

// ConnectURL turns a gateway base URL (http, https, ws or wss) into the
// connector's WebSocket URL for name.
func ConnectURL(gateway, name string) (string, error) {
	u, err := url.Parse(gateway)
	if err != nil {
		return "", fmt.Errorf("invalid gateway URL %q: %w", gateway, err)
	}
	switch u.Scheme {
	case "https", "wss":
		u.Scheme = "wss"
	case "http", "ws":
		u.Scheme = "ws"
	default:
		return "", fmt.Errorf("invalid gateway URL %q: scheme must be http, https, ws or wss", gateway)
	}
	if u.Host == "" {
		return "", fmt.Errorf("invalid gateway URL %q: no host", gateway)
	}
	u.Path = strings.TrimSuffix(u.Path, "/") + ConnectPath
	u.RawQuery = url.Values{"name": {name}}.Encode()
	u.Fragment = ""
	return u.String(), nil
}

// Headers a connector sends when it dials.
const (
	// InstanceHeader carries the connector's instance id: one per storage
	// root, the same across restarts, so the gateway can tell a machine
	// reconnecting after a network blip (same instance) from a second
	// machine using the same name (another instance).
	InstanceHeader = "X-Uncaged-Instance"
	// InstanceKeyHeader carries the connector's instance key: a secret
	// made once per storage root that proves the instance, which the
	// gateway knows only by its fingerprint. An instance id can be copied
	// from wherever it was shown; the key is never shown.
	InstanceKeyHeader = "X-Uncaged-Instance-Key"
	// TakeoverHeader, set to "1", asks the gateway to give the name to this
	// connection even when another instance holds it.
	TakeoverHeader = "X-Uncaged-Takeover"
)

// UserHeader is set by the gateway on every request it proxies to a
// connector: who made it (the dashboard token's note, else its id; the
// shared secret is "secret"). The gateway replaces any value a client
// sent, so a connector may trust it on requests that come through its
// tunnel, and only there: it records who answered a question with it.
const UserHeader = "X-Uncaged-User"

// IsUserHeader says whether a header named name could be read as
// UserHeader: any case, and '_' for '-' (as some servers read it). The
// gateway drops every such header a client sent, and the hop between its
// replicas signs all of them.
func IsUserHeader(name string) bool {
	return len(name) == len(UserHeader) && strings.EqualFold(strings.ReplaceAll(name, "_", "-"), UserHeader)
}

// userKey carries, in a request's context, who the gateway says made a
// request that came through the tunnel (WithUser).
type userKey struct{}

// WithUser marks ctx as a request's that came through the tunnel, made by
// user as the gateway named them (UserHeader; "" when the gateway named
// nobody). Only the connector's end of the tunnel sets it: a request made
// to the connector's API directly carries no such mark, whatever headers
// it sends.
func WithUser(ctx context.Context, user string) context.Context {
	return context.WithValue(ctx, userKey{}, user)
}

// UserFrom returns who the gateway said made the request of ctx, and
// whether the request came through the tunnel at all.
func UserFrom(ctx context.Context) (user string, tunneled bool) {
	user, tunneled = ctx.Value(userKey{}).(string)
	return user, tunneled
}

// MovePath is the request (POST, no body) a gateway replica that is
// about to stop sends each connector over its tunnel: dial the gateway
// again — its balancer picks a replica that is not stopping — and answer
// 200 once the new tunnel is up, or 503 saying why it could not be made.
// The old tunnel keeps serving what is in flight on it until the gateway
// closes it, so a move loses no request. The connector's API never serves
// this path: it is the tunnel's, answered by the link.
const MovePath = "/.uncaged/tunnel/move"

// TakeoverMark ends the close reason the gateway gives a connection that
// another instance took over with --takeover. A connector closed with it
// stops reconnecting: the name now belongs to another machine.
const TakeoverMark = "(--takeover)"

// RejectedError is a gateway's answer that did not upgrade to a
// WebSocket: a refusal (4xx, 5xx), or another status (a 200 web page, a
// redirect's target) from something that is not the gateway's tunnel.
type RejectedError struct {
	Status  int
	Message string
	// ContentType is the answer's Content-Type, so a web page can be told
	// from the gateway's JSON refusals.
	ContentType string
}

func (e *RejectedError) Error() string {
	return fmt.Sprintf("gateway refused the connection: %d %s", e.Status, e.Message)
}

// ClosedError is Serve's error when the gateway closed the tunnel saying
// why ("token revoked", "gateway shutting down"), for the connector to log.
type ClosedError struct{ Reason string }

func (e *ClosedError) Error() string { return "closed by the gateway: " + e.Reason }

// MovedMark starts the close reason of a tunnel whose connector was asked
// to move to another replica (MovePath): a connector whose move did not
// finish before the close dials again at once, without backing off.
const MovedMark = "moved"

// Moved says whether the gateway closed the tunnel because the connector
// moved, or was asked to, to another replica (MovedMark).
func (e *ClosedError) Moved() bool { return strings.HasPrefix(e.Reason, MovedMark) }

// TakenOver says whether another instance took the connector's name with
// --takeover (TakeoverMark), so reconnecting would be pointless.
func (e *ClosedError) TakenOver() bool { return strings.HasSuffix(e.Reason, TakeoverMark) }

// Dial opens the connector's WebSocket to the gateway, authenticated with
// token (sent as a bearer token, never in the URL).
func Dial(ctx context.Context, gateway, name, token string, header http.Header) (*websocket.Conn, error) {
	u, err := ConnectURL(gateway, name)
	if err != nil {
		return nil, err
	}
	h := http.Header{}
	for k, v := range header {
		h[k] = v
	}
	if token != "" {
		h.Set("Authorization", "Bearer "+token)
	}
	ws, resp, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPHeader: h, Subprotocols: []string{Subprotocol}})
	if err != nil {
		// Any answer but 101 is not the tunnel: the caller tells a
		// refusal from a web page by its status and content type.
		if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols {
			body := ""
			if resp.Body != nil {
				b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
				body = strings.TrimSpace(string(b))
			}
			return nil, &RejectedError{Status: resp.StatusCode, Message: body, ContentType: resp.Header.Get("Content-Type")}
		}
		return nil, err
	}
	if ws.Subprotocol() != Subprotocol {
		_ = ws.Close(websocket.StatusProtocolError, "subprotocol "+Subprotocol+" required") // the error returned is the news
		return nil, errors.New("gateway did not accept the " + Subprotocol + " subprotocol")
	}
	ws.SetReadLimit(DefaultReadLimit)
	return ws, nil
}

// ServeOptions tune the connector's HTTP/2 server.
type ServeOptions struct {
	// MaxConcurrentStreams caps requests in flight (0: 250).
	MaxConcurrentStreams uint32
	// PingInterval, when set, pings the gateway at the WebSocket level
	// after each interval in which nothing arrived from it, so a dead
	// gateway is noticed even when no request is flowing.
	PingInterval time.Duration
	// DrainTimeout bounds how long stopping waits for requests in flight
	// (0: 10 s).
	DrainTimeout time.Duration
}

// Serve answers HTTP/2 requests from the gateway with h until the WebSocket
// closes or ctx ends; then it closes the WebSocket with reason. When the
// gateway closed it giving a reason, the error is a *ClosedError with it.
func Serve(ctx context.Context, ws *websocket.Conn, h http.Handler, opts ServeOptions) error {
	// The connection lives on its own context so that stopping (ctx) can
	// drain it: no new requests, the ones in flight finish.
	connCtx, dropConn := context.WithCancel(context.Background())
	defer dropConn()
	wc := newWSConn(ws, serverReadBuffer)
	conn := newCoalescingConn(wc, func() { _ = ws.CloseNow() }, DefaultWriteTimeout)
	// Dropping the connection (after a drain, or on missed pings) has to
	// end the server's blocked read: close the WebSocket under it.
	stopOnEnd := context.AfterFunc(connCtx, func() { _ = ws.CloseNow() })
	defer stopOnEnd()
	if opts.PingInterval > 0 {
		go pingLoop(connCtx, ws, opts.PingInterval, wc.mr.messages.Load, dropConn)
	}
	maxStreams := opts.MaxConcurrentStreams
	if maxStreams == 0 {
		maxStreams = 250
	}
	//lint:ignore SA1019 kept until net/http's ClientConn can Ping (the heartbeat): the standard library's HTTP/2 is the same code; see docs/architecture.md
	srv := &http2.Server{MaxConcurrentStreams: maxStreams, IdleTimeout: 0, MaxEncoderHeaderTableSize: headerTableSize, MaxDecoderHeaderTableSize: headerTableSize, MaxUploadBufferPerConnection: 4 << 20, MaxUploadBufferPerStream: 1 << 20}
	// A tunnel torn down mid-handshake is routine (a replaced connection);
	// the caller reports what matters, so net/http's own log stays quiet.
	base := &http.Server{ErrorLog: log.New(io.Discard, "", 0)}
	//lint:ignore SA1019 kept until net/http's ClientConn can Ping (the heartbeat): the standard library's HTTP/2 is the same code; see docs/architecture.md
	if err := http2.ConfigureServer(base, srv); err != nil {
		return err
	}
	// Handlers in flight; a WaitGroup does not fit, as handlers keep
	// starting while a drain waits.
	var inFlight atomic.Int64
	workers := newHandlerWorkers(h)
	defer workers.stop()
	counted := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		inFlight.Add(1)
		defer inFlight.Add(-1)
		workers.ServeHTTP(w, r)
	})
	served := make(chan struct{})
	go func() {
		defer close(served)
		//lint:ignore SA1019 kept until net/http's ClientConn can Ping (the heartbeat): the standard library's HTTP/2 is the same code; see docs/architecture.md
		srv.ServeConn(conn, &http2.ServeConnOpts{Context: connCtx, Handler: counted, BaseConfig: base})
	}()
	select {
	case <-served:
		// The connection has ended: a failed close handshake changes nothing.
		_ = ws.Close(websocket.StatusNormalClosure, "")
		if reason := wc.peerReason(); reason != "" {
			return &ClosedError{Reason: reason}
		}
		return nil
	case <-ctx.Done():
	}
	// Graceful stop: GOAWAY, then wait (bounded) for requests in flight.
	drain := opts.DrainTimeout
	if drain == 0 {
		drain = 10 * time.Second
	}
	sctx, cancel := context.WithTimeout(context.Background(), drain)
	defer cancel()
	// Its error is sctx's, which the select below sees too.
	_ = base.Shutdown(sctx)
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		for inFlight.Load() > 0 && sctx.Err() == nil {
			time.Sleep(10 * time.Millisecond)
		}
	}()
	select {
	case <-served:
	case <-drained:
		// Handlers are done; give the server a moment to put their last
		// frames on the wire and finish the GOAWAY by itself.
		select {
		case <-served:
		case <-time.After(2 * time.Second):
		}
	case <-sctx.Done():
	}
	dropConn()
	<-served
	// Stopping either way: a failed close handshake changes nothing.
	_ = ws.Close(websocket.StatusGoingAway, "connector shutting down")
	return ctx.Err()
}

// pingLoop pings the gateway every interval in which nothing was heard
// from it. The gateway pings each connector itself (its heartbeat), and any
// message from it shows it alive just as a pong would: pinging anyway
// doubled the messages an idle tunnel costs both ends, which a gateway
// holding thousands of connectors pays for in wakeups and system calls.
func pingLoop(ctx context.Context, ws *websocket.Conn, every time.Duration, heard func() uint64, fail func()) {
	t := time.NewTicker(every)
	defer t.Stop()
	ping := func() error {
		pctx, cancel := context.WithTimeout(ctx, every)
		defer cancel()
		return ws.Ping(pctx)
	}
	keepAlive(ctx, t.C, heard, ping, fail)
}

// keepAlive is pingLoop's logic: at each tick, if heard (a count of
// messages received) has not moved since the last tick, ping; two failed
// pings in a row call fail.
func keepAlive(ctx context.Context, ticks <-chan time.Time, heard func() uint64, ping func() error, fail func()) {
	last := heard()
	misses := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticks:
		}
		if now := heard(); now != last {
			last, misses = now, 0
			continue
		}
		if err := ping(); err == nil {
			misses = 0
			continue
		}
		if misses++; misses >= 2 {
			fail()
			return
		}
	}
}

// Offers reports whether an upgrade request offers our subprotocol; one
// that does not comes from an original JSON-frame client.
func Offers(r *http.Request) bool {
	for _, h := range r.Header.Values("Sec-WebSocket-Protocol") {
		for _, p := range strings.Split(h, ",") {
			if strings.TrimSpace(p) == Subprotocol {
				return true
			}
		}
	}
	return false
}

// Accept completes the gateway's side of the upgrade for a client that
// offers the subprotocol.
func Accept(w http.ResponseWriter, r *http.Request) (*websocket.Conn, error) {
	ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{Subprotocol}, InsecureSkipVerify: true})
	if err != nil {
		return nil, err
	}
	if ws.Subprotocol() != Subprotocol {
		_ = ws.Close(websocket.StatusProtocolError, "subprotocol "+Subprotocol+" required") // the error returned is the news
		return nil, errors.New("client did not negotiate " + Subprotocol)
	}
	ws.SetReadLimit(DefaultReadLimit)
	return ws, nil
}

// Client is the gateway's HTTP/2 client over one connector's WebSocket. It
// is an http.RoundTripper.
type Client struct {
	ws      *websocket.Conn
	wc      *wsConn
	cc      *http2.ClientConn //lint:ignore SA1019 kept until net/http's ClientConn can Ping (the heartbeat): the standard library's HTTP/2 is the same code; see docs/architecture.md
	conn    *coalescingConn
	watched *watchedConn
	done    <-chan struct{} // closed by stop
	stop    context.CancelFunc
}

// NewClient starts an HTTP/2 client connection over ws. The connection
// lives until Close or until the WebSocket drops (Done is closed then). A
// message the connector takes none of for DefaultWriteTimeout, or a flood
// of PING or SETTINGS frames from it, drops the connection too (Err says
// which).
func NewClient(ws *websocket.Conn) (*Client, error) {
	return newClient(ws, DefaultWriteTimeout)
}

func newClient(ws *websocket.Conn, writeTimeout time.Duration) (*Client, error) {
	ctx, stop := context.WithCancel(context.Background())
	wc := newWSConn(ws, 0)
	conn := newCoalescingConn(wc, func() { _ = ws.CloseNow() }, writeTimeout)
	// A proxy passes Accept-Encoding through as it came: the transport must
	// not ask for gzip itself and then inflate the answer on the gateway.
	// StrictMaxConcurrentStreams: with one connection and no pool to open
	// another, a request beyond the connector's stream limit must wait for
	// a stream to end; non-strict, the client conn reports itself unusable
	// and the request failed at once (a 502 under a burst of load).
	//lint:ignore SA1019 kept until net/http's ClientConn can Ping (the heartbeat): the standard library's HTTP/2 is the same code; see docs/architecture.md
	t := &http2.Transport{AllowHTTP: true, StrictMaxConcurrentStreams: true, DisableCompression: true, MaxEncoderHeaderTableSize: headerTableSize, MaxDecoderHeaderTableSize: headerTableSize, MaxReadFrameSize: 256 << 10,
		//lint:ignore SA1019 the one hook the transport has where the connector's GOAWAY can close an idle connection (closeWhenDeadAndIdle)
		ConnPool: closeWhenDeadAndIdle{}}
	watched := &watchedConn{Conn: conn, onClose: stop}
	//lint:ignore SA1019 kept until net/http's ClientConn can Ping (the heartbeat): the standard library's HTTP/2 is the same code; see docs/architecture.md
	cc, err := t.NewClientConn(watched)
	if err != nil {
		stop()
		return nil, err
	}
	// Done is the context's: no goroutine waits for the end, and an idle
	// tunnel costs the gateway only what it must (memory per connector,
	// docs/performance.md).
	return &Client{ws: ws, wc: wc, cc: cc, conn: conn, watched: watched, done: ctx.Done(), stop: stop}, nil
}

// closeWhenDeadAndIdle is the pool of the one connection a Client has:
// there is nothing to get from it, and a connection the transport marks
// dead — the connector said GOAWAY, as it does when it stops — is closed
// at once when no request is on it. The transport closes a connection
// after GOAWAY only when its last request ends; with none, it kept it open
// until the connector's server gave up waiting for the gateway to close
// (a second), and the connector was seen offline that much later.
type closeWhenDeadAndIdle struct{}

//lint:ignore SA1019 kept until net/http's ClientConn can Ping (the heartbeat): the standard library's HTTP/2 is the same code; see docs/architecture.md
func (closeWhenDeadAndIdle) GetClientConn(*http.Request, string) (*http2.ClientConn, error) {
	return nil, errors.New("tunnel: a Client has one connection and no pool")
}

//lint:ignore SA1019 kept until net/http's ClientConn can Ping (the heartbeat): the standard library's HTTP/2 is the same code; see docs/architecture.md
func (closeWhenDeadAndIdle) MarkDead(cc *http2.ClientConn) {
	// Not on the transport's read loop, which calls this.
	go func() {
		if st := cc.State(); st.StreamsActive == 0 && st.StreamsReserved == 0 && st.StreamsPending == 0 {
			_ = cc.Close() // what it could report, the WebSocket's Close does
		}
	}()
}

// watchedConn reports when the HTTP/2 client closes its connection (after a
// read error: the WebSocket dropped), and follows the frames it reads so
// that a connector flooding PING or SETTINGS frames is cut off.
type watchedConn struct {
	net.Conn
	onClose func()
	frames  frameInspector
	flood   atomic.Pointer[error]
}

func (w *watchedConn) Read(p []byte) (int, error) {
	n, err := w.Conn.Read(p)
	if n > 0 {
		if ferr := w.frames.inspect(p[:n]); ferr != nil {
			w.flood.Store(&ferr)
			n, err = 0, ferr
		}
	}
	if err != nil {
		w.onClose()
	}
	return n, err
}

func (w *watchedConn) Close() error {
	w.onClose()
	return w.Conn.Close()
}

// RoundTrip sends one request to the connector.
func (c *Client) RoundTrip(req *http.Request) (*http.Response, error) {
	return c.cc.RoundTrip(req)
}

// Ping sends an HTTP/2 PING and waits for its acknowledgement: the
// heartbeat.
func (c *Client) Ping(ctx context.Context) error { return c.cc.Ping(ctx) }

// Done is closed when the connection is gone.
func (c *Client) Done() <-chan struct{} { return c.done }

// closeWait bounds Close: the requests in flight fail and Done is closed
// at once, and the rest (flushing, the close handshake) goes on in the
// background after closeWait, itself bounded by closeFlush and the
// WebSocket library's handshake timeouts. A connector that stopped reading
// thus holds no caller.
const closeWait = time.Second

// Close ends the connection, telling the connector why. It returns within
// closeWait.
func (c *Client) Close(reason string) error {
	c.stop()
	closed := make(chan error, 1)
	// The HTTP/2 client closes the WebSocket once it has flushed: with
	// the reason, which the connector logs.
	c.wc.closeWith(reason)
	go func() {
		_ = c.cc.Close() // what it could report, the WebSocket's Close does
		closed <- c.ws.Close(websocket.StatusGoingAway, reason)
	}()
	t := time.NewTimer(closeWait)
	defer t.Stop()
	select {
	case err := <-closed:
		return err
	case <-t.C:
		return nil
	}
}

// Err is why the gateway's side dropped the connection by itself: the
// connector flooded it with PING or SETTINGS frames, or stopped taking
// data. It is nil otherwise (the connector left, or Close was called on a
// connector that kept up).
func (c *Client) Err() error {
	if err := c.watched.flood.Load(); err != nil {
		return *err
	}
	return c.conn.Err()
}

// ActiveStreams is how many requests are in flight.
func (c *Client) ActiveStreams() int { return c.cc.State().StreamsActive }
