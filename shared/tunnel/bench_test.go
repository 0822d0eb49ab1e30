package tunnel

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"

	"golang.org/x/net/http2"
)

// cpuMicros is the user+system CPU this process has used, in µs. Wall time
// per operation says little on a shared machine; CPU per operation is what
// the tunnel costs wherever it runs.
func cpuMicros(b *testing.B) float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e3
}

// BenchmarkSmallGET is the tunnel's share of a proxied small GET: the
// gateway's HTTP/2 client and the connector's HTTP/2 server over one
// loopback WebSocket, both in this process, with the headers the gateway's
// proxy sends (a fresh request id each time) and a small JSON answer.
// cpu-µs/op counts both ends.
func BenchmarkSmallGET(b *testing.B) { benchSmallGET(b, 0) }

// BenchmarkSmallGETDeepHandler is BenchmarkSmallGET with a handler that
// needs as much stack as the connector's API (router, middleware, JSON
// encoding) does.
func BenchmarkSmallGETDeepHandler(b *testing.B) { benchSmallGET(b, 24) }

func healthz(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Vary", "Origin")
	h.Set("X-Request-Id", r.Header.Get("X-Request-Id"))
	_, _ = io.WriteString(w, `{"ok":true}`+"\n") // the benchmark reads what arrives
}

// deep calls f under depth frames of half a kilobyte each.
//
//go:noinline
func deep(depth int, f func()) byte {
	var frame [512]byte
	if depth == 0 {
		f()
		return frame[0]
	}
	frame[depth%512] = byte(depth)
	return deep(depth-1, f) + frame[(depth*7)%512]
}

func benchSmallGET(b *testing.B, depth int) {
	c, _ := pair(b, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		deep(depth, func() { healthz(w, r) })
	}))
	var seq atomic.Int64
	b.SetParallelism(32) // 64 requests in flight on 2 CPUs, as tunnelbench
	b.ReportAllocs()
	before := cpuMicros(b)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, "http://connector/api/healthz", nil)
			req.Header = http.Header{
				"Accept-Encoding":   {"gzip"},
				"User-Agent":        {"Go-http-client/1.1"},
				"X-Forwarded-For":   {"127.0.0.1"},
				"X-Forwarded-Host":  {"127.0.0.1:8080"},
				"X-Forwarded-Proto": {"http"},
				"X-Request-Id":      {"01JBENCH" + strconv.FormatInt(seq.Add(1), 36) + "ZZZZZZZZZZZZZZZZZZ"},
			}
			resp, err := c.RoundTrip(req)
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
		}
	})
	b.StopTimer()
	b.ReportMetric((cpuMicros(b)-before)/float64(b.N), "cpu-µs/op")
}

// BenchmarkFrameInspector is what following a connector's frames adds to
// one read on the gateway: a small answer's HEADERS and DATA frames, as
// one read returns them.
func BenchmarkFrameInspector(b *testing.B) {
	var buf bytes.Buffer
	fr := http2.NewFramer(&buf, nil)
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: make([]byte, 120), EndHeaders: true}); err != nil {
		b.Fatal(err)
	}
	if err := fr.WriteData(1, true, []byte(`{"ok":true}`+"\n")); err != nil {
		b.Fatal(err)
	}
	chunk := buf.Bytes()
	var f frameInspector
	b.SetBytes(int64(len(chunk)))
	for b.Loop() {
		if err := f.inspect(chunk); err != nil {
			b.Fatal(err)
		}
	}
}
