package server

import (
	"crypto/tls"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
)

// A cookie's request that changes something is let through only from a
// page of the very origin it arrived at — scheme, host and port as a
// browser compares them, the scheme being TLS or a trusted proxy's
// X-Forwarded-Proto — or on a browser's own word (Sec-Fetch-Site), or
// when no browser sent it.
func TestCookieOriginMustBeTheOriginTheRequestCameTo(t *testing.T) {
	t.Parallel()
	proxies := trustedProxies{netip.MustParsePrefix("10.0.0.1/32")}
	const direct, proxy = "192.0.2.7:40000", "10.0.0.1:40000"
	for _, c := range []struct {
		what          string
		method        string
		host          string
		tls           bool
		peer          string
		proto, origin string
		site          string
		ok            bool
	}{
		{"same origin", "POST", "gw.example:8080", false, direct, "", "http://gw.example:8080", "", true},
		{"https Origin over plain http", "POST", "gw.example", false, direct, "", "https://gw.example", "", false},
		{"https Origin over plain http, same port", "POST", "gw.example:8443", false, direct, "", "https://gw.example:8443", "", false},
		{"http Origin over TLS", "POST", "gw.example", true, direct, "", "http://gw.example", "", false},
		{"https Origin over TLS", "PUT", "gw.example", true, direct, "", "https://gw.example", "", true},
		{"another port", "POST", "gw.example:8080", false, direct, "", "http://gw.example:9090", "", false},
		{"a port against none", "POST", "gw.example", false, direct, "", "http://gw.example:8080", "", false},
		{"default port in the Host", "POST", "gw.example:80", false, direct, "", "http://gw.example", "", true},
		{"default port in the Origin", "POST", "gw.example", false, direct, "", "http://gw.example:80", "", true},
		{"default https port spelled out", "POST", "gw.example", true, direct, "", "https://gw.example:443", "", true},
		{"https default port over http", "POST", "gw.example:443", false, direct, "", "https://gw.example", "", false},
		{"upper-case Host", "POST", "GW.Example:8080", false, direct, "", "http://gw.example:8080", "", true},
		{"upper-case Origin", "POST", "gw.example:8080", false, direct, "", "HTTP://GW.EXAMPLE:8080", "", true},
		{"trailing slash", "POST", "gw.example:8080", false, direct, "", "http://gw.example:8080/", "", false},
		{"a path", "POST", "gw.example:8080", false, direct, "", "http://gw.example:8080/dashboard", "", false},
		{"user info", "POST", "gw.example:8080", false, direct, "", "http://evil@gw.example:8080", "", false},
		{"a query", "POST", "gw.example:8080", false, direct, "", "http://gw.example:8080?x", "", false},
		{"null", "POST", "gw.example:8080", false, direct, "", "null", "", false},
		{"another scheme", "POST", "gw.example:8080", false, direct, "", "ftp://gw.example:8080", "", false},
		{"no host", "POST", "gw.example:8080", false, direct, "", "http://", "", false},
		{"sibling subdomain", "POST", "gw.example:8080", false, direct, "", "http://blog.gw.example:8080", "", false},
		{"IPv6", "DELETE", "[::1]:8080", false, direct, "", "http://[::1]:8080", "", true},
		{"IPv6, another port", "DELETE", "[::1]:8080", false, direct, "", "http://[::1]:8081", "", false},
		{"no Origin, same-origin", "POST", "gw.example", false, direct, "", "", "same-origin", true},
		{"no Origin, none", "POST", "gw.example", false, direct, "", "", "none", true},
		{"no Origin, same-site", "POST", "gw.example", false, direct, "", "", "same-site", false},
		{"no Origin, cross-site", "POST", "gw.example", false, direct, "", "", "cross-site", false},
		{"no Origin, odd Sec-Fetch-Site", "POST", "gw.example", false, direct, "", "", "same-origin, cross-site", false},
		{"not a browser", "POST", "gw.example", false, direct, "", "", "", true},
		{"the browser's word over the Origin", "POST", "gw.example", false, direct, "", "https://gw.example", "same-origin", true},
		{"cross-site whatever the Origin", "POST", "gw.example", false, direct, "", "http://gw.example", "cross-site", false},
		{"GET from anywhere", "GET", "gw.example", false, direct, "", "https://evil.example", "cross-site", true},
		{"HEAD from anywhere", "HEAD", "gw.example", false, direct, "", "https://evil.example", "", true},
		{"trusted proxy, https", "POST", "gw.example", false, proxy, "https", "https://gw.example", "", true},
		{"trusted proxy, https, http Origin", "POST", "gw.example", false, proxy, "https", "http://gw.example", "", false},
		{"trusted proxy, list", "POST", "gw.example", false, proxy, "HTTPS, http", "https://gw.example", "", true},
		{"trusted proxy, http", "POST", "gw.example", false, proxy, "http", "https://gw.example", "", false},
		{"untrusted X-Forwarded-Proto", "POST", "gw.example", false, direct, "https", "https://gw.example", "", false},
	} {
		r := httptest.NewRequest(c.method, "http://placeholder/api/clients/a/threads", nil)
		r.Host, r.RemoteAddr = c.host, c.peer
		if c.tls {
			r.TLS = &tls.ConnectionState{}
		}
		for k, v := range map[string]string{"X-Forwarded-Proto": c.proto, "Origin": c.origin, "Sec-Fetch-Site": c.site} {
			if v != "" {
				r.Header.Set(k, v)
			}
		}
		why := proxies.crossOrigin(r)
		if (why == "") != c.ok {
			t.Errorf("%s: refusal %q, want allowed %v", c.what, why, c.ok)
		}
		if why != "" && c.origin != "" && c.site == "" && !strings.Contains(why, c.origin) {
			t.Errorf("%s: %q does not name the Origin", c.what, why)
		}
	}
}
