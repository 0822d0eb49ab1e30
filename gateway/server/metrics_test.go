package server

import (
	"fmt"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/uncaged/workflow/gateway/presence"
	"github.com/uncaged/workflow/shared/testkit"
)

// scrape reads /metrics with the Prometheus text parser.
func (f *fixture) scrape(token string) map[string]*dto.MetricFamily {
	f.t.Helper()
	req, _ := http.NewRequest("GET", f.srv.URL+"/metrics", nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		f.t.Fatalf("scrape: %d", resp.StatusCode)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		f.t.Fatal(err)
	}
	return fams
}

// metricValue is the value of name's series with exactly labels (a
// histogram's sample count), or -1 if there is none.
func metricValue(fams map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	fam, ok := fams[name]
	if !ok {
		return -1
	}
	want := map[string]string{}
	for i := 0; i+1 < len(labels); i += 2 {
		want[labels[i]] = labels[i+1]
	}
next:
	for _, m := range fam.GetMetric() {
		if len(m.GetLabel()) != len(want) {
			continue
		}
		for _, l := range m.GetLabel() {
			if want[l.GetName()] != l.GetValue() {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue()
		case m.Gauge != nil:
			return m.Gauge.GetValue()
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount())
		}
	}
	return -1
}

// expect checks series against wanted values, reporting them all.
func expect(t *testing.T, fams map[string]*dto.MetricFamily, want map[string]float64) {
	t.Helper()
	keys := make([]string, 0, len(want))
	for k := range want {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		parts := strings.Split(k, " ")
		if got := metricValue(fams, parts[0], parts[1:]...); got != want[k] {
			t.Errorf("%s = %v, want %v", k, got, want[k])
		}
	}
}

func TestMetrics(t *testing.T) {
	t.Parallel()
	f := newFixture(t, time.Hour)
	fams := f.scrape("")
	expect(t, fams, map[string]float64{
		"uncaged_gateway_connectors_online":                                0,
		"uncaged_gateway_connector_connects_total protocol h2":             0,
		"uncaged_gateway_connector_connects_total protocol legacy-json":    0,
		"uncaged_gateway_proxy_requests_total code 2xx":                    0,
		"uncaged_gateway_proxy_duration_seconds":                           0,
		"uncaged_gateway_auth_failures_total reason invalid":               0,
		"uncaged_gateway_connector_disconnects_total reason remote":        0,
		"uncaged_gateway_proxy_bytes_total direction in":                   0,
		"uncaged_gateway_proxy_bytes_total direction out":                  0,
		"uncaged_gateway_connector_disconnects_total reason replaced":      0,
		"uncaged_gateway_connector_disconnects_total reason shutdown":      0,
		"uncaged_gateway_connector_disconnects_total reason heartbeat":     0,
		"uncaged_gateway_connector_disconnects_total reason other":         0,
		"uncaged_gateway_auth_failures_total reason missing":               0,
		"uncaged_gateway_auth_failures_total reason wrong_role":            0,
		"uncaged_gateway_auth_failures_total reason wrong_name":            0,
		"uncaged_gateway_connect_rate_limited_total":                       0,
		"uncaged_gateway_legacy_frames_dropped_total reason invalid":       -1, // appears when it happens
		"uncaged_gateway_proxy_requests_total code none":                   -1,
		"uncaged_gateway_connector_connects_total protocol something-else": -1,
	})
	if _, ok := fams["go_goroutines"]; !ok {
		t.Error("no Go runtime metrics")
	}

	f.connector("laptop", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/missing" {
			http.Error(w, "nope", http.StatusNotFound)
			return
		}
		body := make([]byte, 100)
		n, _ := r.Body.Read(body)
		fmt.Fprintf(w, "got %d bytes", n)
	}))
	stopOld := f.legacyConnector("old", originalAPI(""))
	f.do("POST", "/api/clients/laptop/x", f.dash, strings.NewReader("0123456789"))                 // 2xx, 10 in, 13 out
	f.do("GET", "/api/clients/laptop/missing", f.dash, nil)                                        // 4xx, 5 out
	f.do("GET", "/api/clients/old/workflows", f.dash, nil)                                         // 2xx through the legacy socket
	f.do("GET", "/api/clients/nobody/x", f.dash, nil)                                              // 4xx from the gateway
	f.do("GET", "/api/clients/laptop/x", "garbage", nil)                                           // auth failure: not proxied
	f.do("GET", "/api/gateway/endpoints", "", nil)                                                 // auth failure: missing
	oldBytes := len(`{"machine":"old","method":"GET","uri":"/api/workflows","body":"","auth":""}`) // and 4xx "connector not found: nobody"
	notFound := len("{\"error\":\"connector not found: nobody\"}\n")
	ws := f.rawLegacy("junk")
	writeFrame(t, ws, "junk")
	testkit.WaitUntil(t, "the dropped frame to be counted", func() bool {
		return metricValue(f.scrape(""), "uncaged_gateway_legacy_frames_dropped_total", "reason", "invalid") == 1
	})

	if err := ws.CloseNow(); err != nil {
		t.Fatal(err)
	}
	f.waitStatus("junk", presence.Offline)
	expect(t, f.scrape(""), map[string]float64{
		"uncaged_gateway_connectors_online":                             2,
		"uncaged_gateway_connector_connects_total protocol h2":          1,
		"uncaged_gateway_connector_connects_total protocol legacy-json": 2,
		"uncaged_gateway_proxy_requests_total code 2xx":                 2,
		"uncaged_gateway_proxy_requests_total code 4xx":                 2,
		"uncaged_gateway_proxy_requests_total code 5xx":                 0,
		"uncaged_gateway_proxy_duration_seconds":                        4,
		"uncaged_gateway_proxy_bytes_total direction in":                10,
		"uncaged_gateway_proxy_bytes_total direction out":               float64(len("got 10 bytes") + len("nope\n") + oldBytes + notFound),
		"uncaged_gateway_auth_failures_total reason invalid":            1,
		"uncaged_gateway_auth_failures_total reason missing":            1,
	})

	// Disconnects, by reason: the connector leaving, a newer connection
	// taking the name; then the connector is offline (5xx).
	stopOld()
	f.waitStatus("old", presence.Offline)
	f.connector("laptop", echoAPI("laptop-again"))
	f.do("GET", "/api/clients/old/x", f.dash, nil)
	// The new connection is counted once it is registered, which may come
	// a moment after the old one was dropped as replaced.
	testkit.WaitUntil(t, "the replacement to be counted", func() bool {
		fams = f.scrape("")
		return metricValue(fams, "uncaged_gateway_connector_disconnects_total", "reason", "replaced") == 1 &&
			metricValue(fams, "uncaged_gateway_connector_connects_total", "protocol", "h2") == 2
	})
	expect(t, fams, map[string]float64{
		"uncaged_gateway_connectors_online":                           1,
		"uncaged_gateway_connector_disconnects_total reason remote":   2,
		"uncaged_gateway_connector_disconnects_total reason replaced": 1,
		"uncaged_gateway_connector_connects_total protocol h2":        2,
		"uncaged_gateway_proxy_requests_total code 5xx":               1,
	})
	f.gw.Shutdown()
	testkit.WaitUntil(t, "the shutdown disconnect to be counted", func() bool {
		return metricValue(f.scrape(""), "uncaged_gateway_connector_disconnects_total", "reason", "shutdown") == 1
	})
}

func TestMetricsToken(t *testing.T) {
	t.Parallel()
	f := newFixture(t, time.Hour, func(o *Options) { o.MetricsToken = "scrape-me" })
	for _, tok := range []string{"", "wrong", f.dash} {
		if resp, body := f.do("GET", "/metrics", tok, nil); resp.StatusCode != 401 || !strings.HasPrefix(body, `{"error":`) {
			t.Fatalf("token %.8q: %d %s", tok, resp.StatusCode, body)
		}
	}
	expect(t, f.scrape("scrape-me"), map[string]float64{
		"uncaged_gateway_auth_failures_total reason missing": 1,
		"uncaged_gateway_auth_failures_total reason invalid": 2,
	})
}

func TestHeartbeatDisconnectIsCounted(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 50*time.Millisecond)
	// The client never reads, so pings go unanswered.
	f.rawLegacy("mute")
	testkit.WaitUntil(t, "the heartbeat disconnect to be counted", func() bool {
		return metricValue(f.scrape(""), "uncaged_gateway_connector_disconnects_total", "reason", "heartbeat") == 1
	})
	f.waitStatus("mute", presence.Offline)
}
