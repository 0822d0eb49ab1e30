package server

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/uncaged/workflow/gateway/auth"
	"github.com/uncaged/workflow/shared/requestid"
	"github.com/uncaged/workflow/shared/testkit"
)

// logBuffer collects a logger's JSON lines; handlers log from many
// goroutines.
type logBuffer struct{ testkit.Buffer }

// requests returns the "request" lines logged so far, decoded.
func (b *logBuffer) requests(t *testing.T) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(b.String()), "\n") {
		var m map[string]any
		if line == "" {
			continue
		}
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line is not JSON: %q", line)
		}
		if m["msg"] == "request" {
			out = append(out, m)
		}
	}
	return out
}

// lineFor is the request line with the given id (nil: none).
func (b *logBuffer) lineFor(t *testing.T, id string) map[string]any {
	for _, m := range b.requests(t) {
		if m["request_id"] == id {
			return m
		}
	}
	return nil
}

// idRecorder is a connector API that remembers the X-Request-Id of every
// request it got and answers with an id of its own, as echo's request-id
// middleware in the connector would when it generates one.
type idRecorder struct {
	mu  sync.Mutex
	ids []string
}

func (r *idRecorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	r.ids = append(r.ids, req.Header.Get(requestid.Header))
	r.mu.Unlock()
	w.Header().Set(requestid.Header, "connector-own-id")
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"ok":true}`)) // the client checks what arrives
}

func (r *idRecorder) last() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.ids) == 0 {
		return ""
	}
	return r.ids[len(r.ids)-1]
}

func newLoggedFixture(t *testing.T) (*fixture, *logBuffer) {
	logs := &logBuffer{}
	f := newFixture(t, time.Hour, func(o *Options) {
		o.Logger = slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	return f, logs
}

func (f *fixture) doWithID(method, path, id string) *http.Response {
	f.t.Helper()
	req, _ := http.NewRequest(method, f.srv.URL+path, nil)
	req.Header.Set("Authorization", "Bearer "+f.dash)
	if id != "" {
		req.Header.Set(requestid.Header, id)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

func TestRequestIDReachesTheConnectorAndTheLog(t *testing.T) {
	t.Parallel()
	f, logs := newLoggedFixture(t)
	api := &idRecorder{}
	f.connector("laptop", api)

	resp := f.doWithID("GET", "/api/clients/laptop/workflows?key="+f.dash, "")
	got := resp.Header.Values(requestid.Header)
	if resp.StatusCode != 200 || len(got) != 1 || !requestid.Valid(got[0]) {
		t.Fatalf("response: %d, X-Request-Id %q", resp.StatusCode, got)
	}
	id := got[0]
	if api.last() != id {
		t.Fatalf("the connector got id %q, the client %q", api.last(), id)
	}
	line := logs.lineFor(t, id)
	if line == nil {
		t.Fatalf("no log line for %s:\n%s", id, logs.String())
	}
	want := map[string]any{"method": "GET", "path": "/api/clients/laptop/workflows", "status": float64(200), "connector": "laptop", "level": "INFO"}
	for k, v := range want {
		if line[k] != v {
			t.Errorf("log %s = %v, want %v (%v)", k, line[k], v, line)
		}
	}
	if _, ok := line["duration_ms"].(float64); !ok {
		t.Errorf("no duration_ms: %v", line)
	}
	if strings.Contains(logs.String(), f.dash) {
		t.Fatal("a token reached the log")
	}
}

func TestRequestIDFromTheClientIsKeptWhenSane(t *testing.T) {
	t.Parallel()
	f, logs := newLoggedFixture(t)
	api := &idRecorder{}
	f.connector("laptop", api)
	resp := f.doWithID("GET", "/api/clients/laptop/threads", "trace-01.A_b")
	if got := resp.Header.Get(requestid.Header); got != "trace-01.A_b" || api.last() != got {
		t.Fatalf("sane id: response %q, connector %q", got, api.last())
	}
	if logs.lineFor(t, "trace-01.A_b") == nil {
		t.Fatalf("no log line:\n%s", logs.String())
	}
}

func TestRequestIDFromTheClientIsReplacedWhenNotSane(t *testing.T) {
	t.Parallel()
	f, logs := newLoggedFixture(t)
	api := &idRecorder{}
	f.connector("laptop", api)
	for _, bad := range []string{strings.Repeat("a", 65), "has space", `quote"d`, "semi;colon", "ünï"} {
		resp := f.doWithID("GET", "/api/clients/laptop/threads", bad)
		got := resp.Header.Get(requestid.Header)
		if got == bad || !requestid.Valid(got) || api.last() != got {
			t.Errorf("id %q: response %q, connector %q", bad, got, api.last())
		}
		if strings.Contains(logs.String(), bad) {
			t.Errorf("the rejected id %q reached the log", bad)
		}
	}
}

func TestGatewayAnswersAreLoggedWithTheirStatus(t *testing.T) {
	t.Parallel()
	f, logs := newLoggedFixture(t)
	resp := f.doWithID("GET", "/api/clients/nobody/workflows", "")
	id := resp.Header.Get(requestid.Header)
	line := logs.lineFor(t, id)
	if resp.StatusCode != 404 || line == nil || line["status"] != float64(404) || line["connector"] != "nobody" {
		t.Fatalf("unknown connector: %d %q %v", resp.StatusCode, id, line)
	}
	// Refused credentials are logged too, without the credential.
	req, _ := http.NewRequest("GET", f.srv.URL+"/api/gateway/endpoints", nil)
	req.Header.Set("Authorization", "Bearer not-a-token-"+strings.Repeat("z", 10))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	line = logs.lineFor(t, resp.Header.Get(requestid.Header))
	if resp.StatusCode != 401 || line == nil || line["status"] != float64(401) {
		t.Fatalf("refused: %d %v", resp.StatusCode, line)
	}
	if strings.Contains(logs.String(), "not-a-token") {
		t.Fatal("a credential reached the log")
	}
	// Probes are logged at debug level.
	resp, err = http.Get(f.srv.URL + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if line = logs.lineFor(t, resp.Header.Get(requestid.Header)); line == nil || line["level"] != "DEBUG" {
		t.Fatalf("probe line: %v", line)
	}
}

func TestProxiedConnector(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		"/api/clients/laptop/workflows": "laptop",
		"/api/agents/ci-box":            "ci-box",
		"/api/clients/":                 "",
		"/api/clients/Bad_Name/x":       "",
		"/api/gateway/endpoints":        "",
		"/healthz":                      "",
	}
	for path, want := range cases {
		if got := proxiedConnector(path); got != want {
			t.Errorf("proxiedConnector(%q) = %q, want %q", path, got, want)
		}
	}
}

// Answers given before routing are logged like the rest: a dashboard on
// another origin's preflight, and the refusal of a cookie sent from there.
func TestPreflightsAndOriginRefusalsAreLogged(t *testing.T) {
	t.Parallel()
	const listed = "http://127.0.0.1:5173"
	logs := &logBuffer{}
	f := newFixture(t, time.Hour, func(o *Options) {
		o.AllowOrigins = []string{listed}
		o.Logger = slog.New(slog.NewJSONHandler(logs, nil))
	})
	resp, _ := f.corsRequest("OPTIONS", "/api/gateway/endpoints", listed, map[string]string{"Access-Control-Request-Method": "GET"})
	line := logs.lineFor(t, resp.Header.Get(requestid.Header))
	if resp.StatusCode != http.StatusNoContent || line == nil || line["method"] != "OPTIONS" || line["status"] != float64(http.StatusNoContent) {
		t.Fatalf("preflight: %d, log line %v", resp.StatusCode, line)
	}
	resp, _ = f.corsRequest("GET", "/api/gateway/endpoints", listed, map[string]string{"Cookie": auth.CookieName + "=whatever", "Sec-Fetch-Site": "same-site"})
	line = logs.lineFor(t, resp.Header.Get(requestid.Header))
	if resp.StatusCode != http.StatusForbidden || line == nil || line["status"] != float64(http.StatusForbidden) {
		t.Fatalf("cookie from another origin: %d, log line %v", resp.StatusCode, line)
	}
}
