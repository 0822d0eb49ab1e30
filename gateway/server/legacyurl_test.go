package server

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/uncaged/workflow/gateway/legacy"
	"github.com/uncaged/workflow/gateway/presence"
)

// urlClientAPI is an original client serving its API on a URL of its own:
// it answers with what it was asked and the token it got, and redirects
// /api/away to away.
func urlClientAPI(t *testing.T, away string) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/away" {
			http.Redirect(w, r, away, http.StatusFound)
			return
		}
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"method":%q,"path":%q,"query":%q,"body":%q,"token":%q,"auth":%q}`,
			r.Method, r.URL.Path, r.URL.RawQuery, body, r.Header.Get(legacy.ClientTokenHeader), r.Header.Get("Authorization"))
	}))
	t.Cleanup(srv.Close)
	return srv
}

func (f *fixture) registerURL(name, url string) {
	f.t.Helper()
	reg := `{"name":"` + name + `","url":"` + url + `","secret":"shared-secret","agentToken":"ct-` + name + `"}`
	if resp, body := f.do("POST", "/api/gateway/register", "", strings.NewReader(reg)); resp.StatusCode != 201 {
		f.t.Fatalf("register %s: %d %s", name, resp.StatusCode, body)
	}
}

func allowURLs(t *testing.T, entries ...string) func(*Options) {
	a, err := legacy.ParseAllowList(entries)
	if err != nil {
		t.Fatal(err)
	}
	return func(o *Options) { o.LegacyURLAllow = a }
}

// Off by default: the registration is recorded as always, and a request
// for the client says which flag would let the gateway fetch its URL.
func TestURLClientIsRefusedNamingTheFlagByDefault(t *testing.T) {
	t.Parallel()
	api := urlClientAPI(t, "")
	f := newFixture(t, time.Hour)
	f.registerURL("old", api.URL)
	resp, body := f.do("GET", "/api/clients/old/threads", f.dash, nil)
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(body, legacy.AllowFlag) {
		t.Errorf("%d %s", resp.StatusCode, body)
	}
	_, body = f.do("GET", "/api/gateway/endpoints", f.dash, nil)
	if strings.Contains(body, `"old"`) {
		t.Errorf("listed while off: %s", body)
	}
	// A URL outside the list is refused the same way.
	g := newFixture(t, time.Hour, allowURLs(t, "10.9.0.0/16"))
	g.registerURL("old", api.URL)
	resp, body = g.do("GET", "/api/clients/old/threads", g.dash, nil)
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(body, legacy.AllowFlag) {
		t.Errorf("not listed: %d %s", resp.StatusCode, body)
	}
}

// Allowed: registered, listed, proxied with its token, redirects out of
// the set refused, and gone once unregistered.
func TestURLClientThroughTheGateway(t *testing.T) {
	t.Parallel()
	api := urlClientAPI(t, "http://169.254.169.254/latest/meta-data/")
	f := newFixture(t, time.Hour, allowURLs(t, "127.0.0.1"))
	f.registerURL("old", api.URL+"/")
	var eps []presence.Endpoint
	_, body := f.do("GET", "/api/gateway/endpoints", f.dash, nil)
	if err := json.Unmarshal([]byte(body), &eps); err != nil || len(eps) != 1 ||
		eps[0].Name != "old" || eps[0].URL != api.URL || eps[0].Status != presence.Online || eps[0].Protocol != ProtocolLegacyURL {
		t.Fatalf("endpoints: %s", body)
	}
	resp, body := f.do("POST", "/api/clients/old/threads?key="+f.dash+"&x=1", "", strings.NewReader(`{"workflow":"hello"}`))
	want := `{"method":"POST","path":"/api/threads","query":"x=1","body":"{\"workflow\":\"hello\"}","token":"ct-old","auth":""}`
	if resp.StatusCode != 200 || body != want {
		t.Errorf("proxied: %d %s\nwant %s", resp.StatusCode, body, want)
	}
	resp, body = f.do("GET", "/api/clients/old/away", f.dash, nil)
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(body, "redirect to http://169.254.169.254/latest/meta-data/ refused") || !strings.Contains(body, legacy.AllowFlag) {
		t.Errorf("redirect out of the set: %d %s", resp.StatusCode, body)
	}
	tok := "shared-secret"
	if resp, body := f.do("DELETE", "/api/gateway/register/old", tok, nil); resp.StatusCode != 200 {
		t.Fatalf("unregister: %d %s", resp.StatusCode, body)
	}
	if resp, body := f.do("GET", "/api/clients/old/threads", f.dash, nil); resp.StatusCode != 404 {
		t.Errorf("after unregister: %d %s", resp.StatusCode, body)
	}
}

// A client whose socket is connected is served through it, as the
// original preferred; its URL is not fetched.
func TestURLClientSocketComesFirst(t *testing.T) {
	t.Parallel()
	api := urlClientAPI(t, "")
	f := newFixture(t, time.Hour, allowURLs(t, "127.0.0.1"))
	f.registerURL("old", api.URL)
	f.legacyConnector("old", echoAPI("old"))
	f.waitStatus("old", presence.Online)
	if resp, body := f.do("GET", "/api/clients/old/threads", f.dash, nil); resp.StatusCode != 200 || !strings.Contains(body, `"machine":"old"`) {
		t.Errorf("%d %s", resp.StatusCode, body)
	}
}

// Within RestartGrace a name registered before the start may be a socket
// coming back: 503 with Retry-After, as for any name. One registered
// since the start is a client talking to this gateway now: the refusal.
func TestURLClientRefusalAndTheRestartGrace(t *testing.T) {
	t.Parallel()
	f := newFixture(t, time.Hour)
	f.gw.started = time.Now()
	f.gw.registrations.Load(legacy.Registration{Name: "before", URL: "http://127.0.0.1:9"}, f.gw.started.Add(-time.Hour), f.gw.started.Add(-time.Minute))
	resp, body := f.do("GET", "/api/clients/before/threads", f.dash, nil)
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Errorf("registered before the start: %d %s", resp.StatusCode, body)
	}
	f.registerURL("since", "http://127.0.0.1:9")
	resp, body = f.do("GET", "/api/clients/since/threads", f.dash, nil)
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(body, legacy.AllowFlag) {
		t.Errorf("registered since: %d %s", resp.StatusCode, body)
	}
}
