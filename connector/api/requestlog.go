package api

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/uncaged/workflow/shared/requestid"
)

// requestLog keeps the request's X-Request-Id — through the gateway that is
// the id the gateway assigned and logged, so one request reads the same in
// both logs — or assigns one when it is missing or not sane
// (requestid.Valid), echoes it on the response, and logs one structured
// line when the request is answered: request_id, method, path (never the
// query, which may carry a token), status, duration_ms and bytes. Probes
// (/healthz, /api/healthz, /metrics) log at debug level.
//
// It answers an error itself (so the line has the final status) and still
// returns it, so the metrics middleware outside can tell an unmatched route;
// the error handler does not answer twice.
func (s *server) requestLog(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := time.Now()
		req, res := c.Request(), c.Response()
		id := requestid.From(req.Header.Get(requestid.Header))
		req.Header.Set(requestid.Header, id)
		res.Header().Set(requestid.Header, id)
		defer func() {
			if p := recover(); p != nil {
				// The recover middleware outside answers 500; log it so.
				s.logRequest(c, id, start, http.StatusInternalServerError)
				panic(p)
			}
		}()
		err := next(c)
		if err != nil {
			c.Error(err)
		}
		s.logRequest(c, id, start, 0)
		return err
	}
}

// logRequest writes the request's line; failStatus is the status to report
// when nothing was answered yet (a panic).
func (s *server) logRequest(c echo.Context, id string, start time.Time, failStatus int) {
	req, res := c.Request(), c.Response()
	status := res.Status
	if !res.Committed && failStatus != 0 {
		status = failStatus
	}
	level := slog.LevelInfo
	switch req.URL.Path {
	case "/healthz", "/api/healthz", MetricsPath:
		level = slog.LevelDebug
	}
	ctx := req.Context()
	if !s.log.Enabled(ctx, level) {
		return
	}
	s.log.LogAttrs(ctx, level, "request",
		slog.String("request_id", id),
		slog.String("method", req.Method),
		slog.String("path", req.URL.Path),
		slog.Int("status", status),
		slog.Float64("duration_ms", float64(time.Since(start).Microseconds())/1000),
		slog.Int64("bytes", res.Size),
	)
}
