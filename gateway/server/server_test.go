package server

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/uncaged/workflow/gateway/auth"
	"github.com/uncaged/workflow/gateway/presence"
	"github.com/uncaged/workflow/shared/testkit"
	"github.com/uncaged/workflow/shared/tunnel"
)

type fixture struct {
	t    *testing.T
	auth *auth.Authority
	gw   *Gateway
	srv  *httptest.Server
	dash string
}

func newFixture(t *testing.T, heartbeat time.Duration, mutate ...func(*Options)) *fixture {
	a, err := auth.New([]byte(strings.Repeat("k", 32)), "shared-secret")
	if err != nil {
		t.Fatal(err)
	}
	// The request timeout bounds every proxied request of the tests: a
	// generous one, so that a loaded machine does not turn a slow answer
	// into a 504 (the timeout's own test sets a short one).
	opts := Options{Auth: a, Heartbeat: heartbeat, RequestTimeout: testkit.WaitBound}
	for _, m := range mutate {
		m(&opts)
	}
	g := New(opts)
	// Past RestartGrace: unknown connectors are 404 (grace_test.go covers
	// the grace).
	g.started = g.started.Add(-RestartGrace)
	srv := httptest.NewServer(g.Handler())
	t.Cleanup(func() { g.Shutdown(); srv.Close() })
	dash, _ := a.Issue(auth.RoleDashboard, "", time.Hour)
	return &fixture{t: t, auth: a, gw: g, srv: srv, dash: dash}
}

// connector connects name with h; the returned func disconnects it.
func (f *fixture) connector(name string, h http.Handler) context.CancelFunc {
	f.t.Helper()
	tok, _ := f.auth.Issue(auth.RoleConnector, name, time.Hour)
	ctx, cancel := context.WithCancel(context.Background())
	ws, err := tunnel.Dial(ctx, f.srv.URL, name, tok, nil)
	if err != nil {
		f.t.Fatal(err)
	}
	done := make(chan struct{})
	// Serve ends with the test (or the gateway's close): nothing to report.
	go func() { defer close(done); _ = tunnel.Serve(ctx, ws, h, tunnel.ServeOptions{}) }()
	f.t.Cleanup(func() { cancel(); <-done })
	f.waitStatus(name, presence.Online)
	return cancel
}

func (f *fixture) waitStatus(name, status string) {
	f.t.Helper()
	testkit.WaitUntil(f.t, name+" to be "+status, func() bool {
		for _, e := range f.gw.Presence().List() {
			if e.Name == name && e.Status == status {
				return true
			}
		}
		return false
	})
}

func (f *fixture) do(method, path, token string, body io.Reader) (*http.Response, string) {
	f.t.Helper()
	req, _ := http.NewRequest(method, f.srv.URL+path, body)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func echoAPI(name string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"machine":%q,"path":%q,"query":%q,"auth":%q}`, name, r.URL.Path, r.URL.RawQuery, r.Header.Get("Authorization"))
	})
}

func TestEndpointsAndProxyToTheRightMachine(t *testing.T) {
	t.Parallel()
	f := newFixture(t, time.Hour)
	f.connector("laptop", echoAPI("laptop"))
	f.connector("ci-box", echoAPI("ci-box"))
	resp, body := f.do("GET", "/api/gateway/endpoints", f.dash, nil)
	var eps []presence.Endpoint
	if resp.StatusCode != 200 || json.Unmarshal([]byte(body), &eps) != nil || len(eps) != 2 || eps[0].Name != "ci-box" || eps[1].Status != "online" || eps[1].LastHeartbeat == 0 {
		t.Fatalf("endpoints: %d %s", resp.StatusCode, body)
	}
	for _, prefix := range []string{"/api/clients/", "/api/agents/"} {
		resp, body = f.do("GET", prefix+"laptop/workflows?x=1&key=secret-in-query", f.dash, nil)
		if resp.StatusCode != 200 || body != `{"machine":"laptop","path":"/api/workflows","query":"x=1","auth":""}` {
			t.Fatalf("proxied %s: %d %s", prefix, resp.StatusCode, body)
		}
	}
	_, body = f.do("GET", "/api/clients/ci-box/threads", f.dash, nil)
	if !strings.Contains(body, `"machine":"ci-box"`) {
		t.Fatalf("wrong machine: %s", body)
	}
	resp, body = f.do("GET", "/api/clients/nobody/threads", f.dash, nil)
	if resp.StatusCode != 404 || !strings.Contains(body, `"error":"connector not found: nobody"`) {
		t.Fatalf("unknown connector: %d %s", resp.StatusCode, body)
	}
	// The shared secret works for the dashboard too.
	if resp, _ := f.do("GET", "/api/gateway/endpoints", "shared-secret", nil); resp.StatusCode != 200 {
		t.Fatalf("shared secret: %d", resp.StatusCode)
	}
}

func TestOfflineConnectorIs503AndHeartbeatsNoticeDeath(t *testing.T) {
	t.Parallel()
	// A ping's timeout is the interval, and two missed pings drop the
	// connector: at 100 ms a loaded machine dropped it before one came back.
	f := newFixture(t, time.Second)
	stop := f.connector("laptop", echoAPI("laptop"))
	before := f.gw.Presence().List()[0].LastHeartbeat
	testkit.WaitUntil(t, "the heartbeat to advance", func() bool { return f.gw.Presence().List()[0].LastHeartbeat > before })
	stop()
	f.waitStatus("laptop", presence.Offline)
	resp, body := f.do("GET", "/api/clients/laptop/x", f.dash, nil)
	if resp.StatusCode != 503 || !strings.Contains(body, "connector offline: laptop") {
		t.Fatalf("offline: %d %s", resp.StatusCode, body)
	}
}

func TestAuthentication(t *testing.T) {
	t.Parallel()
	f := newFixture(t, time.Hour)
	f.connector("laptop", echoAPI("laptop"))
	connTok, _ := f.auth.Issue(auth.RoleConnector, "laptop", time.Hour)
	other, _ := auth.New([]byte(strings.Repeat("z", 32)), "")
	foreign, _ := other.Issue(auth.RoleDashboard, "", time.Hour)
	cases := []struct {
		token string
		want  int
	}{{"", 401}, {"garbage", 401}, {foreign, 401}, {connTok, 403}}
	for _, c := range cases {
		for _, path := range []string{"/api/gateway/endpoints", "/api/clients/laptop/workflows"} {
			resp, body := f.do("GET", path, c.token, nil)
			if resp.StatusCode != c.want || !strings.HasPrefix(body, `{"error":`) {
				t.Errorf("%s with %.10q: %d %s", path, c.token, resp.StatusCode, body)
			}
		}
	}
	// A connector token for another name cannot take "laptop".
	ciTok, _ := f.auth.Issue(auth.RoleConnector, "ci-box", time.Hour)
	_, err := tunnel.Dial(context.Background(), f.srv.URL, "laptop", ciTok, nil)
	var rej *tunnel.RejectedError
	if !errors.As(err, &rej) || rej.Status != 403 {
		t.Fatalf("name hijack: %v", err)
	}
	if _, err := tunnel.Dial(context.Background(), f.srv.URL, "laptop", "", nil); !errors.As(err, &rej) || rej.Status != 401 {
		t.Fatalf("no token: %v", err)
	}
	if _, err := tunnel.Dial(context.Background(), f.srv.URL, "Bad_Name", "shared-secret", nil); !errors.As(err, &rej) || rej.Status != 400 {
		t.Fatalf("bad name: %v", err)
	}
	if _, body := f.do("GET", "/api/clients/laptop/workflows", f.dash, nil); !strings.Contains(body, `"machine":"laptop"`) {
		t.Fatalf("the real laptop lost its name: %s", body)
	}
	// Login sets an HttpOnly cookie that then authenticates (EventSource).
	resp, _ := f.do("POST", "/api/gateway/login", "", strings.NewReader(`{"token":"`+f.dash+`"}`))
	var cookie *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == auth.CookieName {
			cookie = c
		}
	}
	if resp.StatusCode != 200 || cookie == nil || !cookie.HttpOnly {
		t.Fatalf("login: %d %v", resp.StatusCode, resp.Cookies())
	}
	req, _ := http.NewRequest("GET", f.srv.URL+"/api/gateway/endpoints", nil)
	req.AddCookie(cookie)
	if r, err := http.DefaultClient.Do(req); err != nil || r.StatusCode != 200 {
		t.Fatalf("cookie auth: %v %v", r, err)
	}
	if resp, _ := f.do("POST", "/api/gateway/login", "", strings.NewReader(`{"token":"nope"}`)); resp.StatusCode != 401 {
		t.Fatalf("bad login: %d", resp.StatusCode)
	}
}

func TestSameNameReconnectReplacesTheOlder(t *testing.T) {
	t.Parallel()
	f := newFixture(t, time.Hour)
	f.connector("laptop", echoAPI("old"))
	f.connector("laptop", echoAPI("new"))
	testkit.WaitUntil(t, "the newer connection to take over", func() bool {
		_, body := f.do("GET", "/api/clients/laptop/x", f.dash, nil)
		return strings.Contains(body, `"machine":"new"`)
	})
	if n := f.gw.Presence().Online(); n != 1 {
		t.Fatalf("%d online", n)
	}
}

func TestStreamsAreLiveAndCancellationPropagates(t *testing.T) {
	t.Parallel()
	f := newFixture(t, time.Hour)
	handlerDone := make(chan struct{})
	f.connector("laptop", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer close(handlerDone)
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "id: 1\nevent: record\ndata: {}\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", f.srv.URL+"/api/clients/laptop/threads/X/live?key="+f.dash, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(resp.Body).ReadString('\n')
	if line != "id: 1\n" {
		t.Fatalf("first line %q", line)
	}
	cancel()
	select {
	case <-handlerDone:
	case <-time.After(testkit.WaitBound):
		t.Fatal("closing the dashboard request did not cancel the connector's handler")
	}
}

func TestSlowNonStreamingRequestTimesOut(t *testing.T) {
	t.Parallel()
	f := newFixture(t, time.Hour, func(o *Options) { o.RequestTimeout = 100 * time.Millisecond })
	f.connector("laptop", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
	// A token that can end times the request in its binding (whileValid);
	// one that cannot is timed by forward itself.
	lasting, _ := f.auth.Issue(auth.RoleDashboard, "", 0)
	for name, credential := range map[string]string{"a token that expires": f.dash, "a token that cannot end": lasting} {
		resp, body := f.do("GET", "/api/clients/laptop/slow", credential, nil)
		if resp.StatusCode != 504 || !strings.Contains(body, "did not answer in time") {
			t.Fatalf("%s: timeout: %d %s", name, resp.StatusCode, body)
		}
	}
}
