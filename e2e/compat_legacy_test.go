package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// urlRegisteredClient is an original client of the era before the
// WebSocket, in Go: it serves its API on a URL of its own and registers
// that URL with POST /api/gateway/register (name, url, the shared secret,
// its agentToken); the gateway is to fetch <url>/api/<rest> with the token
// as X-Agent-Token. Its API answers only requests carrying the token, and
// /api/away redirects to away.
type urlRegisteredClient struct {
	t           *testing.T
	name, token string
	srv         *httptest.Server
}

func newURLRegisteredClient(t *testing.T, name, away string) *urlRegisteredClient {
	c := &urlRegisteredClient{t: t, name: name, token: "agent-token-of-" + name}
	c.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Agent-Token") != c.token {
			http.Error(w, `{"error":"Unauthorized"}`, http.StatusUnauthorized)
			return
		}
		if r.URL.Path == "/api/away" {
			http.Redirect(w, r, away, http.StatusFound)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"machine":%q,"path":%q,"query":%q}`, c.name, r.URL.Path, r.URL.RawQuery)
	}))
	t.Cleanup(c.srv.Close)
	return c
}

// register is the original's registration (and 60 s heartbeat).
func (c *urlRegisteredClient) register(front, secret string) (int, string) {
	c.t.Helper()
	body := fmt.Sprintf(`{"name":%q,"url":%q,"secret":%q,"agentToken":%q}`, c.name, c.srv.URL+"/", secret, c.token)
	resp, err := http.Post("http://"+front+"/api/gateway/register", "application/json", strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestURLRegisteredClient: with --legacy-url-allow listing its host, an
// original client registered with a URL is listed and its requests are
// fetched from that URL with its token; a redirect out of the allowed set
// is refused without being followed; once unregistered it is 404. A
// gateway without the flag refuses to fetch it and says which flag would.
func TestURLRegisteredClient(t *testing.T) {
	t.Parallel()
	const secret = "a-shared-secret-of-the-original"
	// Outside the set: another loopback address, which must never be hit.
	var hit atomic.Int32
	outside := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hit.Add(1) }))
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Skip("no 127.0.0.2 on this machine:", err)
	}
	outside.Listener = ln
	outside.Start()
	t.Cleanup(outside.Close)
	c := newURLRegisteredClient(t, "old-serve", outside.URL+"/api/threads")

	g := newGateway(t, []string{"WORKFLOW_DASHBOARD_SECRET=" + secret}, 0, "--legacy-url-allow", "127.0.0.1")
	if code, body := c.register(g.front, secret); code != 201 {
		t.Fatalf("register: %d %s", code, body)
	}
	var eps []struct{ Name, URL, Status, Protocol string }
	resp, body := g.do("GET", "/api/gateway/endpoints", "")
	if resp.StatusCode != 200 || json.Unmarshal([]byte(body), &eps) != nil || len(eps) != 1 ||
		eps[0].Name != "old-serve" || eps[0].URL != c.srv.URL || eps[0].Status != "online" || eps[0].Protocol != "legacy-url" {
		t.Fatalf("endpoints: %d %s", resp.StatusCode, body)
	}
	resp, body = g.do("GET", "/api/clients/old-serve/threads?limit=5", "")
	if want := `{"machine":"old-serve","path":"/api/threads","query":"limit=5"}`; resp.StatusCode != 200 || body != want {
		t.Errorf("proxied: %d %s, want %s", resp.StatusCode, body, want)
	}
	// The older prefix, and the original dashboard's live URL, reach it too.
	resp, body = g.do("GET", "/api/agents/old-serve/workflows", "")
	if resp.StatusCode != 200 || !strings.Contains(body, `"path":"/api/workflows"`) {
		t.Errorf("/api/agents/: %d %s", resp.StatusCode, body)
	}
	resp, body = g.do("GET", "/api/old-serve/threads/t1/live", "")
	if resp.StatusCode != 200 || !strings.Contains(body, `"path":"/api/threads/t1/live"`) {
		t.Errorf("live alias: %d %s", resp.StatusCode, body)
	}
	resp, body = g.do("GET", "/api/clients/old-serve/away", "")
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(body, "redirect to "+outside.URL) || !strings.Contains(body, "--legacy-url-allow") {
		t.Errorf("redirect out of the set: %d %s", resp.StatusCode, body)
	}
	if n := hit.Load(); n != 0 {
		t.Errorf("the address outside the set was fetched %d times", n)
	}
	req, _ := http.NewRequest("DELETE", "http://"+g.front+"/api/gateway/register/old-serve", nil)
	req.Header.Set("Authorization", "Bearer "+secret)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 200 {
		t.Fatalf("unregister: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	if resp, body := g.do("GET", "/api/clients/old-serve/threads", ""); resp.StatusCode != 404 {
		t.Errorf("after unregister: %d %s", resp.StatusCode, body)
	}

	// Without the flag: registered as always, never fetched, and the
	// refusal names the flag.
	off := newGateway(t, []string{"WORKFLOW_DASHBOARD_SECRET=" + secret}, 0)
	if code, body := c.register(off.front, secret); code != 201 {
		t.Fatalf("register without the flag: %d %s", code, body)
	}
	resp, body = off.do("GET", "/api/clients/old-serve/threads", "")
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(body, "--legacy-url-allow") {
		t.Errorf("without the flag: %d %s", resp.StatusCode, body)
	}
}
