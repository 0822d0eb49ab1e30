package server

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/uncaged/workflow/gateway/auth"
)

// Every route that takes a bearer token reads the scheme in any case and
// with any spaces or tabs before the token: the dashboard API, the
// metrics, an original client's unregister. Another scheme, or Bearer
// with no token, is missing credentials.
func TestBearerSchemeInAnyCaseEverywhere(t *testing.T) {
	t.Parallel()
	f := newFixture(t, time.Hour, func(o *Options) { o.MetricsToken = "scrape-me" })
	conn, _ := f.auth.Issue(auth.RoleConnector, "old", time.Hour)
	routes := []struct {
		what, method, path, token string
		ok                        int
	}{
		{"dashboard API", "GET", "/api/gateway/endpoints", f.dash, 200},
		{"metrics", "GET", "/metrics", "scrape-me", 200},
		{"unregister", "DELETE", "/api/gateway/register/old", conn, 200},
	}
	for _, header := range []struct {
		format string
		ok     bool
	}{
		{"Bearer %s", true},
		{"bearer %s", true},
		{"BEARER %s", true},
		{"BeArEr %s", true},
		{"Bearer  %s", true},
		{"Bearer\t%s", true},
		{"bearer \t %s\t", true},
		{"Basic %s", false},
		{"Token %s", false},
		{"Bearer%s", false},
		{"Bearer ", false},
	} {
		for _, r := range routes {
			req, _ := http.NewRequest(r.method, f.srv.URL+r.path, nil)
			value := strings.Replace(header.format, "%s", r.token, 1)
			req.Header.Set("Authorization", value)
			resp, body := send(t, http.DefaultClient, req)
			if header.ok && resp.StatusCode != r.ok {
				t.Errorf("%s with %q: %d %s", r.what, header.format, resp.StatusCode, body)
			}
			if !header.ok {
				if _, reason := refusalOf(t, body); resp.StatusCode != 401 || reason != auth.ReasonMissing && reason != auth.ReasonMalformed {
					t.Errorf("%s with %q: %d %s, want 401", r.what, header.format, resp.StatusCode, body)
				}
			}
		}
	}
}
