package server

import (
	"io"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/uncaged/workflow/gateway/metrics"
)

// instrument counts a proxied request in the metrics: its status class,
// the time to its response headers and the body bytes each way. It runs
// after the dashboard's authentication, so refusals count as auth failures
// and not here; the gateway's own answers (unknown, offline or busy
// connector, timeouts) count with their status.
func (g *Gateway) instrument(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		rec := metrics.NewRecorder(c.Response().Writer, time.Now())
		c.Response().Writer = rec
		// Deferred: the relay aborts a response that breaks mid-body
		// with a panic (http.ErrAbortHandler); it is counted all the same.
		defer g.metrics.ProxyDone(rec)
		if err := next(c); err != nil {
			c.Error(err) // write the error now, through rec
		}
		return nil
	}
}

// countingBody counts the request body bytes read on their way to the
// connector.
type countingBody struct {
	io.ReadCloser
	m *metrics.Gateway
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.m.ProxyBytes(metrics.DirectionIn, int64(n))
	return n, err
}
