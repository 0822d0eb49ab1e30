package cli

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// The API on a local port refuses what a web page could send it: a
// cross-origin request (a text/plain POST that would start a thread) and a
// browser's request for a DNS name pointed at this machine (rebinding).
// Its own tools — curl or a scraper by any host name, the dashboard's dev
// server, a browser on a loopback or LAN address — get through.
func TestLocalAPIRefusesWebPages(t *testing.T) {
	t.Parallel()
	var reached atomic.Int32
	srv := httptest.NewServer(localOnly(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		w.WriteHeader(http.StatusAccepted)
	})))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	for _, tc := range []struct {
		host, origin string
		browser      bool
		want         int
	}{
		{"", "", false, http.StatusAccepted},
		{"connector.internal:" + port, "", false, http.StatusAccepted},
		{"localhost:" + port, "", true, http.StatusAccepted},
		{"[::1]:" + port, "", true, http.StatusAccepted},
		{"192.168.1.5:" + port, "", true, http.StatusAccepted},
		{"", "http://localhost:5173", true, http.StatusAccepted},
		{"", "https://evil.example", true, http.StatusForbidden},
		{"", "null", true, http.StatusForbidden},
		{"", "https://evil.example", false, http.StatusForbidden},
		{"evil.example:" + port, "", true, http.StatusForbidden},
		{"localhost.evil.example", "", true, http.StatusForbidden},
	} {
		req, _ := http.NewRequest("POST", srv.URL+"/api/threads", strings.NewReader(`{"workflow":"w","prompt":"p"}`))
		req.Header.Set("Content-Type", "text/plain")
		if tc.host != "" {
			req.Host = tc.host
		}
		if tc.origin != "" {
			req.Header.Set("Origin", tc.origin)
		}
		if tc.browser {
			req.Header.Set("Sec-Fetch-Site", "same-origin")
		}
		before := reached.Load()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if got := reached.Load() > before; resp.StatusCode != tc.want || got != (tc.want != http.StatusForbidden) {
			t.Errorf("host %q origin %q browser %v: %d (handler reached: %v), want %d", tc.host, tc.origin, tc.browser, resp.StatusCode, got, tc.want)
		}
	}
}
