package server

import (
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/uncaged/workflow/gateway/auth"
)

func TestParseTrustedProxies(t *testing.T) {
	t.Parallel()
	got, err := ParseTrustedProxies([]string{"10.0.0.0/8, 127.0.0.1", "::1 192.168.1.7/16", "::ffff:172.16.0.1"})
	want := []string{"10.0.0.0/8", "127.0.0.1/32", "::1/128", "192.168.0.0/16", "172.16.0.1/32"}
	if err != nil || len(got) != len(want) {
		t.Fatalf("got %v %v", got, err)
	}
	for i := range want {
		if got[i].String() != want[i] {
			t.Errorf("%d: %s, want %s", i, got[i], want[i])
		}
	}
	if _, err := ParseTrustedProxies([]string{"proxy.example.com"}); err == nil || !strings.Contains(err.Error(), "proxy.example.com") {
		t.Fatalf("a host name: %v", err)
	}
	if got, err := ParseTrustedProxies(nil); err != nil || got != nil {
		t.Fatalf("none: %v %v", got, err)
	}
}

func TestClientIPBelievesOnlyTrustedProxies(t *testing.T) {
	t.Parallel()
	trusted, _ := ParseTrustedProxies([]string{"10.0.0.0/8", "::1"})
	cases := []struct {
		name       string
		peer       string
		xff        []string
		realIP     string
		want       string
		wantNoList string // the answer without trusted proxies
	}{
		{"untrusted peer, forged XFF", "192.0.2.1:5000", []string{"203.0.113.66"}, "203.0.113.67", "192.0.2.1", "192.0.2.1"},
		{"proxy appended the client", "10.0.0.5:5000", []string{"203.0.113.66, 198.51.100.7"}, "", "198.51.100.7", "10.0.0.5"},
		{"two proxies", "10.0.0.5:5000", []string{"198.51.100.7, 10.1.2.3"}, "", "198.51.100.7", "10.0.0.5"},
		{"header lines are one list", "10.0.0.5:5000", []string{"203.0.113.66", "198.51.100.7,10.1.2.3"}, "", "198.51.100.7", "10.0.0.5"},
		{"only X-Real-IP", "10.0.0.5:5000", nil, "198.51.100.8", "198.51.100.8", "10.0.0.5"},
		{"garbage X-Real-IP", "10.0.0.5:5000", nil, "nope", "10.0.0.5", "10.0.0.5"},
		{"garbage stops the walk", "10.0.0.5:5000", []string{"198.51.100.7, junk, 10.9.9.9"}, "", "10.9.9.9", "10.0.0.5"},
		{"all hops trusted", "10.0.0.5:5000", []string{"10.1.1.1"}, "", "10.1.1.1", "10.0.0.5"},
		{"IPv6 proxy", "[::1]:5000", []string{"2001:db8::7"}, "", "2001:db8::7", "::1"},
		{"IPv4-mapped proxy", "[::ffff:10.0.0.5]:5000", []string{"198.51.100.7"}, "", "198.51.100.7", "::ffff:10.0.0.5"},
	}
	for _, c := range cases {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = c.peer
		for _, v := range c.xff {
			r.Header.Add("X-Forwarded-For", v)
		}
		if c.realIP != "" {
			r.Header.Set("X-Real-IP", c.realIP)
		}
		if got := trustedProxies(trusted).clientIP(r); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
		if got := trustedProxies(nil).clientIP(r); got != c.wantNoList {
			t.Errorf("%s, nobody trusted: %q, want %q", c.name, got, c.wantNoList)
		}
	}

	r := httptest.NewRequest("POST", "/api/gateway/login", nil)
	r.Header.Set("X-Forwarded-Proto", "https")
	r.RemoteAddr = "192.0.2.1:5000"
	if trustedProxies(trusted).isHTTPS(r) {
		t.Error("X-Forwarded-Proto believed from an untrusted peer")
	}
	r.RemoteAddr = "10.0.0.5:5000"
	if !trustedProxies(trusted).isHTTPS(r) || trustedProxies(nil).isHTTPS(r) {
		t.Error("X-Forwarded-Proto from a trusted proxy (and only then)")
	}
	r.Header.Set("X-Forwarded-Proto", "http")
	r.TLS = &tls.ConnectionState{}
	if !trustedProxies(nil).isHTTPS(r) {
		t.Error("TLS to the gateway itself is HTTPS")
	}
}

// clientFrom is an HTTP client whose connections come from the loopback
// address ip (127.0.0.0/8 all reach the test server on Linux), so one
// test can be a trusted proxy and an outsider at once.
func clientFrom(t *testing.T, ip string) *http.Client {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	probe, err := net.Listen("tcp", ip+":0")
	if err != nil {
		t.Skipf("cannot use loopback address %s here: %v", ip, err)
	}
	if err := probe.Close(); err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{DialContext: d.DialContext}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

func send(t *testing.T, client *http.Client, req *http.Request) (*http.Response, string) {
	t.Helper()
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// A client that rotates X-Forwarded-For (and X-Real-IP) is still one
// address to the connect rate limit and in the logs.
func TestRotatingForwardedForDoesNotEscapeTheConnectLimit(t *testing.T) {
	t.Parallel()
	logs := &logBuffer{}
	f := newFixture(t, time.Hour, func(o *Options) {
		o.ConnectRate, o.ConnectBurst = 2, 3
		o.Logger = slog.New(slog.NewJSONHandler(logs, nil))
	})
	limited := 0
	for i := range 30 {
		req, _ := http.NewRequest("GET", f.srv.URL+"/ws/connect?name=laptop", nil)
		forged := fmt.Sprintf("203.0.113.%d", i+1)
		req.Header.Set("X-Forwarded-For", forged)
		req.Header.Set("X-Real-IP", forged)
		if resp, _ := send(t, http.DefaultClient, req); resp.StatusCode == http.StatusTooManyRequests {
			limited++
		}
	}
	if limited < 27 {
		t.Fatalf("%d of 30 attempts with rotating X-Forwarded-For were rate limited, want 27 (burst 3)", limited)
	}
	for _, line := range logs.requests(t) {
		if line["address"] != "127.0.0.1" {
			t.Fatalf("logged a forged address: %v", line)
		}
	}
}

// From a trusted proxy the client address is the one the proxy appended:
// it has its own rate-limit bucket and is what the log shows, and
// X-Forwarded-Proto: https makes the session cookie Secure. The same
// headers from a peer that is not the proxy change nothing.
func TestTrustedProxyForwardingHeadersAreBelieved(t *testing.T) {
	t.Parallel()
	logs := &logBuffer{}
	f := newFixture(t, time.Hour, func(o *Options) {
		o.ConnectRate, o.ConnectBurst = 2, 3
		o.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.2/32")}
		o.Logger = slog.New(slog.NewJSONHandler(logs, nil))
	})
	proxy, outsider := clientFrom(t, "127.0.0.2"), clientFrom(t, "127.0.0.3")
	attempt := func(c *http.Client, xff string) int {
		req, _ := http.NewRequest("GET", f.srv.URL+"/ws/connect?name=laptop", nil)
		req.Header.Set("X-Forwarded-For", xff)
		resp, _ := send(t, c, req)
		return resp.StatusCode
	}
	for i := range 3 {
		if code := attempt(proxy, "192.0.2.1, 203.0.113.66"); code != 401 {
			t.Fatalf("attempt %d through the proxy: %d", i, code)
		}
	}
	if code := attempt(proxy, "203.0.113.66"); code != 429 {
		t.Fatalf("203.0.113.66 over its limit: %d", code)
	}
	if code := attempt(proxy, "203.0.113.67"); code != 401 {
		t.Fatalf("another client behind the proxy: %d", code)
	}
	if code := attempt(outsider, "203.0.113.67"); code != 401 {
		t.Fatalf("an outsider claiming a proxied client's address: %d", code)
	}
	addresses := map[string]int{}
	for _, line := range logs.requests(t) {
		addresses[line["address"].(string)]++
	}
	if addresses["203.0.113.66"] != 4 || addresses["203.0.113.67"] != 1 || addresses["127.0.0.3"] != 1 || len(addresses) != 3 {
		t.Fatalf("logged addresses %v", addresses)
	}

	for c, secure := range map[*http.Client]bool{proxy: true, outsider: false} {
		req, _ := http.NewRequest("POST", f.srv.URL+"/api/gateway/login", strings.NewReader(`{"token":"`+f.dash+`"}`))
		req.Header.Set("X-Forwarded-Proto", "https")
		resp, body := send(t, c, req)
		var cookie *http.Cookie
		for _, ck := range resp.Cookies() {
			if ck.Name == auth.CookieName {
				cookie = ck
			}
		}
		if resp.StatusCode != 200 || cookie == nil || cookie.Secure != secure {
			t.Errorf("login with X-Forwarded-Proto: https (proxy: %v): %d %s %v, want Secure %v", secure, resp.StatusCode, body, resp.Cookies(), secure)
		}
	}
}
