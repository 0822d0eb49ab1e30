package api

import (
	"net/http"
	"strings"
	"testing"
)

// Every GET route answers HEAD with GET's status and Content-Type: uptime
// checkers probe with HEAD. The routes come from the router's own table,
// so a route added later is covered without touching this test; the
// parameters are real (a registered workflow, a finished thread, a
// waiting thread, a CAS entry), so the answers are the 200s a checker
// would see, and the streams (live, events) answer their headers and end.
func TestEveryGetRouteAnswersHead(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	bundle := f.register("linear", "linear.esm.js")
	f.register("approval", "approval.esm.js")
	f.startHost()
	thread := f.run("linear", "head")
	f.waitStatus(thread, "completed")
	// A thread's question exists only while it waits for a person.
	waiting := f.run("approval", "head")
	f.waitStatus(waiting, "waiting")
	var put struct{ Hash string }
	f.want(http.MethodPost, "/api/cas", `{"content":"probe"}`, http.StatusCreated, &put)
	params := strings.NewReplacer(":name", "linear", ":id", thread, ":hash", bundle)

	heads := map[string]bool{}
	for _, r := range f.e.Routes() {
		if r.Method == http.MethodHead {
			heads[r.Path] = true
		}
	}
	checked := 0
	for _, r := range f.e.Routes() {
		if r.Method != http.MethodGet {
			continue
		}
		checked++
		if !heads[r.Path] {
			t.Errorf("GET %s has no HEAD route", r.Path)
		}
		path := params.Replace(r.Path)
		if strings.HasPrefix(r.Path, "/api/cas/") {
			path = "/api/cas/" + put.Hash
		}
		if strings.HasSuffix(r.Path, "/question") {
			path = strings.NewReplacer(":id", waiting).Replace(r.Path)
		}
		get := f.fetch(http.MethodGet, path)
		head := f.fetch(http.MethodHead, path)
		if head.StatusCode == http.StatusMethodNotAllowed || head.StatusCode != get.StatusCode {
			t.Errorf("HEAD %s (route %s): %d; GET: %d", path, r.Path, head.StatusCode, get.StatusCode)
		}
		if got, want := head.Header.Get("Content-Type"), get.Header.Get("Content-Type"); got != want {
			t.Errorf("HEAD %s: Content-Type %q, GET's %q", path, got, want)
		}
		if get.StatusCode != http.StatusOK {
			t.Errorf("GET %s: %d; a new route parameter wants a real value above", path, get.StatusCode)
		}
		// An error answers HEAD as it answers GET, too.
		if strings.Contains(r.Path, ":id") {
			missing := strings.NewReplacer(":id", "01M96E7T36GQ895DE91QS9EYFD").Replace(r.Path)
			get, head := f.fetch(http.MethodGet, missing), f.fetch(http.MethodHead, missing)
			if head.StatusCode != get.StatusCode || head.Header.Get("Content-Type") != get.Header.Get("Content-Type") {
				t.Errorf("HEAD %s: %d %q; GET: %d %q", missing, head.StatusCode, head.Header.Get("Content-Type"),
					get.StatusCode, get.Header.Get("Content-Type"))
			}
		}
	}
	if checked < 10 {
		t.Fatalf("only %d GET routes in the table: is it the API's?", checked)
	}
}

// fetch sends a request to the fixture's server and returns once the
// headers are in: a stream's body is left unread and closed.
func (f *fixture) fetch(method, path string) *http.Response {
	f.t.Helper()
	req, err := http.NewRequest(method, f.srv.URL+path, nil)
	if err != nil {
		f.t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}
