package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/uncaged/workflow/gateway/auth"
	"github.com/uncaged/workflow/gateway/internal/fakeclock"
	"github.com/uncaged/workflow/gateway/internal/natstest"
	"github.com/uncaged/workflow/gateway/legacy"
	"github.com/uncaged/workflow/gateway/store"
	"github.com/uncaged/workflow/shared/testkit"
	"github.com/uncaged/workflow/shared/tunnel"
)

// endDeadline is how long after its credential ends a test waits for
// what it opened to end. The promise is within 5 s, and it is kept by
// what ends them — the expiry's timer, the revocation's notification —
// not by a poll; a test waits for the end itself, never for a time, so
// the bound is the tests' common one: a machine loaded by other tests
// may take longer than the promise without anything being wrong.
const endDeadline = testkit.WaitBound

// credFixture is a gateway keeping its tokens in SQLite, telling time by
// a clock the test drives, with a connector "alpha" whose API streams,
// stalls and trickles (stallingAPI).
type credFixture struct {
	*fixture
	st      store.Store
	clock   *fakeclock.Clock
	reached chan reachedRequest
}

// reachedRequest is a request the connector's handler is serving.
type reachedRequest struct {
	path string
	ctx  context.Context
}

func newCredFixture(t *testing.T, mutate ...func(*Options)) *credFixture {
	t.Helper()
	st := openSQLite(t, t.TempDir())
	t.Cleanup(func() { _ = st.Close() })
	clock := fakeclock.New(time.Now().Truncate(time.Second))
	f := newStoreFixture(t, st, testRegistrationKey, append([]func(*Options){func(o *Options) {
		o.Auth.SetClock(clock)
		// Longer than any test: a request ends with its credential, not
		// with the proxy's timeout.
		o.RequestTimeout = time.Minute
	}}, mutate...)...)
	// The shared secret cannot end: the fixture's own dashboard requests
	// outlive whatever the test makes expire.
	f.dash = "shared-secret"
	cf := &credFixture{fixture: f, st: st, clock: clock, reached: make(chan reachedRequest, 16)}
	f.connector("alpha", stallingAPI(cf.reached))
	return cf
}

// stallingAPI is a connector's API whose /api/live sends one event and
// stays open, /api/download sends part of a body and stays open, and
// /api/stall never answers; each until the request is cancelled. reached
// hears of each once it is under way.
func stallingAPI(reached chan<- reachedRequest) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api/live":
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, "event: record\ndata: {}\n\n")
			w.(http.Flusher).Flush()
		case "/api/download":
			w.Header().Set("Content-Type", "application/octet-stream")
			fmt.Fprint(w, "part one;")
			w.(http.Flusher).Flush()
		case "/api/stall":
		default:
			fmt.Fprint(w, "ok")
			return
		}
		reached <- reachedRequest{r.URL.Path, r.Context()}
		<-r.Context().Done()
	})
}

// presenter puts a credential on a request one way a client can.
type presenter struct {
	name string
	put  func(f *credFixture, req *http.Request, token string)
}

var presenters = []presenter{
	{"bearer", func(_ *credFixture, req *http.Request, token string) {
		req.Header.Set("Authorization", "Bearer "+token)
	}},
	{"lower-case bearer", func(_ *credFixture, req *http.Request, token string) {
		req.Header.Set("Authorization", "bearer "+token)
	}},
	{"cookie", func(f *credFixture, req *http.Request, token string) { req.AddCookie(f.login(token)) }},
	{"?key=", func(_ *credFixture, req *http.Request, token string) { req.URL.RawQuery = "key=" + token }},
}

// login is the dashboard's login with token: the session cookie.
func (f *credFixture) login(token string) *http.Cookie {
	f.t.Helper()
	req, _ := http.NewRequest("POST", f.srv.URL+"/api/gateway/login", strings.NewReader(`{"token":"`+token+`"}`))
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	resp, body := send(f.t, http.DefaultClient, req)
	for _, c := range resp.Cookies() {
		if c.Name == auth.CookieName {
			return c
		}
	}
	f.t.Fatalf("login: %d %s", resp.StatusCode, body)
	return nil
}

// opened is a dashboard request under way: began is closed once the
// first bytes of its body arrived, over once it is over; then body and err
// are what arrived and how reading it ended.
type opened struct {
	began  chan struct{}
	over   chan struct{}
	body   string
	err    error
	status int
}

// open sends a GET for path through the gateway with req prepared by
// put, reads its answer to the end in the background, and waits until the
// connector serves it.
func (f *credFixture) open(path string, put func(*http.Request)) (*opened, reachedRequest) {
	f.t.Helper()
	o, r, err := f.tryOpen(path, put)
	if err != nil {
		f.t.Fatal(err)
	}
	return o, r
}

// tryOpen is open, saying why when the request ended before the
// connector served it.
func (f *credFixture) tryOpen(path string, put func(*http.Request)) (*opened, reachedRequest, error) {
	req, _ := http.NewRequest("GET", f.srv.URL+"/api/clients/alpha"+path, nil)
	put(req)
	o := &opened{began: make(chan struct{}), over: make(chan struct{})}
	go func() {
		defer close(o.over)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			close(o.began)
			o.err = err
			return
		}
		defer resp.Body.Close()
		o.status = resp.StatusCode
		var b strings.Builder
		first := make([]byte, 512)
		n, err := resp.Body.Read(first)
		b.Write(first[:n])
		close(o.began)
		if err == nil {
			_, err = io.Copy(&b, resp.Body)
		}
		if err != io.EOF {
			o.err = err
		}
		o.body = b.String()
	}()
	select {
	case r := <-f.reached:
		return o, r, nil
	case <-o.over:
		return nil, reachedRequest{}, fmt.Errorf("GET %s ended before the connector served it: %d %q %v", path, o.status, o.body, o.err)
	case <-time.After(time.Minute):
		return nil, reachedRequest{}, fmt.Errorf("GET %s never reached the connector", path)
	}
}

// waitOver waits, up to endDeadline, for the request to be over.
func (o *opened) waitOver(t *testing.T, what string) {
	t.Helper()
	select {
	case <-o.over:
	case <-time.After(endDeadline):
		t.Fatalf("%s: still open %v after its credential ended", what, endDeadline)
	}
}

// waitCancelled waits, up to endDeadline, for the connector's side of a
// request to be cancelled: the hop does not outlive the credential.
func waitCancelled(t *testing.T, what string, r reachedRequest) {
	t.Helper()
	select {
	case <-r.ctx.Done():
	case <-time.After(endDeadline):
		t.Fatalf("%s: the connector still serves it %v after its credential ended", what, endDeadline)
	}
}

// An ending of a credential: revoked through the store, or expired.
type ending struct {
	name   string
	reason string
	do     func(f *credFixture, rec store.Token)
}

var endings = []ending{
	{"revoked", auth.ReasonRevoked, func(f *credFixture, rec store.Token) {
		if _, err := f.st.RevokeToken(context.Background(), rec.ID); err != nil {
			f.t.Fatal(err)
		}
	}},
	{"expired", auth.ReasonExpired, func(f *credFixture, rec store.Token) { f.clock.Advance(rec.ExpiresAt.Sub(f.clock.Now())) }},
}

// A dashboard request in flight ends within moments of its token being
// revoked or expiring, however the token was presented: an event stream
// with an "error" event naming the reason and a clean end, a request not
// yet answered with 401 and the reason, a body under way cut short (not
// passed off as whole); and the connector's side of each is cancelled.
func TestDashboardRequestsEndWithTheirCredential(t *testing.T) {
	t.Parallel()
	const ttl = 10 * time.Minute
	for _, pr := range presenters {
		for _, en := range endings {
			for _, path := range []string{"/live", "/stall", "/download"} {
				what := pr.name + "/" + en.name + path
				t.Run(what, func(t *testing.T) {
					t.Parallel()
					f := newCredFixture(t)
					tok, rec := record(t, f.auth, f.st, auth.RoleDashboard, "", ttl)
					o, served := f.open(path, func(req *http.Request) { pr.put(f, req, tok) })
					if path != "/stall" {
						<-o.began // the answer is under way
					}
					en.do(f, rec)
					o.waitOver(t, what)
					waitCancelled(t, what, served)
					switch path {
					case "/live":
						wantEvent := "event: error\ndata: {\"error\":\"token " + map[string]string{auth.ReasonRevoked: "revoked", auth.ReasonExpired: "expired at " + rec.ExpiresAt.UTC().Format(time.RFC3339)}[en.reason] + "\",\"reason\":\"" + en.reason + "\"}\n\n"
						if o.status != 200 || o.err != nil || o.body != "event: record\ndata: {}\n\n"+wantEvent {
							t.Fatalf("stream: %d %q, read error %v; want the first event, then %q and a clean end", o.status, o.body, o.err, wantEvent)
						}
					case "/stall":
						if msg, reason := refusalOf(t, o.body); o.status != 401 || reason != en.reason || !strings.HasPrefix(msg, "token "+en.name) {
							t.Fatalf("pending request: %d %s, want 401 for %q", o.status, o.body, en.reason)
						}
					case "/download":
						if o.status != 200 || o.body != "part one;" || o.err == nil {
							t.Fatalf("download: %d %q, read error %v; want it cut short", o.status, o.body, o.err)
						}
					}
					// The next request with it is refused for the same reason.
					if resp, body := f.do("GET", "/api/clients/alpha/ok", tok, nil); resp.StatusCode != 401 || !strings.Contains(body, en.reason) {
						t.Fatalf("after it ended: %d %s", resp.StatusCode, body)
					}
				})
			}
		}
	}
}

// Only what the ended credential opened ends: streams of another token,
// of a token without an id, and of the shared secret stay open through
// the revocation and the expiry of the first.
func TestOnlyWhatTheEndedCredentialOpenedEnds(t *testing.T) {
	t.Parallel()
	f := newCredFixture(t)
	short, shortRec := record(t, f.auth, f.st, auth.RoleDashboard, "", time.Minute)
	revoked, revokedRec := record(t, f.auth, f.st, auth.RoleDashboard, "", time.Hour)
	long, _ := record(t, f.auth, f.st, auth.RoleDashboard, "", time.Hour)
	unrecorded, _ := f.auth.Issue(auth.RoleDashboard, "", time.Hour)
	bearer := func(tok string) func(*http.Request) {
		return func(req *http.Request) { req.Header.Set("Authorization", "Bearer "+tok) }
	}
	shortStream, shortServed := f.open("/live", bearer(short))
	revokedStream, revokedServed := f.open("/live", bearer(revoked))
	var kept []reachedRequest
	for _, tok := range []string{long, unrecorded, "shared-secret"} {
		_, served := f.open("/live", bearer(tok))
		kept = append(kept, served)
	}
	endings[0].do(f, revokedRec)
	revokedStream.waitOver(t, "the revoked token's stream")
	waitCancelled(t, "the revoked token's stream", revokedServed)
	endings[1].do(f, shortRec)
	shortStream.waitOver(t, "the expired token's stream")
	waitCancelled(t, "the expired token's stream", shortServed)
	for i, r := range kept {
		if r.ctx.Err() != nil {
			t.Fatalf("stream %d ended with another token", i)
		}
	}
}

// A connector's tunnel, h2 or an original client's socket (its token in
// ?secret=), is closed when its token is revoked or expires, with the
// reason; it is shown offline, and connecting again is refused saying
// why. A token without an id still expires.
func TestTunnelsEndWithTheirCredential(t *testing.T) {
	t.Parallel()
	for _, protocol := range []string{"h2", "legacy"} {
		for _, en := range endings {
			for _, recorded := range []bool{true, false} {
				if !recorded && en.name == "revoked" {
					continue // a token without an id cannot be revoked
				}
				what := fmt.Sprintf("%s/%s/recorded %v", protocol, en.name, recorded)
				t.Run(what, func(t *testing.T) {
					t.Parallel()
					f := newCredFixture(t)
					var tok string
					var rec store.Token
					if recorded {
						tok, rec = record(t, f.auth, f.st, auth.RoleConnector, "bravo", time.Hour)
					} else {
						var err error
						if tok, err = f.auth.Issue(auth.RoleConnector, "bravo", time.Hour); err != nil {
							t.Fatal(err)
						}
						exp := f.clock.Now().Add(time.Hour)
						rec.ExpiresAt = &exp
					}
					ended := make(chan error, 1)
					if protocol == "h2" {
						ws, err := tunnelDial(f.srv.URL, "bravo", tok)
						if err != nil {
							t.Fatal(err)
						}
						go func() { ended <- tunnelServe(ws, echoAPI("bravo")) }()
					} else {
						ws, _, err := f.dialLegacy("bravo", tok)
						if err != nil {
							t.Fatal(err)
						}
						go func() { ended <- legacyServe(ws, echoAPI("bravo")) }()
					}
					f.waitStatus("bravo", "online")
					en.do(f, rec)
					select {
					case err := <-ended:
						if err == nil || !strings.Contains(err.Error(), "token "+en.name) {
							t.Fatalf("the connector's end: %v, want the reason %q", err, "token "+en.name)
						}
					case <-time.After(endDeadline):
						t.Fatalf("the tunnel is still open %v after its token %s", endDeadline, en.name)
					}
					f.waitStatus("bravo", "offline")
					var status int
					var body string
					if protocol == "h2" {
						status, body = rejectedDial(f.srv.URL, "bravo", tok)
					} else {
						_, resp, err := f.dialLegacy("bravo", tok)
						if err == nil || resp == nil {
							t.Fatalf("reconnecting: %v", err)
						}
						b, _ := io.ReadAll(resp.Body)
						status, body = resp.StatusCode, string(b)
					}
					if _, reason := refusalOf(t, body); status != 401 || reason != en.reason {
						t.Fatalf("reconnecting: %d %s", status, body)
					}
				})
			}
		}
	}
}

// An original client's registration made with a token ends with it, as
// if it had unregistered: requests for the name are then 404 and its
// client token is sent nowhere; a registration renewed with another
// token lives on when the first ends.
func TestRegistrationsEndWithTheirCredential(t *testing.T) {
	t.Parallel()
	for _, en := range endings {
		t.Run(en.name, func(t *testing.T) {
			t.Parallel()
			f := newCredFixture(t)
			tok, rec := record(t, f.auth, f.st, auth.RoleConnector, "old", time.Hour)
			f.legacyConnector("old", originalAPI("tok-old"))
			register := func(secret string) {
				t.Helper()
				reg := `{"name":"old","url":"http://10.0.0.5:3000/","secret":"` + secret + `","clientToken":"tok-old"}`
				if resp, body := f.do("POST", "/api/gateway/register", "", strings.NewReader(reg)); resp.StatusCode != 201 && resp.StatusCode != 200 {
					t.Fatalf("register: %d %s", resp.StatusCode, body)
				}
			}
			register(tok)
			if resp, body := f.do("GET", "/api/clients/old/x", f.dash, nil); resp.StatusCode != 200 {
				t.Fatalf("before: %d %s", resp.StatusCode, body)
			}
			en.do(f, rec)
			testkit.WaitUntil(t, "the registration to end", func() bool { return f.gw.registrations.Removed("old") })
			if resp, body := f.do("GET", "/api/clients/old/x", f.dash, nil); resp.StatusCode != 404 {
				t.Fatalf("after: %d %s", resp.StatusCode, body)
			}
			if _, err := f.st.GetRegistration(context.Background(), "old"); !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("the kept registration: %v", err)
			}
			// Renewed with another token, it outlives the first.
			second, _ := record(t, f.auth, f.st, auth.RoleConnector, "old", 4*time.Hour)
			third, thirdRec := record(t, f.auth, f.st, auth.RoleConnector, "old", 3*time.Hour)
			register(third)
			register(second)
			en.do(f, thirdRec)
			if f.gw.registrations.Removed("old") {
				t.Fatal("a registration renewed with another token ended with the one it replaced")
			}
		})
	}
}

// tunnelDial connects name's h2 tunnel with token.
func tunnelDial(url, name, token string) (*websocket.Conn, error) {
	return tunnel.Dial(context.Background(), url, name, token, nil)
}

// tunnelServe serves h over an h2 tunnel until the gateway closes it.
func tunnelServe(ws *websocket.Conn, h http.Handler) error {
	return tunnel.Serve(context.Background(), ws, h, tunnel.ServeOptions{})
}

// legacyServe serves h as an original client until the gateway closes
// the socket.
func legacyServe(ws *websocket.Conn, h http.Handler) error {
	defer func() { _ = ws.CloseNow() }()
	return legacy.Serve(context.Background(), ws, h)
}

// rejectedDial is an h2 dial the gateway refuses: its status and body.
func rejectedDial(url, name, token string) (int, string) {
	_, err := tunnel.Dial(context.Background(), url, name, token, nil)
	var rej *tunnel.RejectedError
	if !errors.As(err, &rej) {
		return 0, fmt.Sprint(err)
	}
	return rej.Status, rej.Message
}

// In cluster mode a dashboard request reaches the connector through
// another replica; when its token is revoked or expires, it ends all the
// same, whichever replica learns of it — the one the dashboard reached
// or the one holding the connector, each checking the credential — and
// the hop to the connector's replica ends with it.
func TestRequestsThroughAnotherReplicaEndWithTheirCredential(t *testing.T) {
	t.Parallel()
	for _, en := range endings {
		for _, knows := range []string{"front", "holder"} {
			for _, path := range []string{"/live", "/stall"} {
				what := en.name + "/" + knows + " knows" + path
				t.Run(what, func(t *testing.T) {
					t.Parallel()
					// A cluster of its own: every subtest has a connector
					// named alpha, which one cluster holds once.
					ns := natstest.Start(t)
					dir := t.TempDir()
					tokens := openSQLite(t, dir)
					t.Cleanup(func() { _ = tokens.Close() })
					clocks := map[string]*fakeclock.Clock{}
					replica := func(role string) *fixture {
						clocks[role] = fakeclock.New(time.Now().Truncate(time.Second))
						return newReplica(t, ns.ClientURL(), role+"-"+strings.NewReplacer("/", "-", " ", "-").Replace(what), func(o *Options) {
							o.Auth.SetClock(clocks[role])
							o.RequestTimeout = time.Minute
							// A revocation reaches only the replica that
							// reads the store.
							if en.name != "revoked" || role == knows {
								o.Store = tokens
							}
						})
					}
					holder, front := replica("holder"), replica("front")
					reached := make(chan reachedRequest, 4)
					holder.connector("alpha", stallingAPI(reached))
					front.waitHeld("alpha", holder.gw.opts.Cluster.ReplicaID())
					cf := &credFixture{fixture: front, st: tokens, clock: clocks[knows], reached: reached}
					tok, rec := record(t, front.auth, tokens, auth.RoleDashboard, "", 10*time.Minute)
					// The front replica may briefly take a loaded holder
					// for gone (its announcements are 100 ms apart here).
					var o *opened
					var served reachedRequest
					testkit.WaitUntil(t, "the request to reach the connector through the front replica", func() bool {
						var err error
						o, served, err = cf.tryOpen(path, func(req *http.Request) { req.Header.Set("Authorization", "Bearer "+tok) })
						if err != nil && !strings.Contains(err.Error(), "connector offline") {
							t.Fatal(err)
						}
						return err == nil
					})
					if path == "/live" {
						<-o.began
					}
					en.do(cf, rec)
					o.waitOver(t, what)
					waitCancelled(t, what, served)
					switch path {
					case "/live":
						if o.status != 200 || o.err != nil || !strings.HasPrefix(o.body, "event: record\ndata: {}\n\nevent: error\ndata: {\"error\":\"token "+en.name) {
							t.Fatalf("stream: %d %q, read error %v", o.status, o.body, o.err)
						}
					case "/stall":
						if _, reason := refusalOf(t, o.body); o.status != 401 || reason != en.reason {
							t.Fatalf("pending request: %d %s", o.status, o.body)
						}
					}
				})
			}
		}
	}
}

// The session cookie lasts no longer than its token: the browser drops it
// at the token's expiry; a token that never expires makes a cookie for
// the browser's session.
func TestSessionCookieExpiresWithItsToken(t *testing.T) {
	t.Parallel()
	f := newCredFixture(t)
	tok, rec := record(t, f.auth, f.st, auth.RoleDashboard, "", time.Hour)
	if c := f.login(tok); !c.Expires.Equal(*rec.ExpiresAt) {
		t.Fatalf("cookie expires %v, the token %v", c.Expires, *rec.ExpiresAt)
	}
	forever, _ := record(t, f.auth, f.st, auth.RoleDashboard, "", 0)
	if c := f.login(forever); !c.Expires.IsZero() || c.MaxAge != 0 {
		t.Fatalf("cookie of a token without expiry: expires %v, max-age %d", c.Expires, c.MaxAge)
	}
}
