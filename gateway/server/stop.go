package server

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// What a stop waits for, and what it says when it cannot wait any longer.
// Run stops in this order: /readyz fails and /ws/connect refuses, so
// balancers and connectors go elsewhere; in a cluster each connector is
// asked to move to another replica and its old tunnel is retired once it
// has (move.go), then the other replicas hear this one is leaving;
// the event streams it relays end at their next event's end
// (eventstream), so their clients resume elsewhere with the last id they
// got; the connectors are told "gateway shutting down" and each one's end
// is counted and logged while /metrics still answers; the HTTP server
// stops accepting and drains what is left. Whatever has not ended by
// ShutdownTimeout is named in the error Run returns (StopError).

// cutOffGrace is how long a stop that has cut off the requests it could
// not wait for gives their handlers to return and log them.
const cutOffGrace = 5 * time.Second

// inFlight is the requests being served, with what a stop that cannot
// wait for them reports: their method and path. A map entry per request,
// its key the request's own pointer: nothing is allocated per request
// once the map has grown to the load.
type inFlight struct {
	mu   sync.Mutex
	reqs map[*http.Request]requestLine
	// idle, when not nil, is closed once reqs is empty (waitIdle).
	idle chan struct{}
}

// requestLine is what a stuck request is reported as.
type requestLine struct{ method, path string }

// begin records r until end. Its method and path are read here, on the
// request's own goroutine, never by the stop.
func (f *inFlight) begin(r *http.Request) {
	f.mu.Lock()
	f.reqs[r] = requestLine{r.Method, r.URL.Path}
	f.mu.Unlock()
}

func (f *inFlight) end(r *http.Request) {
	f.mu.Lock()
	delete(f.reqs, r)
	if len(f.reqs) == 0 && f.idle != nil {
		close(f.idle)
		f.idle = nil
	}
	f.mu.Unlock()
}

// waitIdle returns once no request is in flight, or when ctx ends (false).
func (f *inFlight) waitIdle(ctx context.Context) bool {
	f.mu.Lock()
	if len(f.reqs) == 0 {
		f.mu.Unlock()
		return true
	}
	if f.idle == nil {
		f.idle = make(chan struct{})
	}
	idle := f.idle
	f.mu.Unlock()
	select {
	case <-idle:
		return true
	case <-ctx.Done():
		return false
	}
}

// StuckRequests is a count of requests still in flight with one method
// and path.
type StuckRequests struct {
	Method, Path string
	Count        int
}

// stuck lists the requests in flight, most numerous first.
func (f *inFlight) stuck() []StuckRequests {
	f.mu.Lock()
	counts := map[requestLine]int{}
	for _, l := range f.reqs {
		counts[l]++
	}
	f.mu.Unlock()
	out := make([]StuckRequests, 0, len(counts))
	for l, n := range counts {
		out = append(out, StuckRequests{Method: l.method, Path: l.path, Count: n})
	}
	slices.SortFunc(out, func(a, b StuckRequests) int {
		return cmp.Or(b.Count-a.Count, strings.Compare(a.Path, b.Path), strings.Compare(a.Method, b.Method))
	})
	return out
}

// requestCount is how many requests rs count.
func requestCount(rs []StuckRequests) int {
	total := 0
	for _, r := range rs {
		total += r.Count
	}
	return total
}

// StopError is a stop that could not wait for every request: what was
// still in flight when ShutdownTimeout ran out. Those requests were cut
// off.
type StopError struct {
	// After is how long the stop waited.
	After time.Duration
	// Requests are the requests still in flight, most numerous first.
	Requests []StuckRequests
	// Err is what the HTTP server's shutdown returned.
	Err error
}

// maxStuckNamed bounds the requests a StopError's message names.
const maxStuckNamed = 5

// Error names how many requests were still in flight and which.
func (e *StopError) Error() string {
	total := requestCount(e.Requests)
	var b strings.Builder
	noun := "requests"
	if total == 1 {
		noun = "request"
	}
	fmt.Fprintf(&b, "gateway stop: %d %s still in flight after %s, cut off", total, noun, e.After.Round(time.Millisecond))
	for i, r := range e.Requests {
		if i == maxStuckNamed {
			fmt.Fprintf(&b, "; and %d more", len(e.Requests)-i)
			break
		}
		sep := ": "
		if i > 0 {
			sep = ", "
		}
		fmt.Fprintf(&b, "%s%s %s", sep, r.Method, r.Path)
		if r.Count > 1 {
			fmt.Fprintf(&b, " (%d)", r.Count)
		}
	}
	if len(e.Requests) == 0 {
		fmt.Fprintf(&b, ": %v", e.Err)
	}
	return b.String()
}

// Unwrap is the HTTP server's error (context.DeadlineExceeded).
func (e *StopError) Unwrap() error { return e.Err }

// countdown counts things a stop waits for, as a sync.WaitGroup does,
// but may be added to while it is waited for and waited for with a
// deadline.
type countdown struct {
	mu   sync.Mutex
	n    int
	zero chan struct{} // closed when n reaches 0
}

func (c *countdown) add() {
	c.mu.Lock()
	if c.n == 0 {
		c.zero = make(chan struct{})
	}
	c.n++
	c.mu.Unlock()
}

func (c *countdown) done() {
	c.mu.Lock()
	if c.n--; c.n == 0 {
		close(c.zero)
	}
	c.mu.Unlock()
}

// wait returns when the count is 0 or ctx ends, and says which.
func (c *countdown) wait(ctx context.Context) bool {
	c.mu.Lock()
	n, zero := c.n, c.zero
	c.mu.Unlock()
	if n == 0 {
		return true
	}
	select {
	case <-zero:
		return true
	case <-ctx.Done():
		return false
	}
}
