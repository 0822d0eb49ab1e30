package server

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/uncaged/workflow/gateway/auth"
)

func TestParseAllowedOrigins(t *testing.T) {
	t.Parallel()
	got, err := ParseAllowedOrigins([]string{"HTTPS://Dash.Example.com:443", "http://127.0.0.1:5173,http://[::1]:80", "*"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"https://dash.example.com", "http://127.0.0.1:5173", "http://[::1]", "*"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("got %q, want %q", got, want)
	}
	for _, bad := range []string{
		"dash.example.com", "ftp://x", "https://", "https://x/", "https://x/app", "https://x?y", "https://x#", "https://u:p@x",
		"null", "**", "https://x:notaport", "mailto:a@b", "//x",
	} {
		if o, err := ParseAllowedOrigins([]string{bad}); err == nil {
			t.Errorf("%q accepted as %q", bad, o)
		} else if !strings.Contains(err.Error(), "scheme://host") {
			t.Errorf("%q: error does not say what an origin is: %v", bad, err)
		}
	}
	if o, err := ParseAllowedOrigins(nil); err != nil || o != nil {
		t.Errorf("none: %q %v", o, err)
	}
}

// corsRequest sends method path with Origin origin, and the extra
// headers.
func (f *fixture) corsRequest(method, path, origin string, h map[string]string) (*http.Response, string) {
	f.t.Helper()
	req, _ := http.NewRequest(method, f.srv.URL+path, nil)
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	for k, v := range h {
		req.Header.Set(k, v)
	}
	return send(f.t, http.DefaultClient, req)
}

// A dashboard on a listed origin gets its preflights answered without
// credentials and may read what it asks for with its token; other origins
// get what they got before (no CORS headers, the preflight refused).
func TestAllowedOriginsPreflightAndBearerRequests(t *testing.T) {
	t.Parallel()
	const listed, other = "http://127.0.0.1:5173", "http://evil.example"
	f := newFixture(t, time.Hour, func(o *Options) { o.AllowOrigins = []string{listed} })
	f.connector("alpha", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// A machine's own CORS headers are not the gateway's answer.
		w.Header().Set("Access-Control-Allow-Origin", "*")
		w.Header().Set("Access-Control-Allow-Credentials", "true")
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`[]`))
	}))
	preflight := map[string]string{"Access-Control-Request-Method": "GET", "Access-Control-Request-Headers": "authorization", "Sec-Fetch-Site": "cross-site"}
	resp, body := f.corsRequest("OPTIONS", "/api/gateway/endpoints", listed, preflight)
	if resp.StatusCode != 204 || resp.Header.Get("Access-Control-Allow-Origin") != listed ||
		!strings.Contains(resp.Header.Get("Access-Control-Allow-Headers"), "Authorization") ||
		resp.Header.Get("Access-Control-Allow-Credentials") != "" {
		t.Errorf("listed preflight: %d %v %s", resp.StatusCode, resp.Header, body)
	}
	resp, _ = f.corsRequest("OPTIONS", "/api/clients/alpha/threads", other, preflight)
	if resp.StatusCode == 204 || resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("other origin's preflight: %d %v", resp.StatusCode, resp.Header)
	}
	bearer := map[string]string{"Authorization": "Bearer " + f.dash, "Sec-Fetch-Site": "cross-site"}
	for _, path := range []string{"/api/gateway/endpoints", "/api/clients/alpha/threads"} {
		resp, body = f.corsRequest("GET", path, listed, bearer)
		if resp.StatusCode != 200 || resp.Header.Values("Access-Control-Allow-Origin")[0] != listed ||
			len(resp.Header.Values("Access-Control-Allow-Origin")) != 1 || resp.Header.Get("Access-Control-Allow-Credentials") != "" ||
			!strings.Contains(resp.Header.Get("Vary"), "Origin") {
			t.Errorf("%s, listed origin: %d %v %s", path, resp.StatusCode, resp.Header, body)
		}
		resp, _ = f.corsRequest("GET", path, other, bearer)
		if resp.Header.Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("%s, other origin: %v", path, resp.Header)
		}
	}
	// The gateway's own refusals are readable too (the page shows them).
	resp, body = f.corsRequest("GET", "/api/gateway/endpoints", listed, map[string]string{"Authorization": "Bearer nope"})
	if resp.StatusCode != 401 || resp.Header.Get("Access-Control-Allow-Origin") != listed {
		t.Errorf("refusal: %d %v %s", resp.StatusCode, resp.Header, body)
	}
	// Outside /api nothing changes.
	resp, _ = f.corsRequest("OPTIONS", "/healthz", listed, preflight)
	if resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("/healthz: %v", resp.Header)
	}
}

// The session cookie stays the dashboard's own: from a listed origin (or
// any, with "*") a cookie-authenticated request is refused before it
// reaches anything, reads included; the gateway's own pages keep it.
func TestAllowedOriginsNeverTakeTheSessionCookie(t *testing.T) {
	t.Parallel()
	for _, allow := range []string{"http://127.0.0.1:5173", "*"} {
		f := newFixture(t, time.Hour, func(o *Options) { o.AllowOrigins = []string{allow} })
		reached := 0
		f.connector("alpha", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { reached++ }))
		cookie := auth.CookieName + "=" + f.sessionCookie().Value
		for _, method := range []string{"GET", "POST"} {
			resp, body := f.corsRequest(method, "/api/clients/alpha/threads", "http://127.0.0.1:5173",
				map[string]string{"Cookie": cookie, "Sec-Fetch-Site": "same-site"})
			if resp.StatusCode != 403 || !strings.Contains(body, "session cookie") || resp.Header.Get("Access-Control-Allow-Credentials") != "" {
				t.Errorf("%s, %s with the cookie: %d %s", allow, method, resp.StatusCode, body)
			}
		}
		if reached != 0 {
			t.Errorf("%s: a cookie request reached the machine", allow)
		}
		resp, body := f.corsRequest("GET", "/api/gateway/endpoints", f.srv.URL, map[string]string{"Cookie": cookie, "Sec-Fetch-Site": "same-origin"})
		if resp.StatusCode != 200 {
			t.Errorf("%s, own page with the cookie: %d %s", allow, resp.StatusCode, body)
		}
		// A login from another origin is refused as before.
		resp, _ = f.corsRequest("POST", "/api/gateway/login", "http://127.0.0.1:5173", map[string]string{"Sec-Fetch-Site": "same-site"})
		if resp.StatusCode != 403 {
			t.Errorf("%s, login from the listed origin: %d", allow, resp.StatusCode)
		}
	}
}

// Without a list, a preflight is what it was: the routes answer it (401),
// and no answer carries CORS headers, not even a machine's own.
func TestNoAllowedOriginsChangesNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t, time.Hour)
	f.connector("alpha", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Access-Control-Allow-Origin", "*")
	}))
	resp, _ := f.corsRequest("OPTIONS", "/api/clients/alpha/threads", "http://127.0.0.1:5173",
		map[string]string{"Access-Control-Request-Method": "GET"})
	if resp.StatusCode != 401 || resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("preflight: %d %v", resp.StatusCode, resp.Header)
	}
	resp, _ = f.corsRequest("GET", "/api/clients/alpha/threads", "http://127.0.0.1:5173", map[string]string{"Authorization": "Bearer " + f.dash})
	if resp.StatusCode != 200 || resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("a machine's CORS header passed: %d %v", resp.StatusCode, resp.Header)
	}
	resp, _ = f.corsRequest("GET", "/api/clients/alpha/threads", "", map[string]string{"Authorization": "Bearer " + f.dash})
	if resp.StatusCode != 200 || resp.Header.Get("Access-Control-Allow-Origin") != "*" {
		t.Errorf("a request without Origin (not a browser's) changed: %d %v", resp.StatusCode, resp.Header)
	}
}

// Whatever --allow-origin accepts is an origin as a browser writes it:
// parsing it again gives it back, and it has nothing after the port.
func FuzzParseAllowedOrigins(f *testing.F) {
	for _, s := range []string{"https://dash.example.com", "http://127.0.0.1:5173", "*", "http://[::1]:80", "https://x/", "HTTP://X:443", "https://u@x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ParseAllowedOrigins([]string{s})
		if err != nil {
			return
		}
		for _, o := range got {
			again, err := ParseAllowedOrigins([]string{o})
			if err != nil || len(again) != 1 || again[0] != o {
				t.Fatalf("%q gave %q, which parses as %q, %v", s, o, again, err)
			}
			if o != "*" && strings.Count(o, "/") != 2 {
				t.Fatalf("%q gave %q, with a path", s, o)
			}
		}
	})
}
