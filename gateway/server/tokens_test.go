package server

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/uncaged/workflow/gateway/auth"
	"github.com/uncaged/workflow/gateway/presence"
	"github.com/uncaged/workflow/gateway/store"
	"github.com/uncaged/workflow/shared/testkit"
	"github.com/uncaged/workflow/shared/tunnel"
)

// storedFixture is a gateway keeping its tokens in a SQLite store.
func storedFixture(t *testing.T) (*fixture, store.Store) {
	t.Helper()
	st, err := store.Open(context.Background(), store.Config{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, time.Hour, func(o *Options) { o.Store = st })
	// Cleanups run last-in first-out: the gateway stops before its store.
	t.Cleanup(func() {
		f.gw.Shutdown()
		f.srv.Close()
		if err := st.Close(); err != nil {
			t.Error(err)
		}
	})
	return f, st
}

// record mints and records a token, as `token create` does.
func record(t *testing.T, a *auth.Authority, st store.Store, role, name string, ttl time.Duration) (string, store.Token) {
	t.Helper()
	tok, rec, err := a.Mint(role, name, ttl, "test")
	if err != nil {
		t.Fatal(err)
	}
	if err := st.CreateToken(context.Background(), rec); err != nil {
		t.Fatal(err)
	}
	return tok, rec
}

// refusalOf decodes a refusal's body: {"error": ..., "reason": ...}.
func refusalOf(t *testing.T, body string) (msg, reason string) {
	t.Helper()
	var r struct{ Error, Reason string }
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		t.Fatalf("refusal %q: %v", body, err)
	}
	return r.Error, r.Reason
}

// Revoking a connected connector's token closes its tunnel with the
// reason "token revoked", and its next attempt is refused, saying so.
func TestRevokedConnectorIsDisconnected(t *testing.T) {
	t.Parallel()
	f, st := storedFixture(t)
	tok, rec := record(t, f.auth, st, auth.RoleConnector, "laptop", 0)
	other, _ := record(t, f.auth, st, auth.RoleConnector, "desk", 0)
	served := make(chan error, 1)
	ws, err := tunnel.Dial(context.Background(), f.srv.URL, "laptop", tok, nil)
	if err != nil {
		t.Fatal(err)
	}
	go func() { served <- tunnel.Serve(context.Background(), ws, echoAPI("laptop"), tunnel.ServeOptions{}) }()
	f.waitStatus("laptop", presence.Online)
	f.connectorWith("desk", other)

	if _, err := st.RevokeToken(context.Background(), rec.ID); err != nil {
		t.Fatal(err)
	}
	f.waitStatus("laptop", presence.Offline)
	select {
	case err := <-served:
		if err == nil || !strings.Contains(err.Error(), "token revoked") {
			t.Fatalf("the connector's tunnel ended with %v, want the reason %q", err, "token revoked")
		}
	case <-time.After(testkit.WaitBound):
		t.Fatal("the tunnel was not closed")
	}
	_, err = tunnel.Dial(context.Background(), f.srv.URL, "laptop", tok, nil)
	var rej *tunnel.RejectedError
	if !errors.As(err, &rej) || rej.Status != http.StatusUnauthorized {
		t.Fatalf("reconnecting with a revoked token: %v", err)
	}
	if msg, reason := refusalOf(t, rej.Message); msg != "token revoked" || reason != auth.ReasonRevoked || strings.Contains(rej.Message, tok) {
		t.Fatalf("refusal %q", rej.Message)
	}
	// The other connector's token is not revoked.
	if _, online, _ := f.gw.Presence().Get("desk"); !online {
		t.Fatal("desk was disconnected too")
	}
}

// connectorWith connects name with a given token.
func (f *fixture) connectorWith(name, tok string) {
	f.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ws, err := tunnel.Dial(ctx, f.srv.URL, name, tok, nil)
	if err != nil {
		f.t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = tunnel.Serve(ctx, ws, echoAPI(name), tunnel.ServeOptions{}) }()
	f.t.Cleanup(func() { cancel(); <-done })
	f.waitStatus(name, presence.Online)
}

// A dashboard session (the cookie holds the token) ends when its token is
// revoked: 401 "token revoked", and logging in again is refused the same.
func TestRevokedDashboardSession(t *testing.T) {
	t.Parallel()
	f, st := storedFixture(t)
	dash, rec := record(t, f.auth, st, auth.RoleDashboard, "", time.Hour)
	login := func() (*http.Response, string) {
		req, _ := http.NewRequest("POST", f.srv.URL+"/api/gateway/login", strings.NewReader(`{"token":"`+dash+`"}`))
		req.Header.Set("Content-Type", "application/json")
		return doRequest(t, req)
	}
	resp, body := login()
	if resp.StatusCode != 200 {
		t.Fatalf("login: %d %s", resp.StatusCode, body)
	}
	var cookie *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == auth.CookieName {
			cookie = c
		}
	}
	endpoints := func() (*http.Response, string) {
		req, _ := http.NewRequest("GET", f.srv.URL+"/api/gateway/endpoints", nil)
		req.AddCookie(cookie)
		return doRequest(t, req)
	}
	if resp, body := endpoints(); resp.StatusCode != 200 {
		t.Fatalf("session: %d %s", resp.StatusCode, body)
	}
	if _, err := st.RevokeKind(context.Background(), store.KindDashboard); err != nil {
		t.Fatal(err)
	}
	testkit.WaitUntil(t, "the session to be refused", func() bool {
		resp, _ := endpoints()
		return resp.StatusCode == http.StatusUnauthorized
	})
	for what, do := range map[string]func() (*http.Response, string){"session": endpoints, "login": login} {
		resp, body := do()
		if msg, reason := refusalOf(t, body); resp.StatusCode != 401 || msg != "token revoked" || reason != auth.ReasonRevoked {
			t.Fatalf("%s after revoking %s: %d %s", what, rec.ID, resp.StatusCode, body)
		}
	}
}

func doRequest(t *testing.T, req *http.Request) (*http.Response, string) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

// Every place the gateway checks a credential answers a refusal as
// {"error", "reason"}, and never with the credential in it.
func TestRefusalsSayWhy(t *testing.T) {
	t.Parallel()
	f, st := storedFixture(t)
	f.gw.opts.MetricsToken = "metrics-secret"
	conn, _ := record(t, f.auth, st, auth.RoleConnector, "laptop", 0)
	dash, _ := record(t, f.auth, st, auth.RoleDashboard, "", time.Hour)
	unrecorded, _, _ := f.auth.Mint(auth.RoleDashboard, "", time.Hour, "")

	for _, c := range []struct {
		what, method, path, token, body string
		status                          int
		reason                          string
	}{
		{"login with a connector token", "POST", "/api/gateway/login", "", `{"token":"` + conn + `"}`, 403, auth.ReasonWrongKind},
		{"login with garbage", "POST", "/api/gateway/login", "", `{"token":"garbage-credential"}`, 401, auth.ReasonMalformed},
		{"login with an unrecorded token", "POST", "/api/gateway/login", "", `{"token":"` + unrecorded + `"}`, 401, auth.ReasonUnknown},
		{"API with a connector token", "GET", "/api/gateway/endpoints", conn, "", 403, auth.ReasonWrongKind},
		{"API without credentials", "GET", "/api/gateway/endpoints", "", "", 401, auth.ReasonMissing},
		{"connect with a dashboard token", "GET", "/ws/connect?name=laptop", dash, "", 403, auth.ReasonWrongKind},
		{"connect with another's token", "GET", "/ws/connect?name=desk", conn, "", 403, auth.ReasonWrongConnector},
		{"metrics with a wrong token", "GET", "/metrics", "wrong-metrics-token", "", 401, auth.ReasonUnknown},
	} {
		req, _ := http.NewRequest(c.method, f.srv.URL+c.path, strings.NewReader(c.body))
		if c.token != "" {
			req.Header.Set("Authorization", "Bearer "+c.token)
		}
		resp, body := doRequest(t, req)
		msg, reason := refusalOf(t, body)
		if resp.StatusCode != c.status || reason != c.reason || msg == "" {
			t.Errorf("%s: %d %s, want %d with reason %q", c.what, resp.StatusCode, body, c.status, c.reason)
		}
		for _, secret := range []string{conn, dash, unrecorded, "garbage-credential", "wrong-metrics-token"} {
			if strings.Contains(body, secret) {
				t.Errorf("%s: the refusal quotes a credential: %s", c.what, body)
			}
		}
	}
	// A good token still passes, and a recorded one created after the
	// gateway started (by the CLI) is found.
	if resp, body := f.do("GET", "/api/gateway/endpoints", dash, nil); resp.StatusCode != 200 {
		t.Fatalf("a recorded token: %d %s", resp.StatusCode, body)
	}
}
