package server

import (
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/uncaged/workflow/gateway/internal/eventstream"
	"github.com/uncaged/workflow/gateway/metrics"
	"github.com/uncaged/workflow/gateway/presence"
	"github.com/uncaged/workflow/shared/tunnel"
)

// rateLimiter is a token bucket per client address: each holds up to burst
// tokens and gains perSecond of them a second; an attempt takes one.
type rateLimiter struct {
	perSecond float64
	burst     float64
	now       func() time.Time

	mu        sync.Mutex
	buckets   map[string]*bucket
	lastSweep time.Time
}

type bucket struct {
	tokens float64
	at     time.Time
}

// newRateLimiter returns a limiter allowing perMinute attempts a minute on
// average and burst at once; nil (no limit) when perMinute is negative.
func newRateLimiter(perMinute float64, burst int) *rateLimiter {
	if perMinute < 0 {
		return nil
	}
	return &rateLimiter{perSecond: perMinute / 60, burst: float64(max(burst, 1)), now: time.Now, buckets: map[string]*bucket{}}
}

// allow takes a token for key; when there is none it says how long until
// there will be.
func (l *rateLimiter) allow(key string) (bool, time.Duration) {
	if l == nil {
		return true, 0
	}
	key = clientKey(key) // an IPv6 /64 is one client (connlimit.go)
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	l.sweep(now)
	b, ok := l.buckets[key]
	if !ok {
		b = &bucket{tokens: l.burst, at: now}
		l.buckets[key] = b
	}
	b.tokens = l.refilled(b, now)
	b.at = now
	if b.tokens >= 1 {
		b.tokens--
		return true, 0
	}
	return false, l.untilToken(b.tokens)
}

// untilToken is how long a bucket holding tokens (fewer than one) waits
// for its next one.
func (l *rateLimiter) untilToken(tokens float64) time.Duration {
	if l.perSecond <= 0 {
		return time.Hour
	}
	return time.Duration((1 - tokens) / l.perSecond * float64(time.Second))
}

// peek says whether key has a token left, without taking it: a caller
// that spends tokens only on failures checks first.
func (l *rateLimiter) peek(key string) (bool, time.Duration) {
	if l == nil {
		return true, 0
	}
	key = clientKey(key)
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.buckets[key]
	if !ok {
		return true, 0
	}
	if tokens := l.refilled(b, l.now()); tokens < 1 {
		return false, l.untilToken(tokens)
	}
	return true, 0
}

func (l *rateLimiter) refilled(b *bucket, now time.Time) float64 {
	return math.Min(l.burst, b.tokens+now.Sub(b.at).Seconds()*l.perSecond)
}

// sweep forgets, once a minute, the buckets that have refilled: they are
// the same as no bucket, so memory stays bounded by the recent callers.
func (l *rateLimiter) sweep(now time.Time) {
	if now.Sub(l.lastSweep) < time.Minute {
		return
	}
	l.lastSweep = now
	for k, b := range l.buckets {
		if l.refilled(b, now) >= l.burst {
			delete(l.buckets, k)
		}
	}
}

// tracked is a connector's connection as the gateway holds it: the tunnel
// or legacy adapter, a semaphore bounding its requests in flight, and the
// reason the gateway closed it (for the disconnect metric).
type tracked struct {
	presence.Conn
	protocol string
	slots    chan struct{} // nil: no bound
	reason   atomic.Pointer[string]

	// What a move needs (move.go): the requests in flight, counted
	// whether or not slots bounds them; whether the connector was asked
	// to move, and whether the tunnel was retired (it takes no new
	// request); idle wakes a retirement waiting for the count to reach 0.
	inFlight atomic.Int64
	moving   atomic.Bool
	retired  atomic.Bool
	idle     chan struct{}
	// streams are the event streams relayed from this tunnel (nil: the
	// gateway's), which end when it is retired.
	streams *eventstream.Set

	// What is to be done once the tunnel has ended (whenEnded, end).
	endMu  sync.Mutex
	ended  bool
	onEnds []func()
}

// whenEnded has f called once the tunnel has ended (end): at once if it
// has.
func (t *tracked) whenEnded(f func()) {
	t.endMu.Lock()
	if !t.ended {
		t.onEnds = append(t.onEnds, f)
		t.endMu.Unlock()
		return
	}
	t.endMu.Unlock()
	f()
}

// end calls what whenEnded was given: the tunnel has ended.
func (t *tracked) end() {
	t.endMu.Lock()
	t.ended = true
	fs := t.onEnds
	t.onEnds = nil
	t.endMu.Unlock()
	for _, f := range fs {
		f()
	}
}

func newTracked(c presence.Conn, protocol string, maxConcurrent int) *tracked {
	t := &tracked{Conn: c, protocol: protocol, idle: make(chan struct{}, 1)}
	if maxConcurrent > 0 {
		t.slots = make(chan struct{}, maxConcurrent)
	}
	return t
}

// acquire takes a request slot if one is free.
func (t *tracked) acquire() bool {
	if t.slots == nil {
		return true
	}
	select {
	case t.slots <- struct{}{}:
		return true
	default:
		return false
	}
}

func (t *tracked) release() {
	if t.slots != nil {
		<-t.slots
	}
}

// Close records why the gateway closed the connection, then closes it.
func (t *tracked) Close(reason string) error {
	t.reason.CompareAndSwap(nil, &reason)
	return t.Conn.Close(reason)
}

// disconnectReason classifies how the connection ended: the gateway's own
// reasons (presence's replacement and heartbeat texts, our shutdown), or
// the connector going away.
func (t *tracked) disconnectReason() string {
	r := t.reason.Load()
	switch {
	case r == nil:
		return metrics.DisconnectRemote
	case strings.HasPrefix(*r, tunnel.MovedMark):
		return metrics.DisconnectMoved
	case strings.HasPrefix(*r, "replaced"):
		return metrics.DisconnectReplaced
	case strings.Contains(*r, "heartbeat"):
		return metrics.DisconnectHeartbeat
	case *r == shutdownReason:
		return metrics.DisconnectShutdown
	default:
		return metrics.DisconnectOther
	}
}
