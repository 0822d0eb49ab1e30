package server

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/uncaged/workflow/gateway/auth"
	"github.com/uncaged/workflow/shared/testkit"
)

// One client is an IPv4 address, an IPv4-mapped IPv6 address counting as
// its IPv4 address, or an IPv6 /64, whatever its zone.
func TestAddressKeys(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ a, b string }{
		{"192.0.2.1", "::ffff:192.0.2.1"},
		{"2001:db8:1:2::1", "2001:db8:1:2:ffff:ffff:ffff:ffff"},
		{"2001:db8:1:2::1", "2001:db8:1:2:abcd::9"},
		{"fe80::1%eth0", "fe80::2%eth1"},
		{"fe80::1%eth0", "fe80::1"},
		{"::1", "::2"},
	} {
		if ka, kb := addressKey(netip.MustParseAddr(c.a)), addressKey(netip.MustParseAddr(c.b)); ka != kb {
			t.Errorf("%s is %s and %s is %s: want one client", c.a, ka, c.b, kb)
		}
		if ka, kb := clientKey(c.a), clientKey(c.b); ka != kb {
			t.Errorf("clientKey: %s is %s and %s is %s: want one client", c.a, ka, c.b, kb)
		}
	}
	for _, c := range []struct{ a, b string }{
		{"192.0.2.1", "192.0.2.2"},
		{"::ffff:192.0.2.1", "::ffff:192.0.2.2"},
		{"2001:db8:1:2::1", "2001:db8:1:3::1"},
		{"2001:db8::1", "::ffff:32.1.13.184"}, // 2001:db8 read as IPv4
		{"::ffff:192.0.2.1", "::192.0.2.1"},   // IPv4-compatible is IPv6
	} {
		if ka, kb := addressKey(netip.MustParseAddr(c.a)), addressKey(netip.MustParseAddr(c.b)); ka == kb {
			t.Errorf("%s and %s are both %s: want two clients", c.a, c.b, ka)
		}
		if ka, kb := clientKey(c.a), clientKey(c.b); ka == kb {
			t.Errorf("clientKey: %s and %s are both %s: want two clients", c.a, c.b, ka)
		}
	}
	// The rate limits' keys read as the logs do: an IPv4 address as it is.
	if got := clientKey("::ffff:192.0.2.7"); got != "192.0.2.7" {
		t.Errorf("clientKey(::ffff:192.0.2.7) = %q", got)
	}
	if got := clientKey("not an address"); got != "not an address" {
		t.Errorf("clientKey of text = %q", got)
	}
}

// Every address of a /64 shares one connection limit and one connect
// rate limit.
func TestAnIPv6PrefixIsOneClient(t *testing.T) {
	t.Parallel()
	l := newRateLimiter(0, 3)
	for i := range 3 {
		if ok, _ := l.allow(fmt.Sprintf("2001:db8:0:1::%x", i+1)); !ok {
			t.Fatalf("attempt %d refused", i)
		}
	}
	if ok, _ := l.allow("2001:db8:0:1:ffff::1"); ok {
		t.Fatal("a fourth address of the same /64 was let past a burst of 3")
	}
	if ok, _ := l.allow("2001:db8:0:2::1"); !ok {
		t.Fatal("another /64 was refused")
	}
}

func TestMaxConnsLeavesDescriptorsForTheGateway(t *testing.T) {
	t.Parallel()
	for limit, want := range map[uint64]int{
		400:     336,
		1024:    896,
		65536:   57344,
		64:      minMaxConns,
		0:       minMaxConns,
		1 << 62: 1<<22 - 1<<19,
	} {
		if got := maxConnsFor(limit); got != want {
			t.Errorf("maxConnsFor(%d) = %d, want %d", limit, got, want)
		}
	}
	if n := DefaultMaxConns(); n < minMaxConns {
		t.Fatalf("DefaultMaxConns() = %d", n)
	}
}

// connKind is what a test connection does.
type connKind int

const (
	slowHeaders connKind = iota // half its request line and headers
	slowBody                    // whole headers, part of the body
	idleConn                    // one request answered, then nothing
	servingConn                 // a request the connector holds
)

func (k connKind) String() string {
	return [...]string{"slow headers", "slow body", "idle", "serving"}[k]
}

func (k connKind) waits() bool { return k != servingConn }

// limitFixture is a served gateway with a connector whose /block holds
// requests until released, and raw connections to it.
type limitFixture struct {
	*fixture
	l       *limitListener
	arrived chan struct{} // a /block request reached the connector

	release     chan struct{} // closed: every /block request answers
	releaseOnce sync.Once

	mu sync.Mutex
	// idle are the connections (by client address) that went back to
	// idle after a request.
	idle map[string]bool
}

func newLimitFixture(t *testing.T, maxConns int) *limitFixture {
	t.Helper()
	lf := &limitFixture{arrived: make(chan struct{}, 64), release: make(chan struct{}), idle: map[string]bool{}}
	a, err := auth.New([]byte(strings.Repeat("k", 32)), "shared-secret")
	if err != nil {
		t.Fatal(err)
	}
	g := New(Options{Auth: a, Heartbeat: time.Hour, RequestTimeout: 10 * time.Second, MaxConns: maxConns, MaxConnsPerIP: -1})
	g.started = g.started.Add(-RestartGrace)
	srv := httptest.NewUnstartedServer(nil)
	srv.Config = g.HTTPServer()
	// The test learns when a connection has gone back to idle, which is
	// when it starts to wait.
	srv.Config.ConnState = func(c net.Conn, s http.ConnState) {
		trackConnState(c, s)
		if s == http.StateIdle {
			lf.mu.Lock()
			lf.idle[c.RemoteAddr().String()] = true
			lf.mu.Unlock()
		}
	}
	srv.Listener = g.Listener(srv.Listener)
	srv.Start()
	t.Cleanup(func() { g.Shutdown(); srv.Close() })
	dash, _ := a.Issue(auth.RoleDashboard, "", time.Hour)
	lf.fixture = &fixture{t: t, auth: a, gw: g, srv: srv, dash: dash}
	lf.l = srv.Listener.(*limitListener)
	t.Cleanup(lf.releaseAll)
	lf.connector("alpha", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		lf.arrived <- struct{}{}
		<-lf.release
		fmt.Fprint(w, "released")
	}))
	return lf
}

// releaseAll answers every /block request, held or to come.
func (lf *limitFixture) releaseAll() { lf.releaseOnce.Do(func() { close(lf.release) }) }

// registered says whether the listener counts the connection whose
// client end is c.
func (lf *limitFixture) registered(c *testConn) bool {
	lf.l.mu.Lock()
	defer lf.l.mu.Unlock()
	for cc := range lf.l.conns {
		if cc.RemoteAddr().String() == c.LocalAddr().String() {
			return true
		}
	}
	return false
}

// testConn is a connection of the test's: br reads it, and peeked is
// closed once something arrived or it was closed (refused, when nothing
// arrived).
type testConn struct {
	net.Conn
	br      *bufio.Reader
	peeked  chan struct{}
	refused atomic.Bool
}

// open dials a connection that does what kind says, and returns once the
// gateway has taken it in (true) or closed it (false).
func (lf *limitFixture) open(kind connKind) (*testConn, bool) {
	t := lf.t
	t.Helper()
	c := &testConn{Conn: lf.dialFrom("127.0.0.1"), peeked: make(chan struct{})}
	c.br = bufio.NewReader(c.Conn)
	var req string
	switch kind {
	case slowHeaders:
		req = "GET /healthz HTTP/1.1\r\nHost: gw\r\n"
	case slowBody:
		req = "POST /api/gateway/login HTTP/1.1\r\nHost: gw\r\nContent-Length: 100\r\n\r\n{"
	case idleConn:
		req = "GET /healthz HTTP/1.1\r\nHost: gw\r\n\r\n"
	case servingConn:
		req = "GET /api/clients/alpha/block HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer " + lf.dash + "\r\n\r\n"
	}
	// Written before the server may have closed it: a refused connection
	// shows below, as a close.
	_, _ = io.WriteString(c, req)
	go func() {
		defer close(c.peeked)
		// A refused connection is closed at once, with nothing said.
		if _, err := c.br.Peek(1); err != nil {
			c.refused.Store(true)
		}
	}()
	if kind == servingConn {
		select {
		case <-lf.arrived:
			return c, true
		case <-c.peeked:
			return c, false
		}
	}
	var admitted bool
	testkit.WaitUntil(t, "the gateway to take in or refuse a "+kind.String()+" connection", func() bool {
		if c.refused.Load() {
			admitted = false
			return true
		}
		admitted = lf.registered(c) && lf.l.count() <= lf.l.global
		return admitted
	})
	if kind == idleConn && admitted {
		// Its request answered, it waits for the next from now.
		testkit.WaitUntil(t, "the idle connection to wait", func() bool {
			lf.mu.Lock()
			defer lf.mu.Unlock()
			return lf.idle[c.LocalAddr().String()]
		})
	}
	return c, admitted
}

// At the global limit, each new connection displaces the one that has
// waited longest on its client — slow headers, a slow body, an idle
// keep-alive — in any mix, and never one being served (a proxied request
// in flight, the connector's tunnel); when all are served, the new one
// is refused. /healthz is served at the limit whatever holds it.
func TestTheGlobalLimitShedsTheLongestWaiting(t *testing.T) {
	t.Parallel()
	for round := range 3 {
		t.Run(fmt.Sprint(round), func(t *testing.T) {
			t.Parallel()
			const limit = 6
			lf := newLimitFixture(t, limit)
			rng := rand.New(rand.NewPCG(uint64(round), 42))
			type held struct {
				c    *testConn
				kind connKind
			}
			// open are the test's connections the gateway holds, oldest
			// first among the waiting ones (the tunnel is one more).
			var open []held
			serving, shed, refused := 1, 0, 0
			for step := range 30 {
				kind := connKind(rng.IntN(4))
				waitingBefore := -1
				for i, h := range open {
					if h.kind.waits() {
						waitingBefore = i
						break
					}
				}
				full := len(open)+1 >= limit
				c, admitted := lf.open(kind)
				switch {
				case full && waitingBefore < 0:
					if admitted {
						t.Fatalf("step %d: a %s connection was let in with all %d being served", step, kind, limit)
					}
					refused++
					continue
				case !admitted:
					t.Fatalf("step %d: a %s connection was refused with %d open, %d of them served", step, kind, len(open)+1, serving)
				case full:
					victim := open[waitingBefore]
					if lf.registered(victim.c) {
						t.Fatalf("step %d: the %s connection waiting longest is still open at the limit", step, victim.kind)
					}
					open = append(open[:waitingBefore], open[waitingBefore+1:]...)
					shed++
				}
				for _, h := range open {
					if !lf.registered(h.c) {
						t.Fatalf("step %d: a %s connection was closed, not the one waiting longest", step, h.kind)
					}
				}
				open = append(open, held{c, kind})
				if kind == servingConn {
					serving++
				}
				if n := lf.l.count(); n > limit {
					t.Fatalf("step %d: %d connections open, limit %d", step, n, limit)
				}
			}
			t.Logf("%d connections shed, %d refused", shed, refused)
			if shed == 0 {
				t.Fatal("nothing was shed: the test proves nothing")
			}
			// Whatever holds the slots, a probe gets through while one waits.
			if serving < limit {
				c, admitted := lf.open(idleConn)
				if !admitted {
					t.Fatal("/healthz was refused at the limit")
				}
				_ = c.Close()
			}
			// Every request being served is answered: none was cut.
			lf.releaseAll()
			for _, h := range open {
				if h.kind != servingConn {
					continue
				}
				<-h.c.peeked
				resp, err := http.ReadResponse(h.c.br, nil)
				if err != nil {
					t.Fatalf("a served request was cut: %v", err)
				}
				body, _ := io.ReadAll(io.LimitReader(resp.Body, 100))
				if resp.StatusCode != 200 || !strings.Contains(string(body), "released") {
					t.Fatalf("a served request got %d %q", resp.StatusCode, body)
				}
			}
			if resp, body := lf.do("GET", "/api/clients/alpha/block", lf.dash, nil); resp.StatusCode != 200 {
				t.Fatalf("the connector after the flood: %d %s", resp.StatusCode, body)
			}
		})
	}
}

// emfileListener fails, once armed, the accepts after the next one as a
// process out of descriptors does.
type emfileListener struct {
	net.Listener
	armed atomic.Int32 // failures to come after the next accept
	fail  atomic.Int32
}

func (l *emfileListener) Accept() (net.Conn, error) {
	if l.fail.Add(-1) >= 0 {
		return nil, &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	}
	c, err := l.Listener.Accept()
	l.fail.Store(l.armed.Swap(0))
	return c, err
}

// Out of descriptors, accepting frees one by closing the connection
// waiting longest on its client, and pauses, longer each time, before it
// tries again instead of spinning; then the next connection is served.
func TestOutOfDescriptorsShedsAWaitingConnectionAndPauses(t *testing.T) {
	t.Parallel()
	a, err := auth.New([]byte(strings.Repeat("k", 32)), "")
	if err != nil {
		t.Fatal(err)
	}
	var logs testkit.Buffer
	g := New(Options{Auth: a, Heartbeat: time.Hour, MaxConnsPerIP: -1, Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	el := &emfileListener{Listener: inner}
	srv := httptest.NewUnstartedServer(nil)
	_ = srv.Listener.Close() // replaced by the failing one
	srv.Listener = g.Listener(el)
	srv.Config = g.HTTPServer()
	srv.Start()
	t.Cleanup(func() { g.Shutdown(); srv.Close() })
	lf := &limitFixture{fixture: &fixture{t: t, auth: a, gw: g, srv: srv}, l: srv.Listener.(*limitListener), idle: map[string]bool{}}

	const failures = 4
	el.armed.Store(failures)
	// Taken in, then closed at the first failure: the only connection
	// waiting.
	slow := lf.dialFrom("127.0.0.1")
	sendRaw(t, slow, "GET /healthz HTTP/1.1\r\n")
	if got := closedByServer(t, slow, "the connection waiting on its client"); got != "" {
		t.Fatalf("the slow connection got %q", got)
	}
	if resp, body := lf.do("GET", "/healthz", "", nil); resp.StatusCode != 200 {
		t.Fatalf("/healthz after the failed accepts: %d %s", resp.StatusCode, body)
	}
	if _, metrics := lf.do("GET", "/metrics", "", nil); !strings.Contains(metrics, "uncaged_gateway_accept_errors_total 4\n") ||
		!strings.Contains(metrics, "uncaged_gateway_connections_shed_total 1\n") {
		t.Fatal("the failed accepts and the shed connection are not counted")
	}
	var pauses []string
	for _, l := range strings.Split(logs.String(), "\n") {
		var line struct {
			Msg     string
			RetryIn string `json:"retry_in"`
		}
		if json.Unmarshal([]byte(l), &line) == nil && line.Msg == "accept failed: out of file descriptors" {
			pauses = append(pauses, line.RetryIn)
		}
	}
	if got := strings.Join(pauses, " "); got != "5ms 10ms 20ms 40ms" {
		t.Fatalf("pauses after the failed accepts: %q", got)
	}
}
