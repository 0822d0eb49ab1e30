package server

import (
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/uncaged/workflow/gateway/store"
	"github.com/uncaged/workflow/gateway/web"
)

// routeParams are a route pattern's parameters (":name") and wildcard.
var routeParams = regexp.MustCompile(`:[^/]+|\*`)

// Every GET route answers HEAD with GET's status and headers and no body:
// uptime checkers probe with HEAD. The routes come from the router's own
// table, so a route added later is covered without touching this test.
func TestEveryGetRouteAnswersHead(t *testing.T) {
	t.Parallel()
	st, err := store.Open(context.Background(), store.Config{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() }) // after the gateway's own cleanup
	// With a store and the dashboard, every route there is.
	f := newFixture(t, time.Hour, func(o *Options) { o.Store, o.Dashboard = st, web.Handler() })
	heads := map[string]bool{}
	for _, r := range f.gw.echo.Routes() {
		if r.Method == http.MethodHead {
			heads[r.Path] = true
		}
	}
	checked := 0
	for _, r := range f.gw.echo.Routes() {
		if r.Method != http.MethodGet {
			continue
		}
		checked++
		if !heads[r.Path] {
			t.Errorf("GET %s has no HEAD route", r.Path)
		}
		path := routeParams.ReplaceAllString(r.Path, "x")
		if r.Path == "/*" {
			path = "/assets/" // a real asset is checked below
		}
		// Only GET's status and headers are compared: a stream's body
		// (GET /api/gateway/changes) does not end.
		get := f.headers(http.MethodGet, path)
		head, body := f.do(http.MethodHead, path, f.dash, nil)
		if head.StatusCode == http.StatusMethodNotAllowed || head.StatusCode != get.StatusCode || body != "" {
			t.Errorf("HEAD %s (route %s): %d with %d bytes; GET: %d", path, r.Path, head.StatusCode, len(body), get.StatusCode)
		}
		if got, want := head.Header.Get("Content-Type"), get.Header.Get("Content-Type"); got != want {
			t.Errorf("HEAD %s: Content-Type %q, GET's %q", path, got, want)
		}
	}
	if checked < 10 {
		t.Fatalf("only %d GET routes in the table: is it the gateway's?", checked)
	}
	// The two an uptime checker asks for first, and a hashed asset.
	for _, path := range []string{"/healthz", "/", assetPath(t, f)} {
		get, getBody := f.do(http.MethodGet, path, "", nil)
		head, headBody := f.do(http.MethodHead, path, "", nil)
		if head.StatusCode != http.StatusOK || headBody != "" || get.StatusCode != http.StatusOK {
			t.Errorf("HEAD %s: %d with %d bytes; GET: %d", path, head.StatusCode, len(headBody), get.StatusCode)
		}
		for _, h := range []string{"Content-Type", "Content-Length", "Cache-Control"} {
			if head.Header.Get(h) != get.Header.Get(h) {
				t.Errorf("HEAD %s: %s %q, GET's %q", path, h, head.Header.Get(h), get.Header.Get(h))
			}
		}
		if getBody == "" {
			t.Errorf("GET %s: empty body", path)
		}
	}
}

// assetPath is the path of the dashboard's first hashed asset, from its
// index.html.
func assetPath(t *testing.T, f *fixture) string {
	t.Helper()
	_, page := f.do(http.MethodGet, "/", "", nil)
	m := regexp.MustCompile(`/assets/[^"]+`).FindString(page)
	if m == "" {
		t.Fatalf("no asset in the dashboard's page: %.200s", page)
	}
	return m
}

// A path under /api or /ws that no route serves is a JSON 404 naming it,
// with or without credentials, for every method — never the dashboard's
// page, which a connector with a wrong URL would otherwise take for an
// answer.
func TestUnknownAPIAndWebSocketPathsAreJSON404(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 0, func(o *Options) { o.Dashboard = web.Handler() })
	for _, path := range []string{"/ws", "/ws/", "/ws/connectt", "/ws/connect/extra", "/api", "/api/", "/api/ws/connect", "/api/gateway/nope", "/api/clients"} {
		for _, method := range []string{http.MethodGet, http.MethodPost, http.MethodHead} {
			for _, token := range []string{"", f.dash} {
				resp, body := f.do(method, path, token, nil)
				if resp.StatusCode != http.StatusNotFound || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
					t.Errorf("%s %s (credentials %t): %d %s %.60q", method, path, token != "", resp.StatusCode, resp.Header.Get("Content-Type"), body)
					continue
				}
				if method == http.MethodHead {
					continue
				}
				var answer struct{ Error string }
				if err := json.Unmarshal([]byte(body), &answer); err != nil || answer.Error != "no such route: "+path {
					t.Errorf("%s %s: body %q", method, path, body)
				}
			}
		}
	}
	// The app still opens at a deep link outside those prefixes.
	if resp, body := f.do(http.MethodGet, "/threads/abc", "", nil); resp.StatusCode != http.StatusOK || !strings.Contains(body, "<html") {
		t.Errorf("GET /threads/abc: %d %.60q", resp.StatusCode, body)
	}
}

// headers sends a request and returns its answer once the headers are in,
// the body closed unread.
func (f *fixture) headers(method, path string) *http.Response {
	f.t.Helper()
	req, _ := http.NewRequest(method, f.srv.URL+path, nil)
	req.Header.Set("Authorization", "Bearer "+f.dash)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}
