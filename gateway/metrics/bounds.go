package metrics

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/uncaged/workflow/shared/logging"
)

// The metrics of the gateway's bounds: what happened past a limit, so
// that the log, which says only the first few times, is not the only
// record.
//
//	uncaged_gateway_connections_open                  gauge
//	uncaged_gateway_connections_refused_total         counter {reason="per_address"|"global"}
//	uncaged_gateway_connections_shed_total            counter
//	uncaged_gateway_accept_errors_total               counter
//	uncaged_gateway_log_events_total                  counter {message}
//	uncaged_gateway_log_lines_suppressed_total        counter {message}
//	uncaged_gateway_fleet_threads_refused_total       counter {reason}
//	uncaged_gateway_fleet_fields_cut_total            counter {field}
//	uncaged_gateway_fleet_threads_evicted_total       counter
//	uncaged_gateway_store_ready                       gauge (1 ready, 0 not)

// Reasons a connection is refused.
const (
	RefusedPerAddress = "per_address"
	RefusedGlobal     = "global"
)

// bounds are the metrics above, made once by New.
type bounds struct {
	connsOpen    prometheus.GaugeFunc
	connsRefused *prometheus.CounterVec
	connsShed    prometheus.Counter
	acceptErrors prometheus.Counter
	fleetRefused *prometheus.CounterVec
	fleetCut     *prometheus.CounterVec
	fleetEvicted prometheus.Counter
	storeReady   prometheus.Gauge
	// openConns and limitedCounts are read at every scrape; set once,
	// before serving, but atomically all the same.
	openConns     atomic.Pointer[func() int]
	limitedCounts atomic.Pointer[func() []logging.LimitCount]
}

var (
	logEventsDesc = prometheus.NewDesc("uncaged_gateway_log_events_total",
		"Events behind a rate-limited log line (one a party without a credential can cause), written or not, by message.", []string{"message"}, nil)
	logSuppressedDesc = prometheus.NewDesc("uncaged_gateway_log_lines_suppressed_total",
		"Rate-limited log lines not written, by message.", []string{"message"}, nil)
)

// registerBounds makes the bounds' metrics and registers them on m's
// registry.
func (m *Gateway) registerBounds() {
	b := &m.bounds
	b.connsRefused = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "uncaged_gateway_connections_refused_total", Help: "Connections closed as soon as accepted: over the per-address limit, or over the global limit with none to shed.",
	}, []string{"reason"})
	b.connsShed = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "uncaged_gateway_connections_shed_total", Help: "Connections closed at the global limit to make room: those waiting longest on their client.",
	})
	b.acceptErrors = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "uncaged_gateway_accept_errors_total", Help: "Failed accepts (out of file descriptors and the like), each followed by a pause.",
	})
	b.connsOpen = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "uncaged_gateway_connections_open", Help: "Client connections open now, as the listener counts them.",
	}, func() float64 {
		open := b.openConns.Load()
		if open == nil {
			return 0
		}
		return float64((*open)())
	})
	b.fleetRefused = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "uncaged_gateway_fleet_threads_refused_total", Help: "Thread events from connectors not stored, by reason.",
	}, []string{"reason"})
	b.fleetCut = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "uncaged_gateway_fleet_fields_cut_total", Help: "Fields of thread events cut, dropped or corrected to fit the store's bounds, by field.",
	}, []string{"field"})
	b.fleetEvicted = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "uncaged_gateway_fleet_threads_evicted_total", Help: "Threads forgotten, oldest first, to keep a machine within its share of the store.",
	})
	b.storeReady = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "uncaged_gateway_store_ready", Help: "1 while the store is the one the gateway opened and answers, else 0.",
	})
	for _, r := range []string{RefusedPerAddress, RefusedGlobal} {
		b.connsRefused.WithLabelValues(r)
	}
	m.reg.MustRegister(b.connsOpen, b.connsRefused, b.connsShed, b.acceptErrors, b.fleetRefused, b.fleetCut, b.fleetEvicted, b.storeReady, limitedCollector{b})
}

// limitedCollector exports the counts of the gateway's rate-limited log.
type limitedCollector struct{ b *bounds }

// Describe implements prometheus.Collector.
func (c limitedCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- logEventsDesc
	ch <- logSuppressedDesc
}

// Collect implements prometheus.Collector.
func (c limitedCollector) Collect(ch chan<- prometheus.Metric) {
	counts := c.b.limitedCounts.Load()
	if counts == nil {
		return
	}
	for _, n := range (*counts)() {
		ch <- prometheus.MustNewConstMetric(logEventsDesc, prometheus.CounterValue, float64(n.Events), n.Key)
		ch <- prometheus.MustNewConstMetric(logSuppressedDesc, prometheus.CounterValue, float64(n.Suppressed), n.Key)
	}
}

// CountLimitedLogs exports counts, a rate-limited log's totals
// (logging.Limited.Counts), at every scrape. Call it before serving.
func (m *Gateway) CountLimitedLogs(counts func() []logging.LimitCount) {
	m.bounds.limitedCounts.Store(&counts)
}

// CountOpenConnections makes open the source of the open connections'
// gauge. Call it before serving.
func (m *Gateway) CountOpenConnections(open func() int) { m.bounds.openConns.Store(&open) }

// ConnectionRefused counts a connection closed as soon as accepted.
func (m *Gateway) ConnectionRefused(reason string) {
	m.bounds.connsRefused.WithLabelValues(reason).Inc()
}

// ConnectionShed counts a connection closed to make room for a new one.
func (m *Gateway) ConnectionShed() { m.bounds.connsShed.Inc() }

// AcceptError counts a failed accept.
func (m *Gateway) AcceptError() { m.bounds.acceptErrors.Inc() }

// FleetThreadRefused counts a thread event not stored.
func (m *Gateway) FleetThreadRefused(reason string) {
	m.bounds.fleetRefused.WithLabelValues(reason).Inc()
}

// FleetFieldCut counts n fields named field cut to fit.
func (m *Gateway) FleetFieldCut(field string, n int) {
	if n > 0 {
		m.bounds.fleetCut.WithLabelValues(field).Add(float64(n))
	}
}

// FleetThreadsEvicted counts n threads forgotten for a machine's share.
func (m *Gateway) FleetThreadsEvicted(n int) {
	if n > 0 {
		m.bounds.fleetEvicted.Add(float64(n))
	}
}

// StoreReady sets the store's readiness gauge.
func (m *Gateway) StoreReady(ready bool) {
	v := 0.0
	if ready {
		v = 1
	}
	m.bounds.storeReady.Set(v)
}
