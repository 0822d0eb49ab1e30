package server

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/uncaged/workflow/gateway/auth"
	"github.com/uncaged/workflow/shared/testkit"
)

// newServedFixture is newFixture served the way the binary serves the
// gateway: HTTPServer on Listener.
func newServedFixture(t *testing.T, mutate ...func(*Options)) *fixture {
	t.Helper()
	a, err := auth.New([]byte(strings.Repeat("k", 32)), "shared-secret")
	if err != nil {
		t.Fatal(err)
	}
	opts := Options{Auth: a, Heartbeat: time.Hour, RequestTimeout: 10 * time.Second}
	for _, m := range mutate {
		m(&opts)
	}
	g := New(opts)
	g.started = g.started.Add(-RestartGrace)
	srv := httptest.NewUnstartedServer(nil)
	srv.Config = g.HTTPServer()
	srv.Listener = g.Listener(srv.Listener)
	srv.Start()
	t.Cleanup(func() { g.Shutdown(); srv.Close() })
	dash, _ := a.Issue(auth.RoleDashboard, "", time.Hour)
	return &fixture{t: t, auth: a, gw: g, srv: srv, dash: dash}
}

// dialFrom opens a raw connection to the fixture from a loopback address.
func (f *fixture) dialFrom(ip string) net.Conn {
	f.t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", f.srv.Listener.Addr().String())
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { _ = c.Close() })
	return c
}

// sendRaw writes s on c, failing the test if it cannot.
func sendRaw(t *testing.T, c net.Conn, s string) {
	t.Helper()
	if _, err := io.WriteString(c, s); err != nil {
		t.Fatal(err)
	}
}

// closedByServer reads what the server sends on c until it closes the
// connection, and returns it. A server that keeps c open for 10 s fails
// the test: every bound under test is far shorter.
func closedByServer(t *testing.T, c net.Conn, what string) string {
	t.Helper()
	if err := c.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(c)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("%s: the server kept the connection open (got %q)", what, b)
	}
	return string(b)
}

// Clients that send a body too slowly are cut off at BodyTimeout on every
// kind of route — login before any authentication, a proxied request
// after it, a route that does not exist — and told so (408) where a
// handler was reading. Meanwhile /healthz answers, and what legitimately
// lasts longer than the bound is untouched: a live stream, a stream
// request whose body came in time, a proxied request the connector takes
// its time to answer, and the connector's tunnel itself.
func TestSlowBodiesAreCutOffAndStreamsAreNot(t *testing.T) {
	t.Parallel()
	const bound = 300 * time.Millisecond
	f := newServedFixture(t, func(o *Options) { o.BodyTimeout = bound })
	more := make(chan struct{}) // closed once the slow bodies were cut off
	f.connector("alpha", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if strings.HasSuffix(r.URL.Path, "/live") {
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprintf(w, "data: first %d\n\n", len(body))
			w.(http.Flusher).Flush()
		}
		select {
		case <-more:
		case <-r.Context().Done():
			return
		}
		if strings.HasSuffix(r.URL.Path, "/live") {
			fmt.Fprint(w, "data: second\n\n")
			return
		}
		fmt.Fprintf(w, `{"got":%d}`, len(body))
	}))

	// What must outlive the bound, started before the slow clients.
	type result struct {
		name, got string
		err       error
	}
	results := make(chan result, 3)
	stream := func(name, method, path, body string, read func(*http.Response) (string, error)) {
		req, _ := http.NewRequest(method, f.srv.URL+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+f.dash)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			results <- result{name, "", err}
			return
		}
		defer resp.Body.Close()
		got, err := read(resp)
		results <- result{name, got, err}
	}
	firstSeen := make(chan struct{}, 2)
	readEvents := func(resp *http.Response) (string, error) {
		sc := bufio.NewScanner(resp.Body)
		var events []string
		for sc.Scan() {
			if line := sc.Text(); strings.HasPrefix(line, "data: ") {
				events = append(events, line)
				if len(events) == 1 {
					firstSeen <- struct{}{}
				}
				if len(events) == 2 {
					return strings.Join(events, "|"), nil
				}
			}
		}
		return strings.Join(events, "|"), fmt.Errorf("stream ended: %v", sc.Err())
	}
	go stream("live stream", "GET", "/api/clients/alpha/threads/t1/live", "", readEvents)
	go stream("stream with a body", "POST", "/api/clients/alpha/threads/t1/live", `{"from":"the dashboard"}`, readEvents)
	go stream("slow answer", "POST", "/api/clients/alpha/slow", `{"x":1}`, func(resp *http.Response) (string, error) {
		b, err := io.ReadAll(resp.Body)
		return fmt.Sprintf("%d %s", resp.StatusCode, b), err
	})
	for range 2 {
		<-firstSeen // both streams are open and flowing
	}

	slow := []struct{ name, head string }{
		{"login", "POST /api/gateway/login HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"},
		{"proxied", "POST /api/clients/alpha/threads HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer " + f.dash + "\r\nContent-Length: 100\r\n\r\n{"},
		{"proxied, chunked", "POST /api/clients/alpha/threads HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer " + f.dash + "\r\nTransfer-Encoding: chunked\r\n\r\n1\r\n{\r\n"},
		{"no such route", "POST /nowhere HTTP/1.1\r\nHost: gw\r\nContent-Length: 100\r\n\r\n{"},
		{"unauthenticated proxy", "POST /api/clients/alpha/threads HTTP/1.1\r\nHost: gw\r\nContent-Length: 100\r\n\r\n{"},
	}
	conns := make([]net.Conn, 0, 4*len(slow))
	for range 4 {
		for _, s := range slow {
			c := f.dialFrom("127.0.0.1")
			if _, err := io.WriteString(c, s.head); err != nil {
				t.Fatal(err)
			}
			conns = append(conns, c)
		}
	}
	if resp, body := f.do("GET", "/healthz", "", nil); resp.StatusCode != 200 {
		t.Fatalf("/healthz while slow bodies hang: %d %s", resp.StatusCode, body)
	}
	for i, c := range conns {
		s := slow[i%len(slow)]
		got := closedByServer(t, c, s.name)
		switch s.name {
		case "login", "proxied", "proxied, chunked":
			if !strings.HasPrefix(got, "HTTP/1.1 408 ") || !strings.Contains(got, bodyTimeoutMessage) {
				t.Errorf("%s: %q, want 408", s.name, got)
			}
		}
	}

	close(more)
	want := map[string]string{
		"live stream":        "data: first 0|data: second",
		"stream with a body": "data: first 24|data: second",
		"slow answer":        `200 {"got":7}`,
	}
	for range 3 {
		r := <-results
		if r.err != nil || r.got != want[r.name] {
			t.Errorf("%s, past the body timeout: %q %v, want %q", r.name, r.got, r.err, want[r.name])
		}
	}
	if resp, body := f.do("GET", "/api/clients/alpha/threads/t1/live", f.dash, nil); resp.StatusCode != 200 || !strings.Contains(body, "second") {
		t.Fatalf("the tunnel after the bound: %d %s", resp.StatusCode, body)
	}
}

// One address holds at most MaxConnsPerIP connections; the next is closed
// at once, other addresses are served, a trusted proxy is not counted,
// and a connection that ends frees its slot.
func TestConnectionsPerAddressAreCapped(t *testing.T) {
	t.Parallel()
	clientFrom(t, "127.0.0.3") // skips where extra loopback addresses are missing
	f := newServedFixture(t, func(o *Options) {
		o.MaxConnsPerIP = 3
		o.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.3/32")}
	})
	held := []net.Conn{f.dialFrom("127.0.0.2"), f.dialFrom("127.0.0.2"), f.dialFrom("127.0.0.2")}
	for _, c := range held {
		// A request answered proves the server accepted and counted it.
		sendRaw(t, c, "GET /healthz HTTP/1.1\r\nHost: gw\r\n\r\n")
		if line, err := bufio.NewReader(c).ReadString('\n'); err != nil || !strings.HasPrefix(line, "HTTP/1.1 200") {
			t.Fatalf("held connection: %q %v", line, err)
		}
	}
	fourth := f.dialFrom("127.0.0.2")
	_, _ = io.WriteString(fourth, "GET /healthz HTTP/1.1\r\nHost: gw\r\n\r\n") // may fail: closed already
	if got := closedByServer(t, fourth, "fourth connection"); got != "" {
		t.Fatalf("fourth connection was served: %q", got)
	}
	if resp, _ := f.do("GET", "/healthz", "", nil); resp.StatusCode != 200 {
		t.Fatalf("another address: %d", resp.StatusCode)
	}
	proxy := clientFrom(t, "127.0.0.3")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	opened := make(chan error, 5)
	for range 5 {
		// Five at once, each on its own connection (a hung request holds it).
		go func() {
			req, _ := http.NewRequestWithContext(ctx, "GET", f.srv.URL+"/healthz", nil)
			req.Close = true
			resp, err := proxy.Do(req)
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode != 200 {
					err = fmt.Errorf("status %d", resp.StatusCode)
				}
			}
			opened <- err
		}()
	}
	for range 5 {
		if err := <-opened; err != nil {
			t.Fatalf("through the trusted proxy: %v", err)
		}
	}
	if err := held[0].Close(); err != nil {
		t.Fatal(err)
	}
	testkit.WaitUntil(t, "the closed connection to give its slot back", func() bool {
		c := f.dialFrom("127.0.0.2")
		sendRaw(t, c, "GET /healthz HTTP/1.1\r\nHost: gw\r\nConnection: close\r\n\r\n")
		return strings.HasPrefix(closedByServer(t, c, "after a slot was freed"), "HTTP/1.1 200")
	})
}

// A keep-alive connection that sends nothing more is closed after
// IdleTimeout.
func TestIdleConnectionsAreClosed(t *testing.T) {
	t.Parallel()
	f := newServedFixture(t, func(o *Options) { o.IdleTimeout = 200 * time.Millisecond })
	c := f.dialFrom("127.0.0.1")
	sendRaw(t, c, "GET /healthz HTTP/1.1\r\nHost: gw\r\n\r\n")
	if got := closedByServer(t, c, "idle keep-alive"); !strings.HasPrefix(got, "HTTP/1.1 200") {
		t.Fatalf("got %q", got)
	}
}
