package server

import (
	"context"
	"io"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"
)

// A request's body must arrive within Options.BodyTimeout of its headers,
// on every route, before authentication and after: a client that declares
// 100 bytes and sends one would otherwise hold its connection, a
// goroutine and a file descriptor for as long as it likes, and a few
// hundred such clients starved the gateway of descriptors.
//
// http.Server.ReadTimeout would bound the whole request, streams and
// WebSocket upgrades included, and is the wrong tool. The deadline here is
// the connection's read deadline, set per request and only when there is
// a body. Reading the body to its end lifts it: net/http then clears the
// deadline itself as it starts watching for the client to leave (and an
// HTTP/2 stream's deadline no longer matters once its body is complete),
// so whatever follows the body — the connector's answer, a live stream —
// is not bounded by it. A body left unread when the handler returns is
// drained by net/http under the same deadline, so a slow one still ends in
// time. Streams (SSE, the connectors' WebSocket) send no body and never
// have a deadline at all.

// DefaultBodyTimeout is Options.BodyTimeout's default: 8 MiB (--max-body)
// in 60 s needs about 1.1 Mbit/s, and the dashboard's own bodies are a few
// hundred bytes.
const DefaultBodyTimeout = 60 * time.Second

// bodyTimeoutMessage is the 408 of a body that did not arrive in time.
const bodyTimeoutMessage = "request body not received in time"

// serveHTTP is the gateway's handler: echo's, with the body deadline set
// first and the request counted in flight. Outside echo, because echo builds its middleware chain anew for
// every request, and a request without a body should cost nothing here.
func (g *Gateway) serveHTTP(w http.ResponseWriter, r *http.Request) {
	if c, body := markServing(r); c != nil { // the global connection limit's (connlimit.go)
		defer c.unmarkServing(body)
	}
	g.inFlight.begin(r) // what a stop that cannot wait names (stop.go)
	defer g.inFlight.end(r)
	if r.Body != nil && r.Body != http.NoBody && g.opts.BodyTimeout > 0 {
		deadline := time.Now().Add(g.opts.BodyTimeout)
		// An error: not a network connection (a test's recorder).
		if http.NewResponseController(w).SetReadDeadline(deadline) == nil {
			r.Body = &deadlineBody{ReadCloser: r.Body, deadline: deadline}
		}
	}
	g.echo.ServeHTTP(w, r)
}

// deadlineBody is a request body under the read deadline. The proxy's
// transport reads it on a goroutine of its own, hence the atomic.
type deadlineBody struct {
	io.ReadCloser
	deadline time.Time
	eof      atomic.Bool
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.eof.Store(true)
	}
	return n, err
}

// cutShort says whether the deadline cut the body short. A read past it
// fails and cancels the request's context (net/http takes the client for
// gone), so the handler's answer — login's 400 for a body it could not
// decode, or none at all from the proxy — would hide why; the client is
// still there, only too slow, and gets 408.
func (b *deadlineBody) cutShort(ctx context.Context) bool {
	return b != nil && !b.eof.Load() && ctx.Err() != nil && !time.Now().Before(b.deadline)
}

// errBodyTimeout is the answer to a body cut short.
var errBodyTimeout = echo.NewHTTPError(http.StatusRequestTimeout, bodyTimeoutMessage)

// bodyCutShort says whether r's body was cut short by the deadline, for
// a handler that read it itself.
func bodyCutShort(r *http.Request) bool {
	b, _ := r.Body.(*deadlineBody)
	return b.cutShort(r.Context())
}
