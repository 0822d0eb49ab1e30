package server

import (
	"io"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/uncaged/workflow/gateway/cluster"
	"github.com/uncaged/workflow/gateway/metrics"
)

// instrument counts a proxied request in the metrics: its status class,
// the time to its response headers and the body bytes each way. It runs
// after the dashboard's authentication, so refusals count as auth failures
// and not here; the gateway's own answers (unknown, offline or busy
// connector, timeouts) count with their status.
//
// A request is counted once, by the replica it entered the cluster at:
// one another replica forwarded here (it carries the hop header) is not
// counted again. The entering replica sees all of it — the status its
// client got (the holder's, or its own 502 or 504 when the holder could
// not answer), the time to headers including the hop, the bytes its
// client sent and got — so the sums over replicas are the cluster's
// traffic, and no query has to leave out a second count (which a label
// for the forwarded hop would have asked of every query, and of every
// query written later). The hop itself is counted where it was made:
// uncaged_gateway_cluster_forwarded_requests_total. A forged hop header
// is refused (401, an auth failure) before the request goes anywhere.
func (g *Gateway) instrument(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if g.opts.Cluster != nil && c.Request().Header.Get(cluster.HopHeader) != "" {
			if err := next(c); err != nil {
				c.Error(err)
			}
			return nil
		}
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
