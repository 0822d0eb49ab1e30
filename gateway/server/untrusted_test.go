package server

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/uncaged/workflow/gateway/auth"
	"github.com/uncaged/workflow/shared/logging"
	"github.com/uncaged/workflow/shared/testkit"
)

// untrustedBurst is the lines per key the tests below allow.
const untrustedBurst = 5

// newLimitLoggedFixture is a served fixture logging JSON to logs, its rate
// limit at untrustedBurst lines per key per hour.
func newLimitLoggedFixture(t *testing.T, logs *testkit.Buffer, mutate ...func(*Options)) *fixture {
	t.Helper()
	logger := slog.New(slog.NewJSONHandler(logs, nil))
	return newServedFixture(t, append([]func(*Options){func(o *Options) {
		o.Logger = logger
		o.limited = logging.NewLimited(logger.Handler(), logging.LimitOptions{Burst: untrustedBurst, Interval: time.Hour})
	}}, mutate...)...)
}

// logEvents reads uncaged_gateway_log_events_total from /metrics, by
// message.
func logEvents(t *testing.T, f *fixture) map[string]int {
	t.Helper()
	resp, body := f.do("GET", "/metrics", "", nil)
	if resp.StatusCode != 200 {
		t.Fatalf("/metrics: %d", resp.StatusCode)
	}
	out := map[string]int{}
	for _, m := range regexp.MustCompile(`(?m)^uncaged_gateway_log_events_total\{message="([^"]*)"\} (\d+)$`).FindAllStringSubmatch(body, -1) {
		n, _ := strconv.Atoi(m[2])
		out[m[1]] = n
	}
	return out
}

// logLines counts the log's lines by message.
func logLines(t *testing.T, logs *testkit.Buffer) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		if l == "" {
			continue
		}
		var m struct {
			Msg    string
			Status int
		}
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		key := m.Msg
		if m.Msg == "request" {
			key = fmt.Sprintf("request %d", m.Status)
		}
		out[key]++
	}
	return out
}

// rawRequest sends s on a new connection and reads the answer (or the
// close) to its end.
func rawRequest(t *testing.T, f *fixture, s string) string {
	t.Helper()
	c := f.dialFrom("127.0.0.1")
	_, _ = io.WriteString(c, s) // a refused connection shows as an empty answer
	return closedByServer(t, c, "a request")
}

// Every log line a client without a credential can cause is rate-limited:
// fired many times, each trigger writes at most the burst of lines, and
// /metrics counts every event.
func TestUntrustedLogLinesAreBoundedAndCounted(t *testing.T) {
	t.Parallel()
	const n = 60
	for _, tc := range []struct {
		name   string
		mutate func(*Options)
		fire   func(t *testing.T, f *fixture)
		want   map[string]int // events by key, at least
	}{
		{"a connector with a bad token", func(o *Options) { o.ConnectRate = -1 }, func(t *testing.T, f *fixture) {
			for range n {
				rawRequest(t, f, "GET /ws/connect?name=laptop HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer nope\r\nConnection: close\r\n\r\n")
			}
		}, map[string]int{"connector refused": n, "request 401": n}},
		{"connect attempts over the rate limit", func(o *Options) { o.ConnectRate, o.ConnectBurst = 1, 1 }, func(t *testing.T, f *fixture) {
			for range n {
				rawRequest(t, f, "GET /ws/connect?name=laptop HTTP/1.1\r\nHost: gw\r\nConnection: close\r\n\r\n")
			}
		}, map[string]int{"request 429": n - 1}},
		{"the dashboard's API without a credential", nil, func(t *testing.T, f *fixture) {
			for i := range n {
				credential := ""
				if i%2 == 0 {
					credential = "Authorization: Bearer forged\r\n"
				}
				rawRequest(t, f, "GET /api/gateway/endpoints HTTP/1.1\r\nHost: gw\r\n"+credential+"Connection: close\r\n\r\n")
			}
		}, map[string]int{"request 401": n}},
		{"a path no route serves", nil, func(t *testing.T, f *fixture) {
			for i := range n {
				rawRequest(t, f, fmt.Sprintf("GET /api/nope/%d HTTP/1.1\r\nHost: gw\r\nConnection: close\r\n\r\n", i))
			}
		}, map[string]int{"request 404": n}},
		{"a login that is not JSON", nil, func(t *testing.T, f *fixture) {
			for range n {
				rawRequest(t, f, "POST /api/gateway/login HTTP/1.1\r\nHost: gw\r\nContent-Length: 1\r\nConnection: close\r\n\r\nx")
			}
		}, map[string]int{"request 400": n}},
		{"a cookie from another origin", nil, func(t *testing.T, f *fixture) {
			for range n {
				rawRequest(t, f, "POST /api/clients/alpha/cas HTTP/1.1\r\nHost: gw\r\nOrigin: http://evil.example\r\nCookie: "+auth.CookieName+"="+f.dash+"\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}")
			}
		}, map[string]int{"request 403": n}},
		{"a request that makes a handler panic", nil, func(t *testing.T, f *fixture) {
			f.gw.echo.GET("/panic", func(echo.Context) error { panic("boom") })
			for range n {
				rawRequest(t, f, "GET /panic HTTP/1.1\r\nHost: gw\r\nConnection: close\r\n\r\n")
			}
		}, map[string]int{"panic serving a request": n}},
		{"headers too large", nil, func(t *testing.T, f *fixture) {
			for range n {
				rawRequest(t, f, "GET /healthz HTTP/1.1\r\nHost: gw\r\nX-Big: "+strings.Repeat("a", 1<<20+4096)+"\r\n\r\n")
			}
		}, map[string]int{}},
		{"connections over the per-address limit", func(o *Options) { o.MaxConnsPerIP = 1 }, func(t *testing.T, f *fixture) {
			clientFrom(t, "127.0.0.2") // skips where extra loopback addresses are missing
			held := f.dialFrom("127.0.0.2")
			sendRaw(t, held, "GET /healthz HTTP/1.1\r\nHost: gw\r\n\r\n")
			if _, err := http.ReadResponse(bufio.NewReader(held), nil); err != nil {
				t.Fatal(err)
			}
			for range n {
				c := f.dialFrom("127.0.0.2")
				_, _ = io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: gw\r\n\r\n") // may fail: closed already
				if got := closedByServer(t, c, "a connection over the limit"); got != "" {
					t.Fatalf("a connection over the limit was served: %q", got)
				}
			}
		}, map[string]int{"connection refused: too many open from one address": n}},
		{"connections over the global limit", func(o *Options) { o.MaxConns, o.MaxConnsPerIP = 2, -1 }, func(t *testing.T, f *fixture) {
			l := f.srv.Listener.(*limitListener)
			for range n + 2 {
				c := f.dialFrom("127.0.0.1")
				sendRaw(t, c, "GET /healthz HTTP/1.1\r\n")
				testkit.WaitUntil(t, "the connection to be taken in", func() bool {
					l.mu.Lock()
					defer l.mu.Unlock()
					for cc := range l.conns {
						if cc.RemoteAddr().String() == c.LocalAddr().String() {
							return len(l.conns) <= 2
						}
					}
					return false
				})
			}
		}, map[string]int{"connection closed to make room: too many open connections": n}},
		{"bodies too slow", func(o *Options) { o.BodyTimeout = 50 * time.Millisecond; o.MaxConnsPerIP = -1 }, func(t *testing.T, f *fixture) {
			var wg sync.WaitGroup
			for range n {
				c := f.dialFrom("127.0.0.1")
				sendRaw(t, c, "POST /api/gateway/login HTTP/1.1\r\nHost: gw\r\nContent-Length: 100\r\n\r\n{")
				wg.Go(func() { closedByServer(t, c, "a slow body") })
			}
			wg.Wait()
		}, map[string]int{"request 408": n}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var logs testkit.Buffer
			var mutate []func(*Options)
			if tc.mutate != nil {
				mutate = append(mutate, tc.mutate)
			}
			f := newLimitLoggedFixture(t, &logs, mutate...)
			tc.fire(t, f)
			var events map[string]int
			// The last request's line is written after its answer.
			testkit.WaitUntil(t, "every event counted", func() bool {
				events = logEvents(t, f)
				for key, want := range tc.want {
					if events[key] < want {
						return false
					}
				}
				return true
			})
			lines := logLines(t, &logs)
			total := 0
			for key, count := range lines {
				total += count
				if count > untrustedBurst && key != "request 200" {
					t.Errorf("%q: %d lines written, burst %d (events %d)", key, count, untrustedBurst, events[key])
				}
			}
			if total > 3*untrustedBurst+5 {
				t.Errorf("%d lines written for %d attempts: %v", total, n, lines)
			}
		})
	}
}

// Which request lines the rate limit takes: refusals anywhere, and the
// gateway's own errors outside the proxied routes; never a success, nor a
// connector's own answer to a request the dashboard's credential let
// through.
func TestWhichRequestLinesAreLimited(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		status int
		path   string
		want   bool
	}{
		{200, "/api/gateway/endpoints", false},
		{101, "/ws/connect", false},
		{304, "/assets/app.js", false},
		{401, "/api/gateway/endpoints", true},
		{401, "/api/clients/laptop/threads", true},
		{403, "/api/agents/laptop/threads", true},
		{408, "/api/clients/laptop/cas", true},
		{429, "/ws/connect", true},
		{431, "/", true},
		{400, "/api/gateway/login", true},
		{404, "/api/nope", true},
		{405, "/healthz", true},
		{500, "/api/gateway/threads", true},
		{503, "/readyz", true},
		{404, "/api/clients/laptop/threads/t1", false},
		{400, "/api/clients/laptop/threads", false},
		{502, "/api/clients/laptop/threads", false},
		{504, "/api/agents/laptop/threads", false},
		{503, "/api/clients/laptop/threads", false},
	} {
		if got := refusedBySender(c.status, c.path); got != c.want {
			t.Errorf("%d %s: limited %v, want %v", c.status, c.path, got, c.want)
		}
	}
}
