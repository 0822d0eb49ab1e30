package server

import (
	"log/slog"

	"github.com/labstack/echo/v4"

	"github.com/uncaged/workflow/gateway/presence"
	"github.com/uncaged/workflow/shared/requestid"
)

// requestLog gives every request an id and logs one line for it
// (requestid.Middleware), with the client address and, for
// /api/clients/<name>/..., the connector name.
func (g *Gateway) requestLog() echo.MiddlewareFunc {
	return requestid.Middleware(requestid.LogOptions{
		Logger: slog.New(refusalLimiting{Handler: g.opts.Logger.Handler(), limited: g.bounds.limited}), // bounds.go
		Probes: []string{"/healthz", "/readyz", "/metrics"},
		Attrs: func(c echo.Context) []slog.Attr {
			attrs := []slog.Attr{slog.String("address", c.RealIP())}
			if name := proxiedConnector(c.Request().URL.Path); name != "" {
				attrs = append(attrs, slog.String("connector", name))
			}
			return attrs
		},
	})
}

// proxiedConnector is the connector a proxied path names
// (/api/clients/<name>/... or /api/agents/<name>/...), "" for other paths.
func proxiedConnector(path string) string {
	if name, _, ok := splitProxied(path); ok && presence.ValidName(name) {
		return name
	}
	return ""
}
