package api

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/uncaged/workflow/shared/testkit"

	"github.com/uncaged/workflow/shared/requestid"
)

// requestLine is the "request" log line with id, decoded (nil: none).
func requestLine(t *testing.T, logs *testkit.Buffer, id string) map[string]any {
	t.Helper()
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line is not JSON: %q", line)
		}
		if m["msg"] == "request" && m["request_id"] == id {
			return m
		}
	}
	return nil
}

func loggedFixture(t *testing.T) (*fixture, *testkit.Buffer) {
	logs := &testkit.Buffer{}
	f := newFixture(t, func(o *Options) {
		o.Logger = slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	return f, logs
}

func getWithID(t *testing.T, url, id string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	if id != "" {
		req.Header.Set(requestid.Header, id)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

func TestRequestLogReusesTheGatewaysID(t *testing.T) {
	t.Parallel()
	f, logs := loggedFixture(t)
	resp := getWithID(t, f.srv.URL+"/api/workflows?key=secret-token-value", "gw-assigned-id-1")
	if got := resp.Header.Values(requestid.Header); resp.StatusCode != 200 || len(got) != 1 || got[0] != "gw-assigned-id-1" {
		t.Fatalf("response: %d %q", resp.StatusCode, got)
	}
	line := requestLine(t, logs, "gw-assigned-id-1")
	if line == nil {
		t.Fatalf("no request line:\n%s", logs)
	}
	for k, v := range map[string]any{"method": "GET", "path": "/api/workflows", "status": float64(200), "level": "INFO"} {
		if line[k] != v {
			t.Errorf("log %s = %v, want %v", k, line[k], v)
		}
	}
	if _, ok := line["duration_ms"].(float64); !ok {
		t.Errorf("no duration_ms: %v", line)
	}
	if strings.Contains(logs.String(), "secret-token-value") {
		t.Fatal("the query's token reached the log")
	}
}

func TestRequestLogAssignsAnIDWhenMissingOrNotSane(t *testing.T) {
	t.Parallel()
	f, logs := loggedFixture(t)
	for _, in := range []string{"", strings.Repeat("x", 65), "two words", "line\tbreak", "<script>"} {
		resp := getWithID(t, f.srv.URL+"/api/threads", in)
		got := resp.Header.Get(requestid.Header)
		if got == in || !requestid.Valid(got) {
			t.Errorf("incoming %q: answered with id %q", in, got)
			continue
		}
		if requestLine(t, logs, got) == nil {
			t.Errorf("incoming %q: no line for %q", in, got)
		}
	}
}

func TestRequestLogHasTheFinalStatusOfErrors(t *testing.T) {
	t.Parallel()
	f, logs := loggedFixture(t)
	resp := getWithID(t, f.srv.URL+"/api/no-such-route", "missing-1")
	line := requestLine(t, logs, "missing-1")
	if resp.StatusCode != 404 || line == nil || line["status"] != float64(404) {
		t.Fatalf("unknown route: %d %v", resp.StatusCode, line)
	}
	resp = getWithID(t, f.srv.URL+"/api/cas/not-a-hash", "badhash-1")
	line = requestLine(t, logs, "badhash-1")
	if resp.StatusCode != 400 || line == nil || line["status"] != float64(400) {
		t.Fatalf("bad hash: %d %v", resp.StatusCode, line)
	}
	resp = getWithID(t, f.srv.URL+"/api/healthz", "probe-1")
	if line = requestLine(t, logs, "probe-1"); resp.StatusCode != 200 || line == nil || line["level"] != "DEBUG" {
		t.Fatalf("probe: %d %v", resp.StatusCode, line)
	}
}
