package api

import (
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/uncaged/workflow/engine/host"
)

// metricsEngine is an Engine whose Running answer the test sets.
type metricsEngine struct {
	Engine // the rest is never called
	mu     sync.Mutex
	list   []host.RunningThread
	err    error
}

func (e *metricsEngine) Running() ([]host.RunningThread, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.list, e.err
}

func scrapeAPI(t testing.TB, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url + MetricsPath)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
		t.Fatalf("scrape: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

// sample is the value of a series of fams[name] with the given route and
// code labels (none for a plain gauge), or -1.
func sample(fams map[string]*dto.MetricFamily, name string, routeCode ...string) float64 {
	fam, ok := fams[name]
	if !ok {
		return -1
	}
	for _, m := range fam.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if len(routeCode) == 2 && (labels["route"] != routeCode[0] || labels["code"] != routeCode[1]) {
			continue
		}
		if m.Counter != nil {
			return m.Counter.GetValue()
		}
		return m.Gauge.GetValue()
	}
	return -1
}

func TestMetricsEndpoint(t *testing.T) {
	t.Parallel()
	eng := &metricsEngine{list: []host.RunningThread{{ThreadID: "a", Status: "running"}, {ThreadID: "b", Status: "paused"}}}
	f := newFixture(t, func(o *Options) { o.Engine = eng; o.BodyLimit = 64 })
	for _, r := range []struct {
		method, path, body string
		code               int
	}{
		{"GET", "/api/workflows", "", 200},
		{"GET", "/api/workflows", "", 200},
		{"GET", "/api/threads/NOSUCHTHREAD", "", 404},
		{"GET", "/api/no/such/route", "", 404},
		{"PUT", "/api/workflows", "", 405},
		{"POST", "/api/threads", "{not json", 400},
		{"POST", "/api/cas", `{"content":"` + strings.Repeat("x", 100) + `"}`, 413},
		{"GET", "/healthz", "", 200},
	} {
		req, _ := http.NewRequest(r.method, f.srv.URL+r.path, strings.NewReader(r.body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != r.code {
			t.Fatalf("%s %s: %d, want %d", r.method, r.path, resp.StatusCode, r.code)
		}
	}
	fams := scrapeAPI(t, f.srv.URL)
	for _, c := range []struct {
		route, code string
		want        float64
	}{
		{"/api/workflows", "200", 2},
		{"/api/threads/:id", "404", 1},
		{"unmatched", "404", 1},
		{"unmatched", "405", 1},
		{"/api/threads", "400", 1},
		{"/api/cas", "413", 1},
		{"/healthz", "200", 1},
		{"/metrics", "200", -1}, // counted once answered
	} {
		if got := sample(fams, "uncaged_connector_requests_total", c.route, c.code); got != c.want {
			t.Errorf("requests{route=%q,code=%q} = %v, want %v", c.route, c.code, got, c.want)
		}
	}
	if got := sample(fams, "uncaged_connector_threads_running"); got != 2 {
		t.Errorf("threads running = %v", got)
	}
	if _, ok := fams["go_goroutines"]; !ok {
		t.Error("no Go runtime metrics")
	}

	// The gauge follows the engine; an engine that fails gives no sample.
	eng.mu.Lock()
	eng.list = eng.list[:1]
	eng.mu.Unlock()
	fams = scrapeAPI(t, f.srv.URL)
	if got := sample(fams, "uncaged_connector_threads_running"); got != 1 {
		t.Errorf("threads running = %v, want 1", got)
	}
	if got := sample(fams, "uncaged_connector_requests_total", "/metrics", "200"); got != 1 {
		t.Errorf("the first scrape was not counted: %v", got)
	}
	eng.mu.Lock()
	eng.err = errors.New("host gone")
	eng.mu.Unlock()
	if got := sample(scrapeAPI(t, f.srv.URL), "uncaged_connector_threads_running"); got != -1 {
		t.Errorf("threads running with a failing engine = %v, want no sample", got)
	}
}

func TestMetricsWithoutEngine(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(o *Options) { o.Engine = nil })
	if got := sample(scrapeAPI(t, f.srv.URL), "uncaged_connector_threads_running"); got != 0 {
		t.Fatalf("threads running without an engine = %v", got)
	}
}
