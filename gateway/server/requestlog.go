package server

import (
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/uncaged/workflow/shared/requestid"
)

// requestLog gives every request an id and logs one structured line for it
// when it is answered.
//
// The id is the client's X-Request-Id when that is sane (requestid.Valid),
// else a fresh one. It is set on the request before the proxy copies its
// headers, so the connector receives it and logs the same id, and on the
// response — replacing the connector's echo of it, so the client sees one
// value, not two.
//
// The line has request_id, method, path (never the query: ?key= and
// ?secret= carry tokens), status, duration_ms, bytes, the client address
// and, for /api/clients/<name>/..., the connector name. Probes (/healthz,
// /readyz, /metrics) log at debug level so they do not drown the rest.
func (g *Gateway) requestLog(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) (err error) {
		start := time.Now()
		req, res := c.Request(), c.Response()
		id := requestid.From(req.Header.Get(requestid.Header))
		req.Header.Set(requestid.Header, id)
		res.Header().Set(requestid.Header, id)
		res.Before(func() { res.Header().Set(requestid.Header, id) })
		defer func() {
			if p := recover(); p != nil {
				// A response that broke mid-body (http.ErrAbortHandler) or a
				// bug: still one line, then the panic goes on to Recover.
				g.logRequest(c, id, start, http.StatusInternalServerError)
				panic(p)
			}
		}()
		if err := next(c); err != nil {
			c.Error(err) // answer now, so the line has the final status
		}
		g.logRequest(c, id, start, 0)
		return nil
	}
}

// logRequest writes the request's line; failStatus is the status to report
// when nothing was answered yet (a panic).
func (g *Gateway) logRequest(c echo.Context, id string, start time.Time, failStatus int) {
	req, res := c.Request(), c.Response()
	status := res.Status
	if !res.Committed && failStatus != 0 {
		status = failStatus
	}
	level := slog.LevelInfo
	switch req.URL.Path {
	case "/healthz", "/readyz", "/metrics":
		level = slog.LevelDebug
	}
	ctx := req.Context()
	if !g.opts.Logger.Enabled(ctx, level) {
		return
	}
	attrs := []slog.Attr{
		slog.String("request_id", id),
		slog.String("method", req.Method),
		slog.String("path", req.URL.Path),
		slog.Int("status", status),
		slog.Float64("duration_ms", float64(time.Since(start).Microseconds())/1000),
		slog.Int64("bytes", res.Size),
		slog.String("address", c.RealIP()),
	}
	if name := proxiedConnector(req.URL.Path); name != "" {
		attrs = append(attrs, slog.String("connector", name))
	}
	g.opts.Logger.LogAttrs(ctx, level, "request", attrs...)
}

// proxiedConnector is the connector a proxied path names
// (/api/clients/<name>/... or /api/agents/<name>/...), "" for other paths.
func proxiedConnector(path string) string {
	for _, prefix := range []string{"/api/clients/", "/api/agents/"} {
		if rest, ok := strings.CutPrefix(path, prefix); ok {
			name, _, _ := strings.Cut(rest, "/")
			if connectorName.MatchString(name) {
				return name
			}
			return ""
		}
	}
	return ""
}
