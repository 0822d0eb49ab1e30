package metrics

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// The metrics of what the gateway writes to its store behind the
// requests (audit entries, the fleet's threads, machines' last-seen
// times), which waits in a queue while the store does not answer, and of
// the requests refused because the store did not answer:
//
//	uncaged_gateway_store_queued                      gauge {place="memory"|"disk"}
//	uncaged_gateway_store_queued_bytes                gauge {place="memory"|"disk"}
//	uncaged_gateway_store_written_total               counter {kind="audit"|"threads"|"seen"}
//	uncaged_gateway_store_dropped_total               counter {kind, reason="full"|"refused"|"closed"}
//	uncaged_gateway_store_requests_refused_total      counter

// Kinds of record the gateway queues for its store.
const (
	StoreKindAudit   = "audit"
	StoreKindThreads = "threads"
	StoreKindSeen    = "seen"
)

// Reasons a queued record is dropped (the spool's).
const (
	StoreDropFull    = "full"
	StoreDropRefused = "refused"
	StoreDropClosed  = "closed"
)

// StoreQueue is what the store's queue holds now.
type StoreQueue struct {
	MemoryRecords, DiskRecords int
	MemoryBytes, DiskBytes     int64
}

// storeMetrics are the metrics above.
type storeMetrics struct {
	written *prometheus.CounterVec
	dropped *prometheus.CounterVec
	refused prometheus.Counter
	// queue is read at every scrape; set once, before serving.
	queue atomic.Pointer[func() StoreQueue]
}

var (
	storeQueuedDesc = prometheus.NewDesc("uncaged_gateway_store_queued",
		"Records (audit entries, batches of threads, last-seen times) waiting for the store, by where they wait: memory, or the spill file past the memory bound.", []string{"place"}, nil)
	storeQueuedBytesDesc = prometheus.NewDesc("uncaged_gateway_store_queued_bytes",
		"Bytes of the records waiting for the store, by where they wait.", []string{"place"}, nil)
)

// registerStore makes the store's metrics and registers them.
func (m *Gateway) registerStore() {
	s := &m.store
	s.written = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "uncaged_gateway_store_written_total", Help: "Records written to the store from its queue, by kind.",
	}, []string{"kind"})
	s.dropped = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "uncaged_gateway_store_dropped_total", Help: "Records lost on their way to the store, by kind and reason: full (memory and the spill file both full), refused (the store refused them), closed (past shutdown, with nowhere to keep them).",
	}, []string{"kind", "reason"})
	s.refused = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "uncaged_gateway_store_requests_refused_total", Help: "Requests answered 503 because the store did not answer what they needed.",
	})
	for _, k := range []string{StoreKindAudit, StoreKindThreads, StoreKindSeen} {
		s.written.WithLabelValues(k)
		for _, r := range []string{StoreDropFull, StoreDropRefused, StoreDropClosed} {
			s.dropped.WithLabelValues(k, r)
		}
	}
	m.reg.MustRegister(s.written, s.dropped, s.refused, storeQueueCollector{s})
}

// storeQueueCollector exports what the store's queue holds.
type storeQueueCollector struct{ s *storeMetrics }

// Describe implements prometheus.Collector.
func (c storeQueueCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- storeQueuedDesc
	ch <- storeQueuedBytesDesc
}

// Collect implements prometheus.Collector.
func (c storeQueueCollector) Collect(ch chan<- prometheus.Metric) {
	var q StoreQueue
	if f := c.s.queue.Load(); f != nil {
		q = (*f)()
	}
	for _, p := range []struct {
		place          string
		records, bytes float64
	}{{"memory", float64(q.MemoryRecords), float64(q.MemoryBytes)}, {"disk", float64(q.DiskRecords), float64(q.DiskBytes)}} {
		ch <- prometheus.MustNewConstMetric(storeQueuedDesc, prometheus.GaugeValue, p.records, p.place)
		ch <- prometheus.MustNewConstMetric(storeQueuedBytesDesc, prometheus.GaugeValue, p.bytes, p.place)
	}
}

// CountStoreQueue makes queue the source of the store queue's gauges.
// Call it before serving.
func (m *Gateway) CountStoreQueue(queue func() StoreQueue) { m.store.queue.Store(&queue) }

// StoreWritten counts a record of kind written from the queue.
func (m *Gateway) StoreWritten(kind string) { m.store.written.WithLabelValues(kind).Inc() }

// StoreDropped counts a record of kind lost for reason.
func (m *Gateway) StoreDropped(kind, reason string) {
	m.store.dropped.WithLabelValues(kind, reason).Inc()
}

// StoreRequestRefused counts a request answered 503 for want of the store.
func (m *Gateway) StoreRequestRefused() { m.store.refused.Inc() }
