package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/uncaged/workflow/shared/testkit"
	"github.com/uncaged/workflow/shared/testkit/pgtest"
)

// queuedMetric reads uncaged_gateway_store_queued{place} from the
// gateway at addr (-1 when it does not answer).
func queuedMetric(t *testing.T, addr, place string) int {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	m := regexp.MustCompile(`(?m)^uncaged_gateway_store_queued\{place="` + place + `"\} (\d+)$`).FindSubmatch(body)
	if m == nil {
		return -1
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}

// auditActions counts the gateway's audit entries by action (through its
// API, with a dashboard token).
func auditActions(t *testing.T, addr, dash string) map[string]int {
	t.Helper()
	req, _ := http.NewRequest("GET", "http://"+addr+"/api/gateway/audit?limit=1000", nil)
	req.Header.Set("Authorization", "Bearer "+dash)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var page struct {
		Entries []struct{ Action string }
	}
	if resp.StatusCode != 200 || json.NewDecoder(resp.Body).Decode(&page) != nil {
		return nil
	}
	out := map[string]int{}
	for _, e := range page.Entries {
		out[e.Action]++
	}
	return out
}

// post sends a body to the gateway at addr with a bearer token ("" for
// none) and returns the status.
func post(t *testing.T, addr, path, token, body string) int {
	t.Helper()
	req, _ := http.NewRequest("POST", "http://"+addr+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// A gateway whose PostgreSQL server is down keeps its audit entries in
// its queue; stopped during the outage — killed with SIGKILL, with a
// memory bound so small that every entry went to the spill file, or
// stopped cleanly, which moves what memory held to the file — and
// started again once the server is back, it writes them, each once.
func TestAGatewayStoppedDuringAStoreOutageWritesItsSpillOnRestart(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name        string
		spoolMemory string
		sig         syscall.Signal
		waitsIn     string
	}{
		{"killed, a tiny memory bound", "1", syscall.SIGKILL, "disk"},
		{"stopped cleanly", "16777216", syscall.SIGTERM, "memory"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			pg := pgtest.NewServer(t)
			url := pg.URL(t)
			key := gwCLI(t, "", "key", "generate")
			useStore(key, "UNCAGED_GATEWAY_DATABASE_URL="+url)
			dash := gwCLI(t, key, "token", "create", "--dashboard")
			env := []string{"UNCAGED_GATEWAY_KEY=" + key, "UNCAGED_GATEWAY_DATABASE_URL=" + url}
			args := []string{"serve", "--listen", "127.0.0.1:0", "--spool-dir", t.TempDir(), "--spool-memory", c.spoolMemory}
			gw := startProc(t, env, "uncaged-gateway", args...)
			addr := gw.listening(t)
			waitOK(t, "the gateway to be ready", "http://"+addr+"/readyz")

			pg.Stop(t)
			// The token was loaded at start: logging in with it needs no
			// store, and each login and logout is an audit entry.
			for range 3 {
				if code := post(t, addr, "/api/gateway/login", "", fmt.Sprintf(`{"token":%q}`, dash)); code != 200 {
					t.Fatalf("login during the outage: %d", code)
				}
			}
			for range 2 {
				if code := post(t, addr, "/api/gateway/logout", dash, ""); code != 200 {
					t.Fatalf("logout during the outage: %d", code)
				}
			}
			testkit.WaitUntil(t, "the five entries to wait in "+c.waitsIn, func() bool { return queuedMetric(t, addr, c.waitsIn) == 5 })
			if code, why := storeReadyz(t, addr); code != 200 {
				t.Fatalf("/readyz during the outage: %d %s", code, why)
			}
			gw.stop(c.sig)

			pg.Start(t)
			again := startProc(t, env, "uncaged-gateway", args...)
			addr = again.listening(t)
			testkit.WaitUntil(t, "the spill file to be written", func() bool {
				return queuedMetric(t, addr, "disk") == 0 && queuedMetric(t, addr, "memory") == 0
			})
			got := auditActions(t, addr, dash)
			if got["login"] != 3 || got["logout"] != 2 {
				t.Fatalf("after the restart the audit log holds %v; want 3 logins and 2 logouts, each once", got)
			}
			if !strings.Contains(again.logs.String(), `"msg":"store queue: writing what a previous run could not","records":5`) {
				t.Fatalf("the restarted gateway did not say it writes what was left:\n%s", again.logs.String())
			}
		})
	}
}
