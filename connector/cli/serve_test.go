package cli

import (
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/uncaged/workflow/connector/api"
)

// The API on a local port refuses what a web page could send it: a
// request from a page of an origin it was not given (--allow-origin;
// none by default, the dashboard's dev server included), whether the
// request names the origin or, from another site's page, names none, and
// a browser's request for a DNS name pointed at this machine (rebinding).
// Its own tools — curl or a scraper by any host name, a browser on a
// loopback or LAN address, a page of an origin it was given — get
// through. Every combination of configuration, origin, Sec-Fetch-Site and
// host is tried against that rule.
func TestLocalAPIRefusesWebPages(t *testing.T) {
	t.Parallel()
	var reached atomic.Int32
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		w.WriteHeader(http.StatusAccepted)
	})
	origins := []string{"", "http://localhost:5173", "http://127.0.0.1:5173", "http://[::1]:5173", "https://localhost:5173",
		"http://localhost:5174", "http://localhost", "http://localhost:5173/", "HTTP://LOCALHOST:5173", "null",
		"http://localhost:7860", "http://127.0.0.1:7860", "https://evil.example", "http://localhost.evil.example:5173"}
	sites := []string{"", "same-origin", "same-site", "cross-site", "none"}
	for _, config := range [][]string{nil, {"http://localhost:5173"}, {"HTTP://127.0.0.1:5173", "https://dash.example.com:443"}} {
		allowed, err := api.ParseOrigins(config)
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(localOnly(handler, allowed))
		_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
		hosts := []string{"", "connector.internal:" + port, "localhost:" + port, "[::1]:" + port, "192.168.1.5:" + port, "evil.example:" + port, "localhost.evil.example"}
		admitted := map[string]bool{}
		for _, o := range allowed.List() {
			admitted[o] = true
		}
		for _, origin := range origins {
			for _, site := range sites {
				for _, host := range hosts {
					name := host
					if h, _, err := net.SplitHostPort(host); err == nil {
						name = h
					}
					fromPage := origin != "" || site == "cross-site" || site == "same-site"
					ipOrLocalhost := host == "" || name == "localhost" || net.ParseIP(strings.Trim(name, "[]")) != nil
					want := http.StatusAccepted
					if (fromPage && !admitted[origin]) || (site != "" && !ipOrLocalhost) {
						want = http.StatusForbidden
					}
					req, _ := http.NewRequest("POST", srv.URL+"/api/threads", strings.NewReader(`{"workflow":"w","prompt":"p"}`))
					req.Header.Set("Content-Type", "text/plain")
					if host != "" {
						req.Host = host
					}
					if origin != "" {
						req.Header.Set("Origin", origin)
					}
					if site != "" {
						req.Header.Set("Sec-Fetch-Site", site)
					}
					before := reached.Load()
					resp, err := http.DefaultClient.Do(req)
					if err != nil {
						t.Fatal(err)
					}
					resp.Body.Close()
					if got := reached.Load() > before; resp.StatusCode != want || got != (want != http.StatusForbidden) {
						t.Errorf("admitting %v: host %q origin %q site %q: %d (handler reached: %v), want %d", config, host, origin, site, resp.StatusCode, got, want)
					}
				}
			}
		}
		srv.Close()
	}
}

// --allow-origin takes origins only: one page at a time, written as a
// browser writes its Origin header.
func TestAllowOriginTakesOriginsOnly(t *testing.T) {
	t.Parallel()
	got, err := api.ParseOrigins([]string{"HTTP://LocalHost:5173", "http://127.0.0.1:80,https://[::1]:443 https://dash.example.com", "http://localhost:5173"})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"http://localhost:5173", "http://127.0.0.1", "https://[::1]", "https://dash.example.com"}; !slices.Equal(got.List(), want) {
		t.Fatalf("parsed %v, want %v", got.List(), want)
	}
	for _, bad := range []string{"*", "null", "NULL", "localhost:5173", "ftp://localhost", "http://", "http://u@localhost", "http://localhost/", "http://localhost:5173/app", "http://localhost?x", "http://localhost#", "http://localhost:x"} {
		if o, err := api.ParseOrigins([]string{bad}); err == nil {
			t.Errorf("%q accepted as %v", bad, o.List())
		}
	}
	c := newCLI(t)
	c.fails(`--allow-origin: origin "*": the local API has no credential of its own`, "serve", "--listen", "127.0.0.1:0", "--allow-origin", "*")
	c.env["UNCAGED_WORKFLOW_ALLOW_ORIGIN"] = "http://localhost:5173,null"
	c.fails(`--allow-origin: origin "null"`, "serve", "--listen", "127.0.0.1:0")
	if isRoot(c.root) {
		t.Fatal("a refused --allow-origin created the root")
	}
}
