package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/uncaged/workflow/gateway/legacy"
	"github.com/uncaged/workflow/shared/testkit"
)

// originalClient is an original TypeScript `uncaged-workflow connect`, in
// Go: it registers with POST /api/gateway/register (name, url, the shared
// secret, its client token), holds the JSON-frame socket of /ws/connect
// and dials it again whenever it drops, as the original does. Its local
// API, as the original's, answers only requests carrying its client token
// (X-Client-Token), and 401 otherwise. It never repeats its registration
// by itself: the original's heartbeat comes every 60 s, and the point of
// the tests is what happens before it.
type originalClient struct {
	t                          *testing.T
	name, secret, token, front string
	// dials counts the sockets it got.
	dials atomic.Int32
}

// newOriginalClient starts one against the gateway at front (host:port).
func newOriginalClient(t *testing.T, front, name, secret string) *originalClient {
	c := &originalClient{t: t, name: name, secret: secret, token: "client-token-of-" + name, front: front}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); c.hold(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return c
}

// api is the original client's local API.
func (c *originalClient) api() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.Header.Get("X-Client-Token") != c.token {
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprint(w, `{"error":"Unauthorized"}`)
			return
		}
		switch r.URL.Path {
		case "/api/threads": // the original's thread list and detail shapes
			fmt.Fprint(w, `{"threads":[{"threadId":"06EZJ3QM9Q4S5XWA0R1C7D8E2G","workflow":"solve","hash":"HEXEJQQQ6EVYJ","startedAt":"2026-11-02T10:00:00.000Z","status":"completed"}]}`)
		case "/api/threads/06EZJ3QM9Q4S5XWA0R1C7D8E2G":
			fmt.Fprint(w, `{"threadId":"06EZJ3QM9Q4S5XWA0R1C7D8E2G","records":[`+
				`{"type":"thread-start","workflow":"solve","prompt":"fix the bug","threadId":"06EZJ3QM9Q4S5XWA0R1C7D8E2G","status":"completed","timestamp":null},`+
				`{"type":"workflow-result","returnCode":0,"content":"fixed","timestamp":1793613600000}]}`)
		default:
			fmt.Fprintf(w, `{"machine":%q,"path":%q}`, c.name, r.URL.Path)
		}
	})
}

// hold keeps the socket up until ctx ends. The pause between attempts is
// the client's back-off, not a wait for anything.
func (c *originalClient) hold(ctx context.Context) {
	u := "ws://" + c.front + "/ws/connect?" + url.Values{"name": {c.name}, "secret": {c.secret}}.Encode()
	for ctx.Err() == nil {
		ws, _, err := websocket.Dial(ctx, u, nil)
		if err == nil {
			ws.SetReadLimit(64 << 20)
			c.dials.Add(1)
			// Serve returns when the socket drops (a gateway restart).
			_ = legacy.Serve(ctx, ws, c.api())
			_ = ws.CloseNow()
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// register is the original's POST /api/gateway/register.
func (c *originalClient) register() int {
	c.t.Helper()
	body := fmt.Sprintf(`{"name":%q,"url":"http://127.0.0.1:3000","secret":%q,"clientToken":%q}`, c.name, c.secret, c.token)
	resp, err := http.Post("http://"+c.front+"/api/gateway/register", "application/json", strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

// unregister is the original's DELETE /api/gateway/register/:name.
func (c *originalClient) unregister() int {
	c.t.Helper()
	req, _ := http.NewRequest("DELETE", "http://"+c.front+"/api/gateway/register/"+c.name, nil)
	req.Header.Set("Authorization", "Bearer "+c.secret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

// TestOriginalClientServedAfterARestart: an original-protocol client's
// threads are in the fleet's list; it keeps running while the gateway
// restarts; the gateway keeps its registration,
// so the first request after the client's socket is back reaches it with
// its client token (before, 401 for up to 60 s: until its next
// heartbeat). Unregistering then removes it: gone from the endpoints, and
// its requests are 404, as with the original gateway.
func TestOriginalClientServedAfterARestart(t *testing.T) {
	t.Parallel()
	const secret = "a-shared-secret-of-the-original"
	g := newGateway(t, []string{"WORKFLOW_DASHBOARD_SECRET=" + secret}, 0)
	c := newOriginalClient(t, g.front, "old-box", secret)
	if code := c.register(); code != 201 {
		t.Fatalf("register: %d", code)
	}
	g.waitStatus("old-box", "online")
	if resp, body := g.do("GET", "/api/clients/old-box/workflows", ""); resp.StatusCode != 200 || !strings.Contains(body, `"machine":"old-box"`) {
		t.Fatalf("before the restart: %d %s", resp.StatusCode, body)
	}
	// Its threads are in the fleet's list, as its own page shows them.
	testkit.WaitUntil(t, "the fleet's list to show the original client's thread", func() bool {
		resp, body := g.do("GET", "/api/gateway/threads?machine=old-box", "")
		return resp.StatusCode == 200 && strings.Contains(body, `"threadId":"06EZJ3QM9Q4S5XWA0R1C7D8E2G"`) && strings.Contains(body, `"prompt":"fix the bug"`)
	})

	g.restart()
	testkit.WaitUntil(t, "the client's socket to be back", func() bool { return c.dials.Load() >= 2 && g.endpoints()["old-box"] == "online" })
	// No heartbeat in between: the kept registration gives the token.
	if resp, body := g.do("GET", "/api/clients/old-box/workflows", ""); resp.StatusCode != 200 || !strings.Contains(body, `"machine":"old-box"`) {
		t.Fatalf("first request after the restart: %d %s", resp.StatusCode, body)
	}
	if code := c.register(); code != 200 {
		t.Fatalf("heartbeat after the restart: %d, want 200 (known)", code)
	}

	if code := c.unregister(); code != 200 {
		t.Fatalf("unregister: %d", code)
	}
	if _, ok := g.endpoints()["old-box"]; ok {
		t.Fatalf("endpoints after unregister: %v", g.endpoints())
	}
	if resp, body := g.do("GET", "/api/clients/old-box/workflows", ""); resp.StatusCode != 404 {
		t.Fatalf("after unregister: %d %s", resp.StatusCode, body)
	}
}
