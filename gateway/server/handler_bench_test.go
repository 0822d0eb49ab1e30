package server

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/uncaged/workflow/gateway/auth"
	"github.com/uncaged/workflow/shared/testkit"
	"github.com/uncaged/workflow/shared/tunnel"
)

// benchWriter is a ResponseWriter that throws the response away but, like
// net/http's own, takes a read deadline, so the middleware runs as it does
// in production.
type benchWriter struct{ h http.Header }

func (w *benchWriter) Header() http.Header              { return w.h }
func (w *benchWriter) Write(p []byte) (int, error)      { return len(p), nil }
func (w *benchWriter) WriteHeader(int)                  {}
func (w *benchWriter) Flush()                           {}
func (w *benchWriter) SetReadDeadline(time.Time) error  { return nil }
func (w *benchWriter) SetWriteDeadline(time.Time) error { return nil }
func (w *benchWriter) reset()                           { clear(w.h) }

// benchGateway is a gateway with connector "alpha" online over a real
// tunnel; the benchmarks call its handler directly, so what they time is
// the gateway's work plus the tunnel's round trip, not an HTTP client's.
func benchGateway(b *testing.B) (http.Handler, string) {
	a, _ := auth.New([]byte(strings.Repeat("k", 32)), "")
	g := New(Options{Auth: a, Heartbeat: time.Hour})
	srv := httptest.NewServer(g.Handler())
	b.Cleanup(srv.Close)
	tok, _ := a.Issue(auth.RoleConnector, "alpha", time.Hour)
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	ws, err := tunnel.Dial(ctx, srv.URL, "alpha", tok, nil)
	if err != nil {
		b.Fatal(err)
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			b.Error(err)
		}
		_, _ = w.Write([]byte("{}")) // the client checks what arrives
	})
	go func() { _ = tunnel.Serve(ctx, ws, h, tunnel.ServeOptions{}) }() // ends with the benchmark
	testkit.WaitUntil(b, "the connector to be online", func() bool { _, online, _ := g.Presence().Get("alpha"); return online })
	dash, _ := a.Issue(auth.RoleDashboard, "", time.Hour)
	return g.Handler(), dash
}

// BenchmarkProxy times proxied requests through the handler: the
// dashboard's GET and POST with a bearer token, and a POST with the
// session cookie from the dashboard's own page.
func BenchmarkProxy(b *testing.B) {
	h, dash := benchGateway(b)
	body := strings.Repeat("x", 100)
	for _, c := range []struct {
		name   string
		method string
		body   bool
		cookie bool
	}{
		{"GET bearer", "GET", false, false},
		{"POST bearer", "POST", true, false},
		{"POST cookie", "POST", true, true},
	} {
		b.Run(c.name, func(b *testing.B) {
			w := &benchWriter{h: http.Header{}}
			b.ReportAllocs()
			for b.Loop() {
				var rd io.Reader
				if c.body {
					rd = strings.NewReader(body)
				}
				r := httptest.NewRequest(c.method, "http://gw.example/api/clients/alpha/threads", rd)
				r.RemoteAddr = "192.0.2.1:41234"
				if c.cookie {
					r.AddCookie(&http.Cookie{Name: auth.CookieName, Value: dash})
					r.Header.Set("Origin", "http://gw.example")
					r.Header.Set("Sec-Fetch-Site", "same-origin")
				} else {
					r.Header.Set("Authorization", "Bearer "+dash)
				}
				w.reset()
				h.ServeHTTP(w, r)
			}
		})
	}
}

// BenchmarkHardening times the per-request pieces the hardening added,
// each alone: where the proxy path spends them, and what they replaced.
func BenchmarkHardening(b *testing.B) {
	trusted, _ := ParseTrustedProxies([]string{"127.0.0.1"})
	proxied := httptest.NewRequest("GET", "/", nil)
	proxied.RemoteAddr = "127.0.0.1:41234"
	proxied.Header.Set("X-Forwarded-For", "203.0.113.66, 198.51.100.7")
	direct := httptest.NewRequest("GET", "/", nil)
	direct.RemoteAddr = "198.51.100.7:41234"
	b.Run("client address, no trusted proxy", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			trustedProxies(nil).clientIP(proxied)
		}
	})
	b.Run("client address, X-Forwarded-For from a trusted proxy", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			trustedProxies(trusted).clientIP(proxied)
		}
	})
	b.Run("client address, before: echo's X-Forwarded-For extractor", func(b *testing.B) {
		extract := echo.ExtractIPFromXFFHeader()
		b.ReportAllocs()
		for b.Loop() {
			extract(proxied)
		}
	})
	cookie := httptest.NewRequest("POST", "http://gw.example/api/clients/a/threads", nil)
	cookie.Header.Set("Sec-Fetch-Site", "same-origin")
	cookie.Header.Set("Origin", "http://gw.example")
	cop := http.NewCrossOriginProtection()
	b.Run("cross-origin check, cookie POST", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := cop.Check(cookie); err != nil {
				b.Fatal(err)
			}
		}
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = client.Close() }()
	conn, err := ln.Accept()
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	b.Run("body deadline: set on a TCP connection, body wrapped", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			d := time.Now().Add(time.Minute)
			if err := conn.SetReadDeadline(d); err != nil {
				b.Fatal(err)
			}
			sinkBody = &deadlineBody{ReadCloser: http.NoBody, deadline: d}
		}
	})
}

var sinkBody io.ReadCloser
