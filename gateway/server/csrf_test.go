package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/uncaged/workflow/gateway/auth"
	"github.com/uncaged/workflow/gateway/internal/natstest"
)

// sessionCookie logs in as the dashboard does (same origin) and returns
// the cookie the gateway set.
func (f *fixture) sessionCookie() *http.Cookie {
	f.t.Helper()
	req, _ := http.NewRequest("POST", f.srv.URL+"/api/gateway/login", strings.NewReader(`{"token":"`+f.dash+`"}`))
	req.Header.Set("Origin", f.srv.URL)
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

// With the session cookie, a request that changes something must come
// from the dashboard's own origin; a bearer token works from anywhere.
func TestCookieRequestsFromOtherOriginsAreRefused(t *testing.T) {
	t.Parallel()
	f := newFixture(t, time.Hour)
	var reached atomic.Int32
	f.connector("alpha", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		w.WriteHeader(http.StatusCreated)
		fmt.Fprint(w, `{"threadId":"t1"}`)
	}))
	cookie := f.sessionCookie()
	type headers map[string]string
	cases := []struct {
		name   string
		method string
		cookie bool
		bearer bool
		h      headers
		want   int
	}{
		{"cookie, evil Origin", "POST", true, false, headers{"Origin": "http://evil.example"}, 403},
		{"cookie, sibling subdomain", "POST", true, false, headers{"Origin": "https://blog.example.com", "Sec-Fetch-Site": "same-site"}, 403},
		{"cookie, Sec-Fetch-Site same-site alone", "DELETE", true, false, headers{"Sec-Fetch-Site": "same-site"}, 403},
		{"cookie, cross-site PUT", "PUT", true, false, headers{"Sec-Fetch-Site": "cross-site", "Origin": "http://evil.example"}, 403},
		{"cookie, same origin", "POST", true, false, headers{"Origin": f.srv.URL, "Sec-Fetch-Site": "same-origin"}, 201},
		{"cookie, same Origin, old browser", "POST", true, false, headers{"Origin": f.srv.URL}, 201},
		{"cookie, https Origin over plain http", "POST", true, false, headers{"Origin": strings.Replace(f.srv.URL, "http:", "https:", 1)}, 403},
		{"cookie, Origin with a trailing slash", "POST", true, false, headers{"Origin": f.srv.URL + "/"}, 403},
		{"cookie, Origin with user info", "POST", true, false, headers{"Origin": strings.Replace(f.srv.URL, "http://", "http://evil@", 1)}, 403},
		{"cookie, null Origin", "POST", true, false, headers{"Origin": "null"}, 403},
		{"cookie, not a browser", "POST", true, false, headers{}, 201},
		{"cookie, GET from elsewhere", "GET", true, false, headers{"Origin": "http://evil.example", "Sec-Fetch-Site": "cross-site"}, 201},
		{"bearer, evil Origin", "POST", false, true, headers{"Origin": "http://evil.example", "Sec-Fetch-Site": "cross-site"}, 201},
		{"bearer and cookie, evil Origin", "POST", true, true, headers{"Origin": "http://evil.example", "Sec-Fetch-Site": "cross-site"}, 201},
	}
	for _, c := range cases {
		before := reached.Load()
		req, _ := http.NewRequest(c.method, f.srv.URL+"/api/clients/alpha/threads", strings.NewReader(`{"workflow":"w","prompt":"p"}`))
		if c.cookie {
			req.AddCookie(cookie)
		}
		if c.bearer {
			req.Header.Set("Authorization", "Bearer "+f.dash)
		}
		for k, v := range c.h {
			req.Header.Set(k, v)
		}
		resp, body := send(t, http.DefaultClient, req)
		if resp.StatusCode != c.want {
			t.Errorf("%s: %d %s, want %d", c.name, resp.StatusCode, body, c.want)
			continue
		}
		if c.want == 403 {
			var e struct{ Error string }
			if json.Unmarshal([]byte(body), &e) != nil || !strings.HasPrefix(e.Error, "cross-origin request refused") {
				t.Errorf("%s: body %s does not name the reason", c.name, body)
			}
			if reached.Load() != before {
				t.Errorf("%s: the refused request reached the connector", c.name)
			}
		}
	}
}

// Another site cannot log the browser in (to the attacker's session) or
// out.
func TestCrossSiteLoginAndLogoutAreRefused(t *testing.T) {
	t.Parallel()
	f := newFixture(t, time.Hour)
	for _, path := range []string{"/api/gateway/login", "/api/gateway/logout"} {
		for _, h := range []map[string]string{
			{"Origin": "http://evil.example"},
			{"Origin": "http://evil.example", "Sec-Fetch-Site": "cross-site"},
			{"Sec-Fetch-Site": "same-site"},
		} {
			req, _ := http.NewRequest("POST", f.srv.URL+path, strings.NewReader(`{"token":"`+f.dash+`"}`))
			for k, v := range h {
				req.Header.Set(k, v)
			}
			resp, body := send(t, http.DefaultClient, req)
			if resp.StatusCode != 403 || !strings.Contains(body, "cross-origin request refused") || len(resp.Cookies()) != 0 {
				t.Errorf("%s with %v: %d %s %v", path, h, resp.StatusCode, body, resp.Cookies())
			}
		}
	}
	// The dashboard's own login, and a script's (no browser headers).
	f.sessionCookie()
	req, _ := http.NewRequest("POST", f.srv.URL+"/api/gateway/login", strings.NewReader(`{"token":"`+f.dash+`"}`))
	if resp, body := send(t, http.DefaultClient, req); resp.StatusCode != 200 {
		t.Fatalf("login without browser headers: %d %s", resp.StatusCode, body)
	}
}

// In cluster mode the replica a browser reaches checks the origin against
// the Host the browser used; the replica holding the connector, which sees
// its own address as the Host, trusts that check for a signed hop.
func TestCookieOriginCheckThroughAnotherReplica(t *testing.T) {
	t.Parallel()
	ns := natstest.Start(t)
	r1, r2 := newReplica(t, ns.ClientURL(), "r1"), newReplica(t, ns.ClientURL(), "r2")
	r1.connector("alpha", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusCreated) }))
	r2.waitHeld("alpha", "r1")
	cookie := r2.sessionCookie()
	for origin, want := range map[string]int{r2.srv.URL: 201, "http://evil.example": 403} {
		req, _ := http.NewRequest("POST", r2.srv.URL+"/api/clients/alpha/threads", strings.NewReader(`{}`))
		req.AddCookie(cookie)
		req.Header.Set("Origin", origin) // an older browser: no Sec-Fetch-Site
		if resp, body := send(t, http.DefaultClient, req); resp.StatusCode != want {
			t.Errorf("Origin %s via r2: %d %s, want %d", origin, resp.StatusCode, body, want)
		}
	}
}
