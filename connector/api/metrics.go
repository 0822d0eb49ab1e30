package api

import (
	"errors"
	"strconv"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/uncaged/workflow/engine/host/wake"
)

// MetricsPath is where the API serves its Prometheus metrics, outside
// /api (so the gateway, which forwards /api/*, does not expose them):
//
//	uncaged_connector_requests_total{route,code}  counter: requests answered, by
//	    route pattern ("/api/threads/:id"; "unmatched" for 404/405 from the
//	    router) and status code. A live stream counts when it ends.
//	uncaged_connector_threads_running             gauge: the threads the engine
//	    host holds (running or paused), as Engine.Running lists them; no
//	    sample when the host fails to answer, 0 without an Engine.
//	uncaged_connector_change_stream_open          gauge: 1 while the engine host's
//	    change stream is open, so that the live streams and the event feed
//	    wake on its changes; 0 while they look on a timer instead (no host,
//	    one older than the stream) or none is open to need it.
//
// plus the Go runtime's and the process's metrics, on a registry of the
// API's own (never the global one).
const MetricsPath = "/metrics"

// unmatchedRoute labels requests no route matched.
const unmatchedRoute = "unmatched"

type apiMetrics struct {
	requests *prometheus.CounterVec
}

// mountMetrics adds GET /metrics to e and counts every request e answers.
func mountMetrics(e *echo.Echo, engine Engine, wakes *wake.Hub) {
	reg := prometheus.NewRegistry()
	m := &apiMetrics{requests: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "uncaged_connector_requests_total", Help: "Requests the connector's API answered, by route and status code.",
	}, []string{"route", "code"})}
	reg.MustRegister(m.requests, threadsCollector{engine: engine, desc: prometheus.NewDesc(
		"uncaged_connector_threads_running", "Threads the engine host holds (running or paused).", nil, nil)},
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "uncaged_connector_change_stream_open", Help: "1 while the engine host's change stream is open, 0 while the API looks for changes on a timer.",
		}, func() float64 {
			if wakes.Mode() == wake.Live {
				return 1
			}
			return 0
		}),
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// Pre-router middleware wraps everything, recovery and body limits
	// included, so every answer is counted with its final status.
	e.Pre(m.count)
	e.GET(MetricsPath, echo.WrapHandler(promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg})))
}

func (m *apiMetrics) count(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		err := next(c)
		if err != nil {
			c.Error(err) // answer now, so the status is known
		}
		route := c.Path()
		if route == "" || errors.Is(err, echo.ErrNotFound) || errors.Is(err, echo.ErrMethodNotAllowed) {
			route = unmatchedRoute
		}
		m.requests.WithLabelValues(route, strconv.Itoa(c.Response().Status)).Inc()
		return nil
	}
}

// threadsCollector asks the engine what runs at every scrape.
type threadsCollector struct {
	engine Engine
	desc   *prometheus.Desc
}

func (t threadsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- t.desc }

func (t threadsCollector) Collect(ch chan<- prometheus.Metric) {
	n := 0
	if t.engine != nil {
		running, err := t.engine.Running()
		if err != nil {
			return // unknown: no sample rather than a wrong 0
		}
		n = len(running)
	}
	ch <- prometheus.MustNewConstMetric(t.desc, prometheus.GaugeValue, float64(n))
}
