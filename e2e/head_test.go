package e2e

import (
	"bufio"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"
)

// head sends HEAD (and GET, to compare) with the dashboard token and
// checks that HEAD gets GET's status and Content-Type, no body, and the
// connection back for the next request. client holds one connection at a
// time, so a HEAD that kept its connection busy (a stream's) would stall
// the GET after it.
func head(t *testing.T, client *http.Client, token, url string) *http.Response {
	t.Helper()
	do := func(method string) (*http.Response, int) {
		req, err := http.NewRequest(method, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, url, err)
		}
		defer resp.Body.Close()
		if method != http.MethodHead {
			return resp, 0 // a stream's body is left unread
		}
		b, _ := bufio.NewReader(resp.Body).Peek(1) // a HEAD's body is empty: EOF at once
		return resp, len(b)
	}
	h, n := do(http.MethodHead)
	g, _ := do(http.MethodGet)
	if h.StatusCode != g.StatusCode || h.StatusCode == http.StatusMethodNotAllowed || n != 0 {
		t.Errorf("HEAD %s: %d (%d body bytes); GET: %d", url, h.StatusCode, n, g.StatusCode)
	}
	if h.Header.Get("Content-Type") != g.Header.Get("Content-Type") {
		t.Errorf("HEAD %s: Content-Type %q, GET's %q", url, h.Header.Get("Content-Type"), g.Header.Get("Content-Type"))
	}
	return h
}

// Uptime checkers probe with HEAD: the gateway's and the connector's GET
// routes answer it, the dashboard and its assets, the API through the
// tunnel and a stream (which answers its headers and ends) included.
func TestHeadOnEveryServer(t *testing.T) {
	t.Parallel()
	g := startGateway(t)
	_, root := g.connector("laptop", map[string]string{"linear": "linear.esm.js"})
	// The timeout only ends a stalled test; nothing here is timed.
	client := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 1}, Timeout: time.Minute}
	t.Cleanup(client.CloseIdleConnections)
	base := "http://" + g.front

	_, page := g.do(http.MethodGet, "/", "")
	asset := regexp.MustCompile(`/assets/[^"]+\.js`).FindString(page)
	if asset == "" {
		t.Fatalf("no script in the dashboard's page: %.300s", page)
	}
	for _, c := range []struct{ path, contentType string }{
		{"/healthz", "application/json"},
		{"/readyz", "application/json"},
		{"/metrics", "text/plain"},
		{"/", "text/html"},
		{asset, "text/javascript"},
		{"/threads/deep-link", "text/html"},
		{"/api/gateway/endpoints", "application/json"},
		{"/api/clients/laptop/workflows", "application/json"},
		{"/api/clients/laptop/healthz", "application/json"},
		{"/api/clients/laptop/events", "text/event-stream"},
	} {
		resp := head(t, client, g.dash, base+c.path)
		if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), c.contentType) {
			t.Errorf("HEAD %s: %d %q, want 200 %s", c.path, resp.StatusCode, resp.Header.Get("Content-Type"), c.contentType)
		}
	}
	// A wrong path under the gateway's prefixes is its JSON 404, for HEAD too.
	if resp := head(t, client, g.dash, base+"/ws/connectt"); resp.StatusCode != http.StatusNotFound || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		t.Errorf("HEAD /ws/connectt: %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}

	// The connector's own server (serve) answers HEAD too.
	p := startProc(t, []string{"UNCAGED_WORKFLOW_STORAGE_ROOT=" + root}, "uncaged-workflow", "serve", "--listen", "127.0.0.1:0")
	api := p.serving(t)
	for _, c := range []struct{ path, contentType string }{
		{"/healthz", "application/json"},
		{"/api/workflows", "application/json"},
		{"/metrics", "text/plain"},
		{"/api/events", "text/event-stream"},
	} {
		resp := head(t, client, "", api+c.path)
		if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), c.contentType) {
			t.Errorf("serve: HEAD %s: %d %q, want 200 %s", c.path, resp.StatusCode, resp.Header.Get("Content-Type"), c.contentType)
		}
	}
}
