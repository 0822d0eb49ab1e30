package loadgen

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/uncaged/workflow/connector/api"
	"github.com/uncaged/workflow/shared/fleet"
)

func TestParseStat(t *testing.T) {
	// Field 2 may hold spaces and parentheses; utime 250 and stime 50
	// ticks are 3 s.
	stat := "1234 (odd) name) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 8 0 100 1000 50"
	got, err := parseStat([]byte(stat))
	if err != nil || got != 3*time.Second {
		t.Fatalf("parseStat = %v, %v", got, err)
	}
	for _, bad := range []string{"", "1234 no-parenthesis S 1", "1 (x) S 1 2", "1 (x) S 1 1 1 0 -1 0 0 0 0 0 ten 50", "1 (x) S 1 1 1 0 -1 0 0 0 0 0 -5 50"} {
		if _, err := parseStat([]byte(bad)); err == nil {
			t.Errorf("parseStat(%q) accepted", bad)
		}
	}
}

func TestParseStatus(t *testing.T) {
	status := "Name:\tx\nVmHWM:\t  2048 kB\nVmRSS:\t  1024 kB\nThreads:\t3\n"
	rss, peak, err := parseStatus([]byte(status))
	if err != nil || rss != 1<<20 || peak != 2<<20 {
		t.Fatalf("parseStatus = %d, %d, %v", rss, peak, err)
	}
	for _, bad := range []string{"", "VmRSS:\t1 kB\n", "VmRSS:\tlots kB\nVmHWM:\t1 kB\n", "VmRSS:\t1 MB\nVmHWM:\t1 kB\n", "VmRSS:\t-1 kB\nVmHWM:\t1 kB\n"} {
		if _, _, err := parseStatus([]byte(bad)); err == nil {
			t.Errorf("parseStatus(%q) accepted", bad)
		}
	}
}

func TestProcReadingsOfThisProcess(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	if _, err := CPUTime(os.Getpid()); err != nil {
		t.Fatal(err)
	}
	rss, peak, err := Memory(os.Getpid())
	if err != nil || rss <= 0 || peak < rss {
		t.Fatalf("Memory = %d, %d, %v", rss, peak, err)
	}
	if _, err := CPUTime(-1); err == nil {
		t.Fatal("CPUTime of no process succeeded")
	}
}

func TestSummarize(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var samples []Sample
	for i := 1; i <= 100; i++ {
		samples = append(samples, Sample{Name: "a", Start: t0, End: t0.Add(time.Duration(i) * time.Millisecond)})
	}
	samples = append(samples,
		Sample{Name: "b", Start: t0, End: t0.Add(time.Hour), Kind: KindTimeout},
		Sample{Name: "b", Start: t0, End: t0, Kind: KindRefused},
		Sample{Name: "b", Start: t0, End: t0, Kind: KindRefused})
	st := Summarize(samples, nil, 10*time.Second)
	if st.Requests != 103 || st.Errors != 3 || st.P50 != 51*time.Millisecond || st.P99 != 100*time.Millisecond || st.Max != 100*time.Millisecond || st.Rate != 10 {
		t.Fatalf("stats: %+v", st)
	}
	if got := st.Kinds(); got != "conn-refused 2, timeout 1" {
		t.Fatalf("kinds: %q", got)
	}
	if got := Summarize(nil, nil, 0); got.Requests != 0 || got.P99 != 0 || got.Kinds() != "none" {
		t.Fatalf("empty: %+v", got)
	}
	onlyB := Summarize(samples, func(s Sample) bool { return s.Name == "b" }, 0)
	if onlyB.Requests != 3 || onlyB.Errors != 3 {
		t.Fatalf("filtered: %+v", onlyB)
	}
}

func TestWindowOverlaps(t *testing.T) {
	t0 := time.Unix(1000, 0)
	w := Window{From: t0.Add(10 * time.Second), To: t0.Add(20 * time.Second)}
	at := func(from, to int) Sample {
		return Sample{Start: t0.Add(time.Duration(from) * time.Second), End: t0.Add(time.Duration(to) * time.Second)}
	}
	for s, want := range map[Sample]bool{at(0, 5): false, at(5, 10): true, at(5, 15): true, at(12, 13): true, at(19, 30): true, at(20, 21): true, at(21, 30): false} {
		if w.Overlaps(s) != want {
			t.Errorf("%v..%v: overlaps %v", s.Start.Sub(t0), s.End.Sub(t0), !want)
		}
	}
}

func TestClassify(t *testing.T) {
	cases := map[error]string{
		context.DeadlineExceeded:                     KindTimeout,
		fmt.Errorf("dial: %w", syscall.ECONNREFUSED): KindRefused,
		fmt.Errorf("read: %w", syscall.ECONNRESET):   KindReset,
		io.ErrUnexpectedEOF:                          KindReset,
		errors.New("something else"):                 KindTransport,
	}
	for err, want := range cases {
		if got := classify(err); got != want {
			t.Errorf("classify(%v) = %s, want %s", err, got, want)
		}
	}
}

func TestHandlerIsDeterministic(t *testing.T) {
	var served atomic.Int64
	srv := httptest.NewServer(Handler("laptop", &served))
	defer srv.Close()
	get := func(path string) (int, string) {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get(LoadPath + "?seq=7"); code != 200 || body != ExpectedBody("laptop", "7") || body == ExpectedBody("other", "7") {
		t.Fatalf("load: %d %s", code, body)
	}
	if code, _ := get("/api/other"); code != 404 {
		t.Fatalf("unknown route: %d", code)
	}
	if served.Load() != 1 {
		t.Fatalf("served %d", served.Load())
	}
}

// TestBalancerSkipsADeadBackend spreads connections over two backends and
// keeps working when one of them goes away.
func TestBalancerSkipsADeadBackend(t *testing.T) {
	backend := func(name string) *httptest.Server {
		return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, name) }))
	}
	a, b := backend("a"), backend("b")
	defer b.Close()
	lb, err := NewBalancer([]string{a.Listener.Addr().String(), b.Listener.Addr().String()})
	if err != nil {
		t.Fatal(err)
	}
	defer lb.Close()
	get := func() string {
		// A new connection each time, so each is balanced.
		c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
		resp, err := c.Get("http://" + lb.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return string(body)
	}
	seen := map[string]int{}
	for range 4 {
		seen[get()]++
	}
	if seen["a"] != 2 || seen["b"] != 2 {
		t.Fatalf("round robin: %v", seen)
	}
	a.Close()
	for range 4 {
		if got := get(); got != "b" {
			t.Fatalf("after a died: %q", got)
		}
	}
}

func TestBalancerWithNoBackendClosesTheConnection(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	lb, err := NewBalancer([]string{dead})
	if err != nil {
		t.Fatal(err)
	}
	defer lb.Close()
	c, err := net.Dial("tcp", lb.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	}()
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatal("read from a balancer with no backend succeeded")
	}
}

// fakeGateway answers /api/clients/<name>/load as that connector would,
// through answer (nil: correctly).
func fakeGateway(t *testing.T, answer func(w http.ResponseWriter, name, seq string)) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer dash" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		name, _ := strings.CutSuffix(strings.TrimPrefix(r.URL.Path, "/api/clients/"), "/load")
		if answer == nil {
			fmt.Fprint(w, ExpectedBody(name, r.URL.Query().Get("seq")))
			return
		}
		answer(w, name, r.URL.Query().Get("seq"))
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestDriveSendsTheOfferedLoadAndChecksAnswers(t *testing.T) {
	srv := fakeGateway(t, nil)
	var observed atomic.Int64
	run := Drive(context.Background(), DriveOptions{Gateway: srv.URL, Token: "dash", Names: []string{"a", "b"}, Rate: 20, Duration: 500 * time.Millisecond,
		Observe: func(Sample) { observed.Add(1) }})
	st := Summarize(run.Samples, nil, 0)
	// 20/s for 0.5 s: 10 requests to each connector, whatever the timing.
	if st.Requests != 20 || st.Errors != 0 || observed.Load() != 20 {
		t.Fatalf("run: %+v (%s), observed %d", st, st.Kinds(), observed.Load())
	}

	misrouted := fakeGateway(t, func(w http.ResponseWriter, name, seq string) { fmt.Fprint(w, ExpectedBody("other", seq)) })
	run = Drive(context.Background(), DriveOptions{Gateway: misrouted.URL, Token: "dash", Names: []string{"a"}, Rate: 10, Duration: 300 * time.Millisecond})
	if st := Summarize(run.Samples, nil, 0); st.Requests != 3 || st.ByKind[KindWrongBody] != 3 {
		t.Fatalf("misrouted: %+v", st)
	}
	failing := fakeGateway(t, func(w http.ResponseWriter, _, _ string) { w.WriteHeader(http.StatusServiceUnavailable) })
	run = Drive(context.Background(), DriveOptions{Gateway: failing.URL, Token: "dash", Names: []string{"a"}, Rate: 10, Duration: 300 * time.Millisecond})
	if st := Summarize(run.Samples, nil, 0); st.ByKind["http-503"] != 3 {
		t.Fatalf("503s: %+v", st)
	}
}

func TestDriveShedsBeyondMaxInFlightAndTimesOut(t *testing.T) {
	release := make(chan struct{})
	stuck := fakeGateway(t, func(w http.ResponseWriter, _, _ string) { <-release })
	defer close(release)
	// One request may be outstanding; it never gets an answer and times
	// out, and the others due meanwhile are not sent.
	run := Drive(context.Background(), DriveOptions{Gateway: stuck.URL, Token: "dash", Names: []string{"a"}, Rate: 10, Duration: 500 * time.Millisecond,
		Timeout: time.Second, MaxInFlight: 1})
	st := Summarize(run.Samples, nil, 0)
	if st.Requests != 5 || st.ByKind[KindTimeout] != 1 || st.ByKind[KindShed] != 4 {
		t.Fatalf("stuck gateway: %+v (%s)", st, st.Kinds())
	}
}

// The simulated connector's change stream reads as a real connector's with
// no threads (reset, then synced) and pings as often as a real one, so the
// gateway's fleet reader costs in a load test what it costs in production.
func TestHandlerServesAnIdleChangeStream(t *testing.T) {
	t.Parallel()
	if LivePing != api.DefaultLivePing {
		t.Fatalf("LivePing %v, the connector pings every %v", LivePing, api.DefaultLivePing)
	}
	srv := httptest.NewServer(Handler("m", new(atomic.Int64)))
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+fleet.EventsPath, nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if ct := res.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	d := fleet.NewDecoder(res.Body)
	var names []string
	for range 2 {
		ev, err := d.Next()
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, ev.Name)
		if ev.Name == fleet.EventReset {
			var r fleet.Reset
			if err := json.Unmarshal(ev.Data, &r); err != nil || r.Instance == "" {
				t.Fatalf("reset %s: %v", ev.Data, err)
			}
		}
	}
	if strings.Join(names, ",") != fleet.EventReset+","+fleet.EventSynced {
		t.Fatalf("events %v, want reset then synced", names)
	}
}
