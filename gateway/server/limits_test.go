package server

import (
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"strconv"
	"testing"
	"time"
)

func TestConnectRateLimitPerAddress(t *testing.T) {
	t.Parallel()
	f := newFixture(t, time.Hour, func(o *Options) {
		o.ConnectRate, o.ConnectBurst = 2, 3
		o.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
	})
	attempt := func(ip string) *http.Response {
		req, _ := http.NewRequest("GET", f.srv.URL+"/ws/connect?name=laptop", nil)
		req.Header.Set("X-Forwarded-For", ip) // believed: the peer is a trusted proxy
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	for i := range 3 {
		if resp := attempt("203.0.113.7"); resp.StatusCode != 401 {
			t.Fatalf("attempt %d: %d", i, resp.StatusCode)
		}
	}
	req, _ := http.NewRequest("GET", f.srv.URL+"/ws/connect?name=laptop&secret=shared-secret", nil)
	req.Header.Set("X-Forwarded-For", "203.0.113.7")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var body [256]byte
	n, _ := resp.Body.Read(body[:])
	resp.Body.Close()
	retry, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
	// 2 a minute: the next token is 30 s away.
	if resp.StatusCode != 429 || retry < 29 || retry > 30 || string(body[:n]) != "{\"error\":\"too many connection attempts from this address; retry later\"}\n" {
		t.Fatalf("over the limit: %d Retry-After %q %s", resp.StatusCode, resp.Header.Get("Retry-After"), body[:n])
	}
	// Another address has its own bucket; a real connector still connects.
	if resp := attempt("198.51.100.1"); resp.StatusCode != 401 {
		t.Fatalf("another address: %d", resp.StatusCode)
	}
	f.connector("laptop", echoAPI("laptop"))
}

func TestRateLimiterRefills(t *testing.T) {
	t.Parallel()
	now := time.Unix(1000, 0)
	l := newRateLimiter(60, 2) // one a second
	l.now = func() time.Time { return now }
	for i := range 2 {
		if ok, _ := l.allow("a"); !ok {
			t.Fatalf("burst attempt %d refused", i)
		}
	}
	if ok, wait := l.allow("a"); ok || wait != time.Second {
		t.Fatalf("empty bucket: %v %v", ok, wait)
	}
	now = now.Add(1500 * time.Millisecond)
	if ok, _ := l.allow("a"); !ok {
		t.Fatal("not refilled after 1.5 s")
	}
	if ok, wait := l.allow("a"); ok || wait != 500*time.Millisecond {
		t.Fatalf("half a token: %v %v", ok, wait)
	}
	// Full buckets are forgotten at the next sweep.
	now = now.Add(2 * time.Minute)
	l.allow("b")
	if _, ok := l.buckets["a"]; ok || len(l.buckets) != 1 {
		t.Fatalf("buckets after sweep: %v", l.buckets)
	}
	if ok, _ := (*rateLimiter)(nil).allow("x"); !ok || newRateLimiter(-1, 0) != nil {
		t.Fatal("a negative rate is no limit")
	}
}

func TestConnectorBusy(t *testing.T) {
	t.Parallel()
	f := newFixture(t, time.Hour, func(o *Options) { o.MaxConcurrent = 2 })
	entered := make(chan struct{}, 10)
	release := make(chan struct{})
	f.connector("laptop", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/block" {
			entered <- struct{}{}
			<-release
		}
		fmt.Fprint(w, "ok")
	}))
	a := f.goDo(context.Background(), "GET", "/api/clients/laptop/block", nil)
	b := f.goDo(context.Background(), "GET", "/api/clients/laptop/block", nil)
	<-entered
	<-entered
	resp, body := f.do("GET", "/api/clients/laptop/quick", f.dash, nil)
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") != "1" || body != "{\"error\":\"connector busy: laptop has too many requests in flight\"}\n" {
		t.Fatalf("third request: %d %q %s", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	close(release)
	for _, ch := range []<-chan [2]string{a, b} {
		if r := waitResult(t, ch); r != [2]string{"200", "ok"} {
			t.Fatalf("blocked request: %v", r)
		}
	}
	if resp, body := f.do("GET", "/api/clients/laptop/quick", f.dash, nil); resp.StatusCode != 200 || body != "ok" {
		t.Fatalf("after the others finished: %d %s", resp.StatusCode, body)
	}
}

func TestLegacyConnectorBusyToo(t *testing.T) {
	t.Parallel()
	f := newFixture(t, time.Hour, func(o *Options) { o.MaxConcurrent = 1 })
	ws := f.rawLegacy("old")
	res := f.goDo(context.Background(), "GET", "/api/clients/old/a", nil)
	fr := readFrame(t, ws)
	if resp, body := f.do("GET", "/api/clients/old/b", f.dash, nil); resp.StatusCode != 503 {
		t.Fatalf("second request: %d %s", resp.StatusCode, body)
	}
	writeFrame(t, ws, `{"id":"`+fr.ID+`","status":200,"headers":{},"body":"a"}`)
	if r := waitResult(t, res); r != [2]string{"200", "a"} {
		t.Fatalf("first: %v", r)
	}
}
