package api

import (
	"github.com/labstack/echo/v4"

	"github.com/uncaged/workflow/shared/requestid"
)

// requestLog keeps the gateway's request id (or assigns one) and logs one
// line per request (requestid.Middleware). Errors are handed on after being
// answered, so the metrics middleware outside can tell an unmatched route.
func (s *server) requestLog() echo.MiddlewareFunc {
	return requestid.Middleware(requestid.LogOptions{
		Logger:       s.log,
		Probes:       []string{"/healthz", "/api/healthz", MetricsPath},
		ReturnErrors: true,
	})
}
