package cluster

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/uncaged/workflow/gateway/internal/eventstream"
	"github.com/uncaged/workflow/shared/testkit"
	"github.com/uncaged/workflow/shared/tunnel"
)

// pair is two replicas' clusters sharing a key (not joined to NATS:
// forwarding needs none of it).
func pair(t testing.TB) (from, to *Cluster) {
	t.Helper()
	mk := func(id string) *Cluster {
		c, err := New(Options{NATS: "nats://127.0.0.1:1", ReplicaID: id, Advertise: "http://127.0.0.1:1", Key: testKey})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	return mk("r1"), mk("r2")
}

// h2cServer serves h the way a replica does: HTTP/1 and unencrypted HTTP/2.
func h2cServer(t testing.TB, h http.Handler) *httptest.Server {
	srv := httptest.NewUnstartedServer(h)
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetHTTP1(true)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

// front is the replica a dashboard request lands on: it forwards
// everything to route, within timeout when one is given.
func front(t *testing.T, c *Cluster, route Route, timeout time.Duration) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if timeout > 0 {
			ctx, cancel := context.WithTimeout(r.Context(), timeout)
			defer cancel()
			r = r.WithContext(ctx)
		}
		c.Forward(w, r, route)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestForwardStreamsOverHTTP2WithASignedHop(t *testing.T) {
	t.Parallel()
	from, to := pair(t)
	type seen struct {
		proto, auth, hopFrom, hopErr, path string
	}
	arrived := make(chan seen, 1)
	handlerDone := make(chan struct{})
	release := make(chan struct{})
	peer := h2cServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer close(handlerDone)
		s := seen{proto: r.Proto, auth: r.Header.Get("Authorization"), path: r.URL.RequestURI()}
		if id, err := to.VerifyHop(r); err != nil {
			s.hopErr = err.Error()
		} else {
			s.hopFrom = id
		}
		arrived <- s
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: first\n\n") // the client checks what arrives
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done(): // the dashboard went away
		}
	}))
	fr := front(t, from, Route{Replica: "r2", Advertise: peer.URL, Online: true}, 0)

	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", fr.URL+"/api/clients/laptop/threads/x/live?since=3", nil)
	req.Header.Set("Authorization", "Bearer dashboard-token")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	s := <-arrived
	if s.proto != "HTTP/2.0" || s.auth != "Bearer dashboard-token" || s.hopFrom != "r1" || s.path != "/api/clients/laptop/threads/x/live?since=3" {
		t.Fatalf("the holder saw %+v", s)
	}
	// The first event arrives while the holder's handler still runs.
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || line != "data: first\n" {
		t.Fatalf("first line %q, %v", line, err)
	}
	// Closing the dashboard's request ends the holder's handler.
	cancel()
	<-handlerDone
	if got := counterValue(t, from, resultOK); got != 1 {
		t.Fatalf("forwarded ok = %v", got)
	}
}

// A replica that refuses the connection (killed: nothing listens at its
// address) was never sent the request, whatever its method or body:
// Forward says so, answers nothing, and leaves the body whole for the
// caller to send where the connector went. A replica that took the
// request and then broke may have acted on it: that is a 502, never
// "not sent".
func TestForwardToADeadReplicaSendsNothingAndSaysSo(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	breaking := h2cServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body) // took it all, then died
		panic(http.ErrAbortHandler)
	}))
	for _, tc := range []struct {
		method, body string
	}{
		{"GET", ""}, {"DELETE", ""}, {"POST", `{"workflow":"w"}`}, {"PUT", strings.Repeat("x", 1<<20)}, {"PATCH", "{}"},
	} {
		t.Run(tc.method, func(t *testing.T) {
			from, _ := pair(t)
			var reached bool
			var after string
			fr := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				reached = from.Forward(w, r, Route{Replica: "r2", Advertise: dead, Online: true}) == Answered
				b, _ := io.ReadAll(r.Body)
				after = string(b)
				w.WriteHeader(299) // what the caller answers instead
			}))
			defer fr.Close()
			req, _ := http.NewRequest(tc.method, fr.URL+"/api/clients/laptop/threads", strings.NewReader(tc.body))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if reached || resp.StatusCode != 299 || after != tc.body {
				t.Fatalf("reached %v, status %d, body left %d of %d bytes", reached, resp.StatusCode, len(after), len(tc.body))
			}
			if got := counterValue(t, from, resultUnreached); got != 1 {
				t.Fatalf("forwards unreached = %v", got)
			}
			if got := counterValue(t, from, resultError); got != 0 {
				t.Fatalf("forward errors = %v", got)
			}

			// Sent, then the holder broke.
			from, _ = pair(t)
			fr2 := front(t, from, Route{Replica: "r2", Advertise: breaking.URL, Online: true}, 5*time.Second)
			req, _ = http.NewRequest(tc.method, fr2.URL+"/api/clients/laptop/threads", strings.NewReader(tc.body))
			resp, err = http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusBadGateway || !strings.Contains(string(body), `"error":"replica r2 holding the connector is unreachable`) {
				t.Fatalf("a holder that broke after taking the request: %d %s", resp.StatusCode, body)
			}
			if got := counterValue(t, from, resultError); got != 1 {
				t.Fatalf("forward errors = %v", got)
			}
		})
	}
}

func TestForwardToASilentReplicaIs504(t *testing.T) {
	t.Parallel()
	from, _ := pair(t)
	peer := h2cServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
	fr := front(t, from, Route{Replica: "r2", Advertise: peer.URL, Online: true}, 100*time.Millisecond)
	resp, err := http.Get(fr.URL + "/api/clients/laptop/workflows")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusGatewayTimeout || !strings.Contains(string(body), "did not answer in time") {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
}

func TestVerifyHopRefusesForgeries(t *testing.T) {
	t.Parallel()
	from, to := pair(t)
	now := time.Now()
	other, _ := New(Options{NATS: "x", ReplicaID: "r1", Advertise: "http://a:1", Key: []byte(strings.Repeat("z", 32))})
	good := from.hop("GET", "/api/clients/laptop/workflows", "", now)
	for name, c := range map[string]struct{ header, method, path string }{
		"empty":        {"", "GET", "/api/clients/laptop/workflows"},
		"garbage":      {"hello", "GET", "/api/clients/laptop/workflows"},
		"no replica":   {strings.TrimSuffix(good, "r1"), "GET", "/api/clients/laptop/workflows"},
		"bad time":     {"x" + good, "GET", "/api/clients/laptop/workflows"},
		"stale":        {from.hop("GET", "/api/clients/laptop/workflows", "", now.Add(-time.Hour)), "GET", "/api/clients/laptop/workflows"},
		"other path":   {good, "GET", "/api/clients/laptop/threads"},
		"other method": {good, "DELETE", "/api/clients/laptop/workflows"},
		"other key":    {other.hop("GET", "/api/clients/laptop/workflows", "", now), "GET", "/api/clients/laptop/workflows"},
		"renamed":      {strings.TrimSuffix(good, "r1") + "r3", "GET", "/api/clients/laptop/workflows"},
	} {
		r := httptest.NewRequest(c.method, c.path, nil)
		if c.header != "" {
			r.Header.Set(HopHeader, c.header)
		}
		if id, err := to.VerifyHop(r); err == nil {
			t.Errorf("%s: accepted as from %q", name, id)
		}
	}
	r := httptest.NewRequest("GET", "/api/clients/laptop/workflows", nil)
	r.Header.Set(HopHeader, good)
	if id, err := to.VerifyHop(r); err != nil || id != "r1" {
		t.Fatalf("genuine hop: %q %v", id, err)
	}
}

// counterValue reads the forwarded-requests counter for result.
func counterValue(t *testing.T, c *Cluster, result string) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.forwarded.WithLabelValues(result).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// BenchmarkForward is one small forwarded request, front replica to the
// holder over the shared HTTP/2 connection, many at once: its CPU and
// allocations per request, and with -mutexprofile/-blockprofile where
// forwarding waits.
func BenchmarkForward(b *testing.B) {
	from, to := pair(b)
	peer := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := to.VerifyHop(r); err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"ok":true}`) // the client checks the status
	}))
	peer.Config.Protocols = new(http.Protocols)
	peer.Config.Protocols.SetHTTP1(true)
	peer.Config.Protocols.SetUnencryptedHTTP2(true)
	peer.Start()
	defer peer.Close()
	route := Route{Replica: "r2", Advertise: peer.URL, Online: true}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { from.Forward(w, r, route) }))
	defer srv.Close()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
	b.ReportAllocs()
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			resp, err := client.Get(srv.URL + "/api/clients/laptop/workflows")
			if err != nil {
				b.Error(err)
				return
			}
			_, err = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if err != nil {
				b.Error(err)
				return
			}
			if resp.StatusCode != http.StatusOK {
				b.Errorf("status %d", resp.StatusCode)
				return
			}
		}
	})
}

// BenchmarkForwardBody is a forwarded POST of a small JSON body (a thread
// start) and of a 64 KiB one, with its body kept to be sent again
// (Replayable, as the gateway forwards) against one that is not: what
// keeping the body costs a forward, as a ratio within the same run.
func BenchmarkForwardBody(b *testing.B) {
	from, to := pair(b)
	peer := h2cServer(b, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := to.VerifyHop(r); err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, `{"threadId":"t"}`)
	}))
	route := Route{Replica: "r2", Advertise: peer.URL, Online: true}
	for _, size := range []int{200, 64 << 10} {
		body := strings.Repeat("x", size)
		for _, keep := range []bool{false, true} {
			name := fmt.Sprintf("%dB/kept=%v", size, keep)
			b.Run(name, func(b *testing.B) {
				srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if keep {
						defer Replayable(r).Release() // as the gateway does once it has answered
					}
					from.Forward(w, r, route)
				}))
				defer srv.Close()
				client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
				b.ReportAllocs()
				b.SetBytes(int64(size))
				b.SetParallelism(4)
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						resp, err := client.Post(srv.URL+"/api/clients/laptop/threads", "application/json", strings.NewReader(body))
						if err != nil {
							b.Error(err)
							return
						}
						_, _ = io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						if resp.StatusCode != http.StatusOK {
							b.Errorf("status %d", resp.StatusCode)
							return
						}
					}
				})
			})
		}
	}
}

// A stream forwarded to another replica ends at an event's end when the
// gateway's streams end (a stop): the dashboard gets every event whole and
// a clean end, and the holder's handler hears the hop go.
func TestAForwardedStreamEndsCleanlyWhenTheStreamsEnd(t *testing.T) {
	t.Parallel()
	streams := eventstream.NewSet()
	from, err := New(Options{NATS: "nats://127.0.0.1:1", ReplicaID: "r1", Advertise: "http://127.0.0.1:1", Key: testKey, Streams: streams})
	if err != nil {
		t.Fatal(err)
	}
	handlerDone := make(chan struct{})
	peer := h2cServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer close(handlerDone)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "id: 1\ndata: first\n\n") // the client checks what arrives
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	fr := front(t, from, Route{Replica: "r2", Advertise: peer.URL, Online: true}, 0)
	resp, err := http.Get(fr.URL + "/api/clients/laptop/threads/x/live")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	r := bufio.NewReader(resp.Body)
	if line, err := r.ReadString('\n'); err != nil || line != "id: 1\n" {
		t.Fatalf("first line %q, %v", line, err)
	}
	if open := streams.End(context.Background()); open != 0 {
		t.Fatalf("%d streams still open", open)
	}
	rest, err := io.ReadAll(r)
	if err != nil || string(rest) != "data: first\n\n" {
		t.Fatalf("the stream ended with %q, %v", rest, err)
	}
	<-handlerDone
}

// The forwarding proxy's own lines (a forwarded answer that broke
// midway) go to the cluster's logger, as JSON, never to the standard
// log package's plain lines.
func TestTheForwardingProxyLogsThroughTheLogger(t *testing.T) {
	t.Parallel()
	var logs testkit.Buffer
	from, err := New(Options{NATS: "nats://127.0.0.1:1", ReplicaID: "r1", Advertise: "http://127.0.0.1:1", Key: testKey,
		Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	peer := h2cServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "half of it") // then the holder breaks
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler)
	}))
	fr := front(t, from, Route{Replica: "r2", Advertise: peer.URL, Online: true}, 0)
	resp, err := http.Get(fr.URL + "/api/clients/laptop/files/x")
	if err == nil {
		_, _ = io.Copy(io.Discard, resp.Body) // broken, as the holder's answer was
		resp.Body.Close()
	}
	testkit.WaitUntil(t, "the proxy's line in the log", func() bool { return strings.Contains(logs.String(), "ReverseProxy read error") })
	for line := range strings.SplitSeq(strings.TrimSpace(logs.String()), "\n") {
		var l struct{ Level, Msg string }
		if err := json.Unmarshal([]byte(line), &l); err != nil || l.Level != "WARN" {
			t.Fatalf("not a JSON warning: %q (%v)", line, err)
		}
	}
}

// The hop covers who made the request: the user the entering replica
// named verifies only with that user, under no spelling of the header
// can another be added, and a hop for no user does not take one.
func TestVerifyHopCoversTheUser(t *testing.T) {
	t.Parallel()
	from, to := pair(t)
	now := time.Now()
	const path = "/api/clients/laptop/threads/t1/answer"
	withAnn := from.hop("POST", path, "ann", now)
	noUser := from.hop("POST", path, "", now)
	for _, c := range []struct {
		name, hop string
		headers   map[string][]string
		ok        bool
	}{
		{"the user it was signed for", withAnn, map[string][]string{tunnel.UserHeader: {"ann"}}, true},
		{"no user, signed for none", noUser, nil, true},
		{"another user", withAnn, map[string][]string{tunnel.UserHeader: {"mallory"}}, false},
		{"the user dropped", withAnn, nil, false},
		{"a user added to a hop for none", noUser, map[string][]string{tunnel.UserHeader: {"mallory"}}, false},
		{"a second value", withAnn, map[string][]string{tunnel.UserHeader: {"ann", "mallory"}}, false},
		{"another spelling added", withAnn, map[string][]string{tunnel.UserHeader: {"ann"}, "X-Uncaged_user": {"mallory"}}, false},
		{"another spelling alone", noUser, map[string][]string{"X-UNCAGED_USER": {"mallory"}}, false},
	} {
		r := httptest.NewRequest("POST", path, nil)
		r.Header.Set(HopHeader, c.hop)
		for k, v := range c.headers {
			r.Header[k] = v
		}
		if _, err := to.VerifyHop(r); (err == nil) != c.ok {
			t.Errorf("%s: VerifyHop = %v, want ok %v", c.name, err, c.ok)
		}
	}
}
