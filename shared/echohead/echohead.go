// Package echohead makes an echo server answer HEAD wherever it answers
// GET, as net/http's ServeMux does and as uptime checkers expect (they
// probe with HEAD by default); echo's router answers 405 to a HEAD that
// has no route of its own.
//
// Install registers, for every GET route added after it, a HEAD route to
// the same handler with the same middleware, so a new route cannot forget
// it. The handler writes its body as for GET: the server drops the body of
// a HEAD answer (net/http and its HTTP/2 server alike) and, from what was
// written, computes the same Content-Length it would have sent for GET.
package echohead

import (
	"context"
	"net/http"

	"github.com/labstack/echo/v4"
)

// Install makes every GET route added to e from now on answer HEAD too.
// A route added for HEAD explicitly (e.Any, e.HEAD) after its GET keeps
// its own handler. Only e's default router is covered: echo offers no way
// to add to a host's router without replacing it, and neither server
// here routes by host.
func Install(e *echo.Echo) {
	previous := e.OnAddRouteHandler
	e.OnAddRouteHandler = func(host string, route echo.Route, handler echo.HandlerFunc, middleware []echo.MiddlewareFunc) {
		if previous != nil {
			previous(host, route, handler, middleware)
		}
		if route.Method != http.MethodGet || host != "" {
			return
		}
		e.Add(http.MethodHead, route.Path, handler, append([]echo.MiddlewareFunc{endAtFlush}, middleware...)...)
	}
}

// endAtFlush ends a HEAD request once its headers are flushed: a stream
// (server-sent events) has nothing more to tell a HEAD, but its handler
// would hold the connection for as long as the stream lasts, and a client
// reusing the connection would wait behind it. The request's context is
// cancelled at the first flush, which a streaming handler watches anyway.
func endAtFlush(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		if r.Method != http.MethodHead {
			return next(c)
		}
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		c.SetRequest(r.WithContext(ctx))
		res := c.Response()
		inner := res.Writer
		res.Writer = &headWriter{ResponseWriter: inner, cancel: cancel}
		defer func() { res.Writer = inner }()
		return next(c)
	}
}

// headWriter is the response writer of a HEAD request under endAtFlush.
type headWriter struct {
	http.ResponseWriter
	cancel context.CancelFunc
}

// FlushError sends the headers on and ends the request (endAtFlush); it is
// what http.ResponseController.Flush calls.
func (w *headWriter) FlushError() error {
	err := http.NewResponseController(w.ResponseWriter).Flush()
	w.cancel()
	return err
}

// Flush implements http.Flusher for callers that do not go through
// http.ResponseController.
func (w *headWriter) Flush() {
	// An error means the client left, which ends the request just the same.
	_ = w.FlushError()
}

// Unwrap lets http.ResponseController reach the server's writer (write
// deadlines, hijacking).
func (w *headWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
