package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/uncaged/workflow/shared/envflag"
)

// fakeGateway answers the three routes status reads.
func fakeGateway(t *testing.T, ready bool, endpoints string) *httptest.Server {
	return fakeGatewayReady(t, ready, `{"ok":true}`, endpoints)
}

// fakeGatewayReady is fakeGateway whose ready /readyz answers readyBody.
func fakeGatewayReady(t *testing.T, ready bool, readyBody, endpoints string) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		write := func(body string) {
			if _, err := io.WriteString(w, body); err != nil {
				t.Error(err)
			}
		}
		switch r.URL.Path {
		case "/healthz":
			write(`{"ok":true}`)
		case "/readyz":
			if !ready {
				w.WriteHeader(http.StatusServiceUnavailable)
				write(`{"ok":false,"error":"not connected to NATS"}`)
				return
			}
			write(readyBody)
		case "/api/gateway/endpoints":
			if r.Header.Get("Authorization") != "Bearer dash" {
				w.WriteHeader(http.StatusUnauthorized)
				write(`{"error":"invalid token"}`)
				return
			}
			write(endpoints)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func runStatus(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := statusCmd()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	err := cmd.Execute()
	return out.String(), err
}

func TestStatusListsConnectors(t *testing.T) {
	now := time.Now().UnixMilli()
	eps := `[{"name":"laptop","status":"online","lastHeartbeat":` + itoa(now) + `,"connectedAt":` + itoa(now) + `,"version":"v1","address":"10.0.0.2"},
		{"name":"ci-box","status":"offline","lastHeartbeat":` + itoa(now) + `,"connectedAt":` + itoa(now) + `,"replica":"gw-2"}]`
	gw := fakeGateway(t, true, eps)
	t.Setenv("UNCAGED_DASHBOARD_TOKEN", "dash")
	out, err := runStatus(t, "--url", gw.URL)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"gateway     " + gw.URL + "  healthy, ready", "connectors  1 online, 1 offline", "REPLICA", "laptop", "ci-box", "gw-2", "10.0.0.2"} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
	out, err = runStatus(t, "--url", gw.URL, "--json")
	var s gatewayStatus
	if err != nil || json.Unmarshal([]byte(out), &s) != nil || !s.Ready || len(s.Endpoints) != 2 || s.Endpoints[1].Replica != "gw-2" {
		t.Fatalf("json: %v %s", err, out)
	}
}

func TestStatusWithoutATokenShowsHealthOnly(t *testing.T) {
	gw := fakeGateway(t, true, `[]`)
	t.Setenv("UNCAGED_DASHBOARD_TOKEN", "")
	t.Setenv("WORKFLOW_DASHBOARD_SECRET", "")
	out, err := runStatus(t, "--url", gw.URL)
	if err != nil || !strings.Contains(out, "healthy, ready") || !strings.Contains(out, "set UNCAGED_DASHBOARD_TOKEN") {
		t.Fatalf("%v\n%s", err, out)
	}
}

func TestStatusFailsOnARefusedToken(t *testing.T) {
	gw := fakeGateway(t, true, `[]`)
	t.Setenv("UNCAGED_DASHBOARD_TOKEN", "wrong")
	if _, err := runStatus(t, "--url", gw.URL); err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("err = %v", err)
	}
}

func TestStatusHealthFollowsReadiness(t *testing.T) {
	t.Parallel()
	if out, err := runStatus(t, "--url", fakeGateway(t, true, `[]`).URL, "--health"); err != nil || out != "" {
		t.Fatalf("ready gateway: %v %q", err, out)
	}
	_, err := runStatus(t, "--url", fakeGateway(t, false, `[]`).URL, "--health")
	if err == nil || !strings.Contains(err.Error(), "not connected to NATS") {
		t.Fatalf("not ready gateway: %v", err)
	}
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close()
	if _, err := runStatus(t, "--url", down.URL, "--health"); err == nil || !strings.Contains(err.Error(), "does not answer") {
		t.Fatalf("gateway down: %v", err)
	}
}

func TestStatusRejectsAGarbledEndpointsList(t *testing.T) {
	gw := fakeGateway(t, true, `{"not":"a list"}`)
	t.Setenv("UNCAGED_DASHBOARD_TOKEN", "dash")
	if _, err := runStatus(t, "--url", gw.URL); err == nil || !strings.Contains(err.Error(), "endpoints list") {
		t.Fatalf("err = %v", err)
	}
}

func TestDefaultStatusURL(t *testing.T) {
	t.Parallel()
	for env, want := range map[string]string{
		"":                 "http://127.0.0.1:8080",
		":9000":            "http://127.0.0.1:9000",
		"0.0.0.0:9000":     "http://127.0.0.1:9000",
		"[::]:9000":        "http://127.0.0.1:9000",
		"10.1.2.3:8081":    "http://10.1.2.3:8081",
		"not an address":   "http://127.0.0.1:8080",
		"gateway.local:80": "http://gateway.local:80",
	} {
		got := defaultStatusURL(func(k string) string {
			if k == "UNCAGED_GATEWAY_LISTEN" {
				return env
			}
			return ""
		})
		if got != want {
			t.Errorf("listen %q: %q, want %q", env, got, want)
		}
	}
	// UNCAGED_GATEWAY_URL reaches --url through the command's own binding,
	// and wins over the default derived from UNCAGED_GATEWAY_LISTEN.
	cmd := statusCmd()
	env := map[string]string{"UNCAGED_GATEWAY_URL": "https://gw", "UNCAGED_GATEWAY_LISTEN": ":1"}
	if err := envflag.Apply(cmd.Flags(), func(k string) string { return env[k] }); err != nil {
		t.Fatal(err)
	}
	if got, _ := cmd.Flags().GetString("url"); got != "https://gw" {
		t.Errorf("UNCAGED_GATEWAY_URL ignored: %q", got)
	}
}

func itoa(n int64) string { b, _ := json.Marshal(n); return string(b) }

// A ready gateway's account of an outage of what it shares with the
// other replicas is shown, in the table and in --json; a healthy one
// adds no line.
func TestStatusShowsSharedOutages(t *testing.T) {
	t.Parallel()
	srv := fakeGatewayReady(t, true, `{"ok":true,"store":{"status":"down","since":"2026-12-05T10:00:00Z","error":"dial tcp: connection refused","queued":12},"nats":{"status":"disconnected","peers":2,"detail":"serving this replica's tunnels"}}`, `[]`)
	out, err := runStatus(t, "--url", srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"healthy, ready", "store       down since 2026-12-05T10:00:00Z: dial tcp: connection refused (12 records waiting)", "nats        disconnected: serving this replica's tunnels"} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
	out, err = runStatus(t, "--url", srv.URL, "--json")
	if err != nil || !strings.Contains(out, `"queued": 12`) || !strings.Contains(out, `"status": "disconnected"`) {
		t.Fatalf("--json: %v\n%s", err, out)
	}
	fine := fakeGatewayReady(t, true, `{"ok":true,"store":{"status":"up","queued":0},"nats":{"status":"connected","peers":2}}`, `[]`)
	if out, err := runStatus(t, "--url", fine.URL); err != nil || strings.Contains(out, "store ") || strings.Contains(out, "nats ") {
		t.Fatalf("a healthy gateway's status: %v\n%s", err, out)
	}
}
