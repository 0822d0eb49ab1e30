package legacy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"testing"
)

func TestParseAllowListRefusesWhatIsNotAHostAddressOrCIDR(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{
		"http://example.com", "example.com:8080", "example.com/path", "exa$mple.com", "*", "*.", "*.*.example.com",
		"-bad.example.com", "bad-.example.com", "under_score.example", "a..b", "10.0.0.0/33", "fe80::1%eth0",
		"fe80::/10%eth0", strings.Repeat("a", 64) + ".com", "ünï.example", "10.0.0.1:80",
	} {
		a, err := ParseAllowList([]string{bad})
		if err == nil {
			t.Errorf("%q: accepted as %v", bad, a)
			continue
		}
		if !strings.Contains(err.Error(), AllowFlag) {
			t.Errorf("%q: error does not name the flag: %v", bad, err)
		}
	}
	// A bad entry among good ones refuses the whole list.
	if a, err := ParseAllowList([]string{"127.0.0.1, example.com", "bad/"}); err == nil {
		t.Errorf("accepted %v", a)
	}
}

func TestParseAllowListEmptyIsOff(t *testing.T) {
	t.Parallel()
	for _, values := range [][]string{nil, {}, {""}, {" , "}} {
		a, err := ParseAllowList(values)
		if err != nil || a != nil {
			t.Errorf("%q: %v, %v; want nil, nil", values, a, err)
		}
	}
	var off *AllowList
	if off.DialAllowed("127.0.0.1", netip.MustParseAddr("127.0.0.1")) {
		t.Error("a nil list allowed a dial")
	}
	if err := off.CheckURL(context.Background(), nil, "http://127.0.0.1/"); !errors.Is(err, ErrURLClientsOff) {
		t.Errorf("nil list: %v", err)
	}
}

func TestDialAllowed(t *testing.T) {
	t.Parallel()
	a, err := ParseAllowList([]string{"127.0.0.1,10.1.0.0/16", "client.example.com *.tunnel.example", "::ffff:192.0.2.0/120"})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		host, ip string
		want     bool
	}{
		{"127.0.0.1", "127.0.0.1", true},
		{"127.0.0.2", "127.0.0.2", false},
		{"localhost", "127.0.0.1", true}, // any name resolving into a listed address
		{"10.1.2.3", "10.1.2.3", true},
		{"10.2.0.1", "10.2.0.1", false},
		{"192.0.2.7", "192.0.2.7", true}, // a mapped CIDR admits the plain address
		{"192.0.2.7", "::ffff:192.0.2.7", true},
		{"client.example.com", "93.184.216.34", true},
		{"CLIENT.example.com.", "93.184.216.34", true},
		{"x.tunnel.example", "93.184.216.34", true},
		{"tunnel.example", "93.184.216.34", false}, // the wildcard is for subdomains
		{"other.example.com", "93.184.216.34", false},
		// DNS rebinding: a listed name that resolves to a non-public address.
		{"client.example.com", "169.254.169.254", false},
		{"client.example.com", "127.0.0.2", false},
		{"x.tunnel.example", "192.168.1.1", false},
		{"x.tunnel.example", "100.64.0.1", false},
		{"x.tunnel.example", "::1", false},
		{"x.tunnel.example", "fd00::1", false},
		{"x.tunnel.example", "0.0.0.0", false},
		{"x.tunnel.example", "64:ff9b::a9fe:a9fe", false}, // the metadata address through NAT64
		{"x.tunnel.example", "2002:a9fe:a9fe::1", false},  // ... through 6to4
		{"x.tunnel.example", "240.0.0.1", false},
		{"x.tunnel.example", "2606:4700::1", true},
		// ...unless the address is listed itself.
		{"client.example.com", "10.1.0.9", true},
	}
	for _, c := range cases {
		if got := a.DialAllowed(c.host, netip.MustParseAddr(c.ip)); got != c.want {
			t.Errorf("DialAllowed(%s, %s) = %v, want %v", c.host, c.ip, got, c.want)
		}
	}
}

type fakeResolver map[string][]netip.Addr

func (f fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if ips, ok := f[host]; ok {
		return ips, nil
	}
	return nil, fmt.Errorf("no such host %s", host)
}

func TestCheckURL(t *testing.T) {
	t.Parallel()
	a, err := ParseAllowList([]string{"127.0.0.1", "client.example.com"})
	if err != nil {
		t.Fatal(err)
	}
	r := fakeResolver{"localhost": {netip.MustParseAddr("127.0.0.1")}, "evil.example": {netip.MustParseAddr("169.254.169.254")}}
	for _, ok := range []string{"http://127.0.0.1:7860", "https://client.example.com/base", "http://localhost:1/"} {
		if err := a.CheckURL(context.Background(), r, ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for _, bad := range []string{"http://127.0.0.2:7860", "http://evil.example/", "http://unknown.example/", "ftp://127.0.0.1/", "http:///x", "http://user:pw@127.0.0.1/", "file:///etc/passwd"} {
		err := a.CheckURL(context.Background(), r, bad)
		if err == nil {
			t.Errorf("%s: accepted", bad)
			continue
		}
		if strings.Contains(err.Error(), "pw") {
			t.Errorf("%s: error shows the password: %v", bad, err)
		}
	}
	if err := a.CheckURL(context.Background(), r, "http://127.0.0.2/"); !strings.Contains(err.Error(), AllowFlag) {
		t.Errorf("refusal does not name the flag: %v", err)
	}
}

func TestIsFetchURL(t *testing.T) {
	t.Parallel()
	for raw, want := range map[string]bool{"http://x": true, "HTTPS://x/": true, "ws://laptop": false, "laptop": false, "": false, "wss://x": false} {
		if got := IsFetchURL(raw); got != want {
			t.Errorf("IsFetchURL(%q) = %v", raw, got)
		}
	}
}

func FuzzParseAllowList(f *testing.F) {
	for _, s := range []string{"127.0.0.1", "10.0.0.0/8", "*.example.com", "example.com", "::1", "::ffff:1.2.3.4/104", "http://x", "a,b c", "fe80::1%lo"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := ParseAllowList([]string{s})
		if err != nil {
			if a != nil {
				t.Fatalf("%q: a list and an error", s)
			}
			if !strings.Contains(err.Error(), AllowFlag) {
				t.Fatalf("%q: error does not name the flag: %v", s, err)
			}
			return
		}
		if a == nil {
			return
		}
		// Whatever was accepted never admits the metadata address or
		// loopback by name alone, and reads back as entries that parse.
		if a.DialAllowed("metadata.example", netip.MustParseAddr("169.254.169.254")) && !a.addressListed(netip.MustParseAddr("169.254.169.254")) {
			t.Fatalf("%q admits the metadata address by name", s)
		}
		if b, err := ParseAllowList([]string{a.String()}); err != nil || b.String() == "" {
			t.Fatalf("%q: read back %q: %v", s, a.String(), err)
		}
	})
}

// fetcherFor builds a fetcher allowing entries, with a 1 KiB bound.
func fetcherFor(t *testing.T, entries ...string) *URLFetcher {
	t.Helper()
	a, err := ParseAllowList(entries)
	if err != nil {
		t.Fatal(err)
	}
	return NewURLFetcher(URLOptions{Allow: a, MaxResponse: 1 << 10})
}

func get(t *testing.T, c *URLConn, path string) (*http.Response, error) {
	t.Helper()
	req := httptest.NewRequest("GET", "http://connector"+path, nil)
	req.RequestURI = ""
	return c.RoundTrip(req)
}

func TestURLConnFetchesUnderTheRegisteredURLWithTheToken(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s?%s %s %s", r.URL.Path, r.URL.RawQuery, r.Header.Get(ClientTokenHeader), r.Header.Get(AgentTokenHeader))
	}))
	defer srv.Close()
	c, err := fetcherFor(t, "127.0.0.1").Conn(srv.URL+"/base/", "tok")
	if err != nil {
		t.Fatal(err)
	}
	resp, err := get(t, c, "/api/threads?limit=2")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if got, want := string(body), "/base/api/threads?limit=2 tok tok"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestURLConnRefusesRedirectsOutOfTheSet(t *testing.T) {
	t.Parallel()
	// Another loopback address: the same machine, outside the list.
	outside := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("the fetch reached %s", r.URL)
	}))
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Skip("no 127.0.0.2 here:", err)
	}
	outside.Listener = ln
	outside.Start()
	defer outside.Close()
	var tokenSeen string
	inside2 := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tokenSeen = r.Header.Get(ClientTokenHeader) + "|" + r.Header.Get(AgentTokenHeader)
		fmt.Fprint(w, "landed")
	}))
	defer inside2.Close()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api/out":
			http.Redirect(w, r, outside.URL+"/api/x", http.StatusFound)
		case "/api/scheme":
			http.Redirect(w, r, "file:///etc/passwd", http.StatusFound)
		case "/api/in":
			http.Redirect(w, r, "/api/landed", http.StatusFound)
		case "/api/otherhost":
			// Another port of a listed address: followed, without the token.
			http.Redirect(w, r, inside2.URL+"/api/landed", http.StatusFound)
		case "/api/loop":
			http.Redirect(w, r, "/api/loop", http.StatusFound)
		default:
			fmt.Fprint(w, "landed")
		}
	}))
	defer srv.Close()
	c, err := fetcherFor(t, "127.0.0.1").Conn(srv.URL, "tok")
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/api/out", "/api/scheme", "/api/loop"} {
		resp, err := get(t, c, path)
		if err == nil {
			_ = resp.Body.Close()
			t.Errorf("%s: followed (%d)", path, resp.StatusCode)
			continue
		}
		var re *RedirectError
		var de *RefusedError
		if !errors.As(err, &re) && !errors.As(err, &de) {
			t.Errorf("%s: %v, want a refused redirect or dial", path, err)
		}
		if path != "/api/loop" && path != "/api/scheme" && !strings.Contains(err.Error(), AllowFlag) {
			t.Errorf("%s: error does not name the flag: %v", path, err)
		}
	}
	for _, path := range []string{"/api/in", "/api/otherhost"} {
		resp, err := get(t, c, path)
		if err != nil {
			t.Errorf("%s: %v", path, err)
			continue
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if string(body) != "landed" {
			t.Errorf("%s: %q", path, body)
		}
	}
	if tokenSeen != "|" {
		t.Errorf("the token went to another host: %q", tokenSeen)
	}
}

func TestURLConnRefusesAnAddressNotListed(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("reached")
	}))
	defer srv.Close()
	// Listed by name only: loopback is not public, so the dial is refused.
	u, _ := url.Parse(srv.URL)
	c, err := fetcherFor(t, "localhost").Conn("http://localhost:"+u.Port(), "")
	if err != nil {
		t.Fatal(err)
	}
	_, err = get(t, c, "/api/threads")
	var de *RefusedError
	if !errors.As(err, &de) || !strings.Contains(err.Error(), AllowFlag) {
		t.Fatalf("got %v, want the dial refused naming the flag", err)
	}
}

func TestURLConnBoundsTheAnswer(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api/declared":
			w.Header().Set("Content-Length", "4096")
			_, _ = w.Write(make([]byte, 4096))
		case "/api/chunked":
			for range 4 {
				_, _ = w.Write(make([]byte, 1024))
				w.(http.Flusher).Flush()
			}
		case "/api/exact":
			w.(http.Flusher).Flush()
			_, _ = w.Write(make([]byte, 1024))
		case "/api/stream":
			w.Header().Set("Content-Type", "text/event-stream")
			for range 4 {
				_, _ = w.Write(make([]byte, 1024))
				w.(http.Flusher).Flush()
			}
		}
	}))
	defer srv.Close()
	c, err := fetcherFor(t, "127.0.0.1").Conn(srv.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := get(t, c, "/api/declared"); !errors.Is(err, ErrResponseTooLarge) {
		t.Errorf("declared: %v", err)
	}
	read := func(path string) (int, error) {
		resp, err := get(t, c, path)
		if err != nil {
			return 0, err
		}
		defer func() { _ = resp.Body.Close() }()
		b, err := io.ReadAll(resp.Body)
		return len(b), err
	}
	if _, err := read("/api/chunked"); !errors.Is(err, ErrResponseTooLarge) {
		t.Errorf("chunked: %v", err)
	}
	if n, err := read("/api/exact"); err != nil || n != 1024 {
		t.Errorf("exact: %d %v", n, err)
	}
	if n, err := read("/api/stream"); err != nil || n != 4096 {
		t.Errorf("stream: %d %v", n, err)
	}
}

func TestDecodeRegisterTakesTheAgentToken(t *testing.T) {
	t.Parallel()
	r, _, err := DecodeRegister(strings.NewReader(`{"name":"a","url":"https://x.example","secret":"s","agentToken":"at"}`))
	if err != nil || r.ClientToken != "at" {
		t.Fatalf("%+v %v", r, err)
	}
	r, _, err = DecodeRegister(strings.NewReader(`{"name":"a","url":"https://x.example","secret":"s","agentToken":"at","clientToken":"ct"}`))
	if err != nil || r.ClientToken != "ct" {
		t.Fatalf("%+v %v", r, err)
	}
}
