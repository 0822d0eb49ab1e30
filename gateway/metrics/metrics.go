// Package metrics holds the gateway's Prometheus metrics, on a registry of
// its own (never the global one), and the response-writer wrapper the
// proxy counts through.
//
// Metrics (besides the Go runtime's and the process's):
//
//	uncaged_gateway_connectors_online                 gauge
//	uncaged_gateway_connector_connects_total          counter {protocol="h2"|"legacy-json"}
//	uncaged_gateway_connector_disconnects_total       counter {reason="remote"|"replaced"|"heartbeat"|"shutdown"|"other"}
//	uncaged_gateway_connect_rate_limited_total        counter
//	uncaged_gateway_proxy_requests_total              counter {code="1xx".."5xx"|"none"}
//	uncaged_gateway_proxy_duration_seconds            histogram, time to response headers
//	uncaged_gateway_proxy_bytes_total                 counter {direction="in"|"out"}
//	uncaged_gateway_auth_failures_total               counter {reason="missing"|"invalid"|"wrong_role"|"wrong_name"}
//	uncaged_gateway_legacy_frames_dropped_total       counter {reason="binary"|"invalid"|"unknown_id"}
//
// and those of the gateway's bounds (bounds.go) and of what it writes to
// its store behind the requests (store.go).
//
// Proxy bytes are body bytes: "in" read from dashboard requests (and sent
// on to connectors), "out" written back in responses.
package metrics

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Label values.
const (
	ProtocolH2     = "h2"
	ProtocolLegacy = "legacy-json"

	DisconnectRemote    = "remote"    // the connector went away (closed, network dropped)
	DisconnectReplaced  = "replaced"  // a newer connection took its name
	DisconnectHeartbeat = "heartbeat" // it missed two heartbeats
	DisconnectShutdown  = "shutdown"  // the gateway shut down
	DisconnectMoved     = "moved"     // it moved to another replica, asked to by this one (its machine was never away)
	DisconnectOther     = "other"     // the gateway closed it for another reason

	DirectionIn  = "in"
	DirectionOut = "out"

	AuthMissing   = "missing"
	AuthInvalid   = "invalid"
	AuthWrongRole = "wrong_role"
	AuthWrongName = "wrong_name"
)

// durationBuckets reach past the default 60 s request timeout.
var durationBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}

// Gateway is the gateway's set of metrics. Its methods are safe for
// concurrent use.
type Gateway struct {
	reg           *prometheus.Registry
	connects      *prometheus.CounterVec
	disconnects   *prometheus.CounterVec
	rateLimited   prometheus.Counter
	proxyRequests *prometheus.CounterVec
	proxyDuration prometheus.Histogram
	proxyBytes    *prometheus.CounterVec
	authFailures  *prometheus.CounterVec
	legacyDropped *prometheus.CounterVec
	bounds        bounds
	store         storeMetrics
}

// New returns the gateway's metrics on a new registry; online is asked for
// the number of connectors online at every scrape.
func New(online func() int) *Gateway {
	m := &Gateway{
		reg: prometheus.NewRegistry(),
		connects: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "uncaged_gateway_connector_connects_total", Help: "Connector connections accepted, by protocol.",
		}, []string{"protocol"}),
		disconnects: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "uncaged_gateway_connector_disconnects_total", Help: "Connector connections ended, by reason.",
		}, []string{"reason"}),
		rateLimited: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "uncaged_gateway_connect_rate_limited_total", Help: "Connection attempts refused by the per-address rate limit.",
		}),
		proxyRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "uncaged_gateway_proxy_requests_total", Help: "Authenticated requests to /api/clients/<name>/..., by status class.",
		}, []string{"code"}),
		proxyDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "uncaged_gateway_proxy_duration_seconds", Help: "Time from a proxied request's arrival to its response headers.",
			Buckets: durationBuckets,
		}),
		proxyBytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "uncaged_gateway_proxy_bytes_total", Help: "Proxied body bytes: in (requests), out (responses).",
		}, []string{"direction"}),
		authFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "uncaged_gateway_auth_failures_total", Help: "Requests refused for their credentials, by reason.",
		}, []string{"reason"}),
		legacyDropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "uncaged_gateway_legacy_frames_dropped_total", Help: "Frames from original (JSON-frame) connectors dropped, by reason.",
		}, []string{"reason"}),
	}
	m.reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "uncaged_gateway_connectors_online", Help: "Connectors online now.",
		}, func() float64 { return float64(online()) }),
		m.connects, m.disconnects, m.rateLimited, m.proxyRequests, m.proxyDuration, m.proxyBytes, m.authFailures, m.legacyDropped,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	m.registerBounds()
	m.registerStore()
	// Every known series exists from the start, at 0, so rates work from
	// the first scrape.
	for _, p := range []string{ProtocolH2, ProtocolLegacy} {
		m.connects.WithLabelValues(p)
	}
	for _, r := range []string{DisconnectRemote, DisconnectReplaced, DisconnectHeartbeat, DisconnectShutdown, DisconnectMoved, DisconnectOther} {
		m.disconnects.WithLabelValues(r)
	}
	for _, c := range []string{"2xx", "4xx", "5xx"} {
		m.proxyRequests.WithLabelValues(c)
	}
	for _, d := range []string{DirectionIn, DirectionOut} {
		m.proxyBytes.WithLabelValues(d)
	}
	for _, r := range []string{AuthMissing, AuthInvalid, AuthWrongRole, AuthWrongName} {
		m.authFailures.WithLabelValues(r)
	}
	return m
}

// Registry is where the metrics are registered.
func (m *Gateway) Registry() *prometheus.Registry { return m.reg }

// Handler serves the metrics in the Prometheus exposition formats.
func (m *Gateway) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// Connected counts an accepted connector connection.
func (m *Gateway) Connected(protocol string) { m.connects.WithLabelValues(protocol).Inc() }

// Disconnected counts an ended connector connection.
func (m *Gateway) Disconnected(reason string) { m.disconnects.WithLabelValues(reason).Inc() }

// RateLimited counts a connection attempt refused by the rate limit.
func (m *Gateway) RateLimited() { m.rateLimited.Inc() }

// AuthFailure counts a request refused for its credentials.
func (m *Gateway) AuthFailure(reason string) { m.authFailures.WithLabelValues(reason).Inc() }

// LegacyFrameDropped counts a dropped frame from an original connector.
func (m *Gateway) LegacyFrameDropped(reason string) { m.legacyDropped.WithLabelValues(reason).Inc() }

// ProxyBytes counts n proxied body bytes in direction (DirectionIn or
// DirectionOut).
func (m *Gateway) ProxyBytes(direction string, n int64) {
	if n > 0 {
		m.proxyBytes.WithLabelValues(direction).Add(float64(n))
	}
}

// ProxyDone counts a finished proxied request from what rec saw: its status
// class, the time its headers took, and the bytes written back.
func (m *Gateway) ProxyDone(rec *Recorder) {
	status, headerAfter := rec.Status()
	m.proxyRequests.WithLabelValues(StatusClass(status)).Inc()
	if status != 0 {
		m.proxyDuration.Observe(headerAfter.Seconds())
	}
	m.ProxyBytes(DirectionOut, rec.Written())
}

// StatusClass is "2xx" for 200–299 and so on; "none" when no response was
// written (the client went away first).
func StatusClass(status int) string {
	if status < 100 || status > 999 {
		return "none"
	}
	return strconv.Itoa(status/100) + "xx"
}

// Recorder wraps a ResponseWriter to see the status, when the headers went
// out and how many body bytes followed. It passes Flush through and
// unwraps for http.ResponseController, so streams stay live.
type Recorder struct {
	http.ResponseWriter
	start       time.Time
	status      int
	headerAfter time.Duration
	written     int64
}

// NewRecorder wraps w; the time to headers counts from start.
func NewRecorder(w http.ResponseWriter, start time.Time) *Recorder {
	return &Recorder{ResponseWriter: w, start: start}
}

// WriteHeader implements http.ResponseWriter.
func (r *Recorder) WriteHeader(code int) {
	if r.status == 0 && code >= 200 {
		r.status, r.headerAfter = code, time.Since(r.start)
	}
	r.ResponseWriter.WriteHeader(code)
}

// Write implements http.ResponseWriter.
func (r *Recorder) Write(p []byte) (int, error) {
	if r.status == 0 {
		r.status, r.headerAfter = http.StatusOK, time.Since(r.start)
	}
	n, err := r.ResponseWriter.Write(p)
	r.written += int64(n)
	return n, err
}

// Flush implements http.Flusher.
func (r *Recorder) Flush() { _ = http.NewResponseController(r.ResponseWriter).Flush() }

// Unwrap returns the wrapped ResponseWriter (http.ResponseController).
func (r *Recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// Status is the status written (0: none yet) and how long after the start
// the headers went out.
func (r *Recorder) Status() (int, time.Duration) { return r.status, r.headerAfter }

// Written is how many body bytes were written.
func (r *Recorder) Written() int64 { return r.written }
