package requestid

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
)

// LogOptions configures Middleware.
type LogOptions struct {
	Logger *slog.Logger
	// Probes are paths logged at debug level (health checks, metrics), so
	// they do not drown the rest.
	Probes []string
	// Attrs adds fields to a request's line (the gateway: client address
	// and connector name).
	Attrs func(c echo.Context) []slog.Attr
	// ReturnErrors hands a handler's error on after answering it, for
	// middleware outside that wants to see it (the connector's metrics tell
	// unmatched routes that way); otherwise the error is answered and
	// swallowed.
	ReturnErrors bool
}

// Middleware keeps the request's X-Request-Id when it is Valid — through
// the gateway, the id the gateway assigned, so one request reads the same
// in both logs — or assigns a New one; sets it on the request (a proxy
// copies it on to the connector) and on the response, replacing any copy a
// proxied answer brought back so the client sees one value; and logs one
// structured line when the request is answered: request_id, method, path
// (never the query: ?key= and ?secret= carry tokens), status, duration_ms,
// bytes and opts.Attrs. A handler's error is answered before the line is
// written, so the line has the final status; a panic is logged as a 500
// and goes on to the recover middleware outside.
func Middleware(opts LogOptions) echo.MiddlewareFunc {
	probes := make(map[string]bool, len(opts.Probes))
	for _, p := range opts.Probes {
		probes[p] = true
	}
	logRequest := func(c echo.Context, id string, start time.Time, failStatus int) {
		req, res := c.Request(), c.Response()
		level := slog.LevelInfo
		if probes[req.URL.Path] {
			level = slog.LevelDebug
		}
		ctx := req.Context()
		h := opts.Logger.Handler()
		if !h.Enabled(ctx, level) {
			return
		}
		status := res.Status
		if !res.Committed && failStatus != 0 {
			status = failStatus
		}
		attrs := []slog.Attr{
			slog.String("request_id", id),
			slog.String("method", req.Method),
			slog.String("path", req.URL.Path),
			slog.Int("status", status),
			slog.Float64("duration_ms", float64(time.Since(start).Microseconds())/1000),
			slog.Int64("bytes", res.Size),
		}
		if opts.Attrs != nil {
			attrs = append(attrs, opts.Attrs(c)...)
		}
		// Straight to the handler, with no caller recorded: Logger would walk
		// the stack for a source line nobody logs (it would always be this
		// function), about a tenth of the line's cost.
		r := slog.NewRecord(time.Now(), level, "request", 0)
		r.AddAttrs(attrs...)
		_ = h.Handle(ctx, r)
	}
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			start := time.Now()
			req, res := c.Request(), c.Response()
			id := From(req.Header.Get(Header))
			req.Header.Set(Header, id)
			res.Header().Set(Header, id)
			res.Before(func() { res.Header().Set(Header, id) })
			defer func() {
				if p := recover(); p != nil {
					logRequest(c, id, start, http.StatusInternalServerError)
					panic(p)
				}
			}()
			err := next(c)
			if err != nil {
				c.Error(err)
			}
			logRequest(c, id, start, 0)
			if opts.ReturnErrors {
				return err
			}
			return nil
		}
	}
}
