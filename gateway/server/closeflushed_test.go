package server

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/uncaged/workflow/gateway/auth"
	"github.com/uncaged/workflow/shared/testkit"
)

// streamEnd is the last line of every answer the flush fixture gives.
const streamEnd = "end\n"

// flushFixture is a gateway's HTTP server and listener over HTTP/2
// without TLS, as replicas speak to each other, serving streams that end
// when the round's end is closed.
type flushFixture struct {
	g      *Gateway
	l      *limitListener
	url    string
	client *http.Client

	mu  sync.Mutex
	end chan struct{}
}

func newFlushFixture(t *testing.T) *flushFixture {
	t.Helper()
	a, err := auth.New([]byte(strings.Repeat("k", 32)), "shared-secret")
	if err != nil {
		t.Fatal(err)
	}
	f := &flushFixture{g: New(Options{Auth: a, Heartbeat: time.Hour, RequestTimeout: 10 * time.Second, MaxConns: 64, MaxConnsPerIP: -1})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := f.g.HTTPServer()
	srv.Protocols = new(http.Protocols)
	srv.Protocols.SetHTTP1(true)
	srv.Protocols.SetUnencryptedHTTP2(true)
	srv.Handler = http.HandlerFunc(f.stream)
	f.l = f.g.Listener(ln).(*limitListener)
	go func() { _ = srv.Serve(f.l) }()
	t.Cleanup(func() { _ = srv.Close(); f.g.Shutdown() })
	f.url = "http://" + ln.Addr().String() + "/stream"
	return f
}

// round begins a round: a fresh client (one connection, every stream on
// it) and a fresh end.
func (f *flushFixture) round(t *testing.T) {
	f.mu.Lock()
	f.end = make(chan struct{})
	f.mu.Unlock()
	tr := &http.Transport{Protocols: new(http.Protocols)}
	tr.Protocols.SetUnencryptedHTTP2(true)
	t.Cleanup(tr.CloseIdleConnections)
	f.client = &http.Client{Transport: tr}
}

// stream writes a few events, flushing each, then waits for the round's
// end and writes its last line.
func (f *flushFixture) stream(w http.ResponseWriter, r *http.Request) {
	if c, body := markServing(r); c != nil {
		defer c.unmarkServing(body)
	}
	f.mu.Lock()
	end := f.end
	f.mu.Unlock()
	for i := range 3 {
		fmt.Fprintf(w, "event %d\n", i)
		w.(http.Flusher).Flush()
	}
	select {
	case <-end:
	case <-r.Context().Done():
		return
	}
	fmt.Fprint(w, streamEnd)
}

// The rule of closeWhenFlushed: a stop closes a connection between
// answers only once each answer's end is written out. Every round opens
// a few streams on one HTTP/2 connection, then ends them and stops the
// listener in a random order and interleaving; each stream must be read
// whole, to its last line, and the connection must then close without the
// server's own shutdown.
func TestAStopClosesAnHTTP2ConnectionOnlyWithItsAnswersWritten(t *testing.T) {
	t.Parallel()
	seed := rand.Uint64()
	rng := rand.New(rand.NewPCG(seed, 7))
	for round := range 30 {
		f := newFlushFixture(t)
		f.round(t)
		streams := 1 + rng.IntN(4)
		bodies := make([]io.ReadCloser, streams)
		for i := range bodies {
			res, err := f.client.Get(f.url)
			if err != nil {
				t.Fatalf("seed %d round %d: %v", seed, round, err)
			}
			if res.ProtoMajor != 2 {
				t.Fatalf("answered over HTTP/%d.%d, want HTTP/2", res.ProtoMajor, res.ProtoMinor)
			}
			bodies[i] = res.Body
		}
		stopFirst := rng.IntN(2) == 0
		spin := rng.IntN(200)
		var wg sync.WaitGroup
		stop := func() { f.g.closeIdleConnections() }
		end := func() { close(f.end) }
		first, second := end, stop
		if stopFirst {
			first, second = stop, end
		}
		wg.Go(first)
		wg.Go(func() {
			for range spin {
				runtime.Gosched()
			}
			second()
		})
		wg.Wait()
		for i, b := range bodies {
			got, err := io.ReadAll(b)
			if err != nil || !strings.HasSuffix(string(got), streamEnd) {
				t.Fatalf("seed %d round %d (stop first %v, spin %d): stream %d of %d broke (%v) rather than ending:\n%s",
					seed, round, stopFirst, spin, i+1, streams, err, got)
			}
			_ = b.Close()
		}
		testkit.WaitUntil(t, "the stopped listener's connection to close", func() bool { return f.l.count() == 0 })
	}
}

// Making room never takes a connection whose answer is not written out:
// which connections count as waiting on their client.
func TestWhatWaitsOnItsClient(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name                                           string
		multiplexed, idle, unflushed, hijacked, closed bool
		serving                                        int32
		want                                           bool
	}{
		{name: "HTTP/1 between requests", idle: true, want: true},
		{name: "HTTP/1 reading headers", want: true},
		{name: "HTTP/1 in a handler", serving: 1},
		{name: "a WebSocket", hijacked: true},
		{name: "closed", idle: true, closed: true},
		{name: "HTTP/2 idle, written out", multiplexed: true, idle: true, want: true},
		{name: "HTTP/2 idle, its last answer's end in the buffer", multiplexed: true, idle: true, unflushed: true},
		{name: "HTTP/2 after its handlers returned, not idle yet", multiplexed: true},
		{name: "HTTP/2 in a handler", multiplexed: true, serving: 2},
	} {
		cc := &countedConn{}
		cc.multiplexed.Store(c.multiplexed)
		cc.idle.Store(c.idle)
		cc.unflushed.Store(c.unflushed)
		cc.hijacked.Store(c.hijacked)
		cc.closed.Store(c.closed)
		cc.serving.Store(c.serving)
		if got := cc.waiting(); got != c.want {
			t.Errorf("%s: waiting %v, want %v", c.name, got, c.want)
		}
	}
}
