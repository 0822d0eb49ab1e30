package metrics

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

func TestStatusClass(t *testing.T) {
	t.Parallel()
	for code, want := range map[int]string{0: "none", 101: "1xx", 200: "2xx", 204: "2xx", 302: "3xx", 404: "4xx", 499: "4xx", 502: "5xx", 1000: "none"} {
		if got := StatusClass(code); got != want {
			t.Errorf("%d: %s, want %s", code, got, want)
		}
	}
}

func TestRecorderAndProxyDone(t *testing.T) {
	t.Parallel()
	m := New(func() int { return 3 })
	w := httptest.NewRecorder()
	rec := NewRecorder(w, time.Now().Add(-time.Second))
	rec.Header().Set("Content-Type", "text/event-stream")
	if _, err := rec.Write([]byte("data: 1\n\n")); err != nil {
		t.Fatal(err)
	}
	rec.Flush()
	rec.WriteHeader(http.StatusTeapot) // too late: ignored
	if _, err := rec.Write([]byte("data: 2\n\n")); err != nil {
		t.Fatal(err)
	}
	status, after := rec.Status()
	if status != 200 || after < time.Second || rec.Written() != 18 || !w.Flushed || w.Body.String() != "data: 1\n\ndata: 2\n\n" {
		t.Fatalf("status %d after %v, %d bytes, flushed %v", status, after, rec.Written(), w.Flushed)
	}
	if http.NewResponseController(rec).Flush() != nil {
		t.Fatal("ResponseController cannot flush through the recorder")
	}
	m.ProxyDone(rec)
	m.ProxyDone(NewRecorder(httptest.NewRecorder(), time.Now())) // nothing written: "none", no duration
	m.ProxyBytes(DirectionIn, 7)
	m.ProxyBytes(DirectionIn, 0)
	m.Connected(ProtocolLegacy)
	m.Disconnected(DisconnectReplaced)
	m.AuthFailure(AuthWrongName)
	m.RateLimited()
	m.LegacyFrameDropped("invalid")
	want := map[string]float64{
		"uncaged_gateway_connectors_online":                             3,
		"uncaged_gateway_proxy_requests_total code=2xx":                 1,
		"uncaged_gateway_proxy_requests_total code=4xx":                 0,
		"uncaged_gateway_proxy_requests_total code=none":                1,
		"uncaged_gateway_proxy_duration_seconds":                        1,
		"uncaged_gateway_proxy_bytes_total direction=in":                7,
		"uncaged_gateway_proxy_bytes_total direction=out":               18,
		"uncaged_gateway_connect_rate_limited_total":                    1,
		"uncaged_gateway_legacy_frames_dropped_total reason=invalid":    1,
		"uncaged_gateway_connector_connects_total protocol=legacy-json": 1,
		"uncaged_gateway_connector_connects_total protocol=h2":          0,
		"uncaged_gateway_connector_disconnects_total reason=replaced":   1,
		"uncaged_gateway_auth_failures_total reason=wrong_name":         1,
		"uncaged_gateway_auth_failures_total reason=missing":            0,
	}
	fams, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, fam := range fams {
		for _, s := range fam.GetMetric() {
			key := fam.GetName()
			for _, l := range s.GetLabel() {
				key += " " + l.GetName() + "=" + l.GetValue()
			}
			switch {
			case s.Counter != nil:
				got[key] = s.Counter.GetValue()
			case s.Gauge != nil:
				got[key] = s.Gauge.GetValue()
			case s.Histogram != nil:
				got[key] = float64(s.Histogram.GetSampleCount())
			}
		}
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s = %v (present %v), want %v", k, g, ok, v)
		}
	}
}
