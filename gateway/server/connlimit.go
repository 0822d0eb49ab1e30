package server

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/uncaged/workflow/gateway/metrics"
)

// The connection-level limits: how long a connection may take to send its
// headers and may sit idle between requests (http.Server), how many
// connections one client address may hold open at once, and how many all
// of them together may (the listener). With the body deadline
// (bodytimeout.go) every phase of a request that waits on the client is
// bounded, one address cannot take more than its share of the process's
// file descriptors however slowly it talks, and all of them together
// cannot take the descriptors the gateway needs for itself.
//
// Invariant: the listener never holds more than MaxConns client
// connections, and a new connection is refused for the global limit only
// when every connection open is in a request the gateway is serving
// (a handler with its whole request in hand, a WebSocket). A connection
// waiting on its client — for headers, for the rest of a body, or idle
// between requests — is shed to make room, the one waiting longest first:
// the purpose of a connection is unknown until its request arrives, so
// /healthz and a connector get in by displacing whoever has been slowest
// to say what they want. Accept failing for lack of descriptors sheds one
// and pauses, rather than spinning.

// Defaults of the connection limits.
const (
	// DefaultReadHeaderTimeout bounds the time from a connection's (or a
	// request's) first byte to the end of its headers.
	DefaultReadHeaderTimeout = 10 * time.Second
	// DefaultIdleTimeout is how long a keep-alive connection may wait for
	// its next request. Caddy keeps idle upstream connections 2 minutes
	// too; nginx as configured here opens one per request.
	DefaultIdleTimeout = 2 * time.Minute
	// DefaultMaxConnsPerIP bounds the connections one client address holds
	// at once. A browser opens at most 6 to a host over HTTP/1.1, a
	// connector one (two while it replaces itself), so 256 leaves room for
	// an office of machines behind one NAT; a single address cannot hold
	// more than that many descriptors.
	DefaultMaxConnsPerIP = 256
)

// IPv6PrefixBits is how much of an IPv6 address is one client's: a
// single host is commonly given a whole /64, so counting per address would
// give it 2^64 shares.
const IPv6PrefixBits = 64

// reservedDescriptors is how many of the process's descriptors the
// global limit leaves for what is not a client connection: the store
// (SQLite's files, PostgreSQL's pool and listener), NATS, connections to
// other replicas and to original clients' URLs, the log, the runtime's
// own. An eighth of the limit, at least 64.
func reservedDescriptors(limit uint64) uint64 { return max(64, limit/8) }

// minMaxConns is the least the derived limit gives, however few the
// descriptors: a gateway that can hold no connection at all serves nothing.
const minMaxConns = 16

// maxConnsFor is the global limit derived from a descriptor limit.
func maxConnsFor(limit uint64) int {
	const ceiling = 1 << 22 // RLIM_INFINITY and the like
	limit = min(limit, ceiling)
	reserve := reservedDescriptors(limit)
	if limit < reserve+minMaxConns {
		return minMaxConns
	}
	return int(limit - reserve)
}

// DefaultMaxConns is Options.MaxConns's default: the process's limit of
// open files (RLIMIT_NOFILE, which Go raises to the hard limit at start)
// less the descriptors reserved for the gateway's own use.
func DefaultMaxConns() int {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil {
		return maxConnsFor(1024)
	}
	return maxConnsFor(rl.Cur)
}

// HTTPServer is the http.Server to serve the gateway with: its handler,
// the header and idle timeouts of Options, and the hooks that tell
// Listener which connections are waiting on their clients. Serve it on
// Listener(ln).
func (g *Gateway) HTTPServer() *http.Server {
	return &http.Server{
		Handler:           g.Handler(),
		ReadHeaderTimeout: DefaultReadHeaderTimeout,
		IdleTimeout:       g.opts.IdleTimeout,
		ConnState:         trackConnState,
		ConnContext:       withCountedConn,
		// net/http's own lines (a TLS handshake or HTTP/2 preface a client
		// botched) are a client's doing too.
		ErrorLog: g.bounds.limited.StdLogger(slog.LevelWarn),
	}
}

// Listener wraps ln so that no client address (an IPv6 /64) holds more
// than Options.MaxConnsPerIP connections at once, closing one more as
// soon as it is accepted (trusted proxies carry many clients and are
// exempt), and that no more than Options.MaxConns are open together
// (see above).
func (g *Gateway) Listener(ln net.Listener) net.Listener {
	if g.opts.MaxConnsPerIP < 0 && g.opts.MaxConns < 0 {
		return ln
	}
	l := &limitListener{Listener: ln, perAddress: g.opts.MaxConnsPerIP, global: g.opts.MaxConns, trusted: g.opts.TrustedProxies,
		log: g.bounds.untrusted, metrics: g.metrics, open: map[netip.Prefix]int{}, conns: map[*countedConn]struct{}{}}
	g.metrics.CountOpenConnections(l.count)
	g.listener = l
	return l
}

// closeIdleConnections closes, now and from now on, every connection of
// Listener's between requests with its last answer written — HTTP/2
// ones too, which the server's Shutdown would leave to their peers (or a
// second after its GOAWAY): the other replicas' connections, idle once
// their forwarded requests have ended, would hold a stop that long.
func (g *Gateway) closeIdleConnections() {
	if g.listener != nil {
		g.listener.closeIdle()
	}
}

// limitListener counts the open connections, per client and in all.
type limitListener struct {
	net.Listener
	// perAddress and global are the limits; negative: none.
	perAddress, global int
	trusted            trustedProxies
	log                *slog.Logger
	metrics            *metrics.Gateway

	mu    sync.Mutex
	open  map[netip.Prefix]int
	conns map[*countedConn]struct{}
	// stopping closes each connection as soon as it is idle
	// (closeIdle).
	stopping atomic.Bool
}

// closeIdle closes the idle connections, and has each one that goes idle
// from now on closed.
func (l *limitListener) closeIdle() {
	l.stopping.Store(true)
	l.mu.Lock()
	var idle []*countedConn
	for c := range l.conns {
		if c.idle.Load() && !c.hijacked.Load() {
			idle = append(idle, c)
		}
	}
	l.mu.Unlock()
	for _, c := range idle {
		c.closeWhenFlushed() // between requests: nothing is lost
	}
}

// addressKey is the client a peer address counts as: an IPv4 address
// (an IPv4-mapped IPv6 one included) on its own, an IPv6 address as its
// /64.
func addressKey(a netip.Addr) netip.Prefix {
	a = a.Unmap().WithZone("")
	if a.Is4() {
		return netip.PrefixFrom(a, 32)
	}
	p, err := a.Prefix(IPv6PrefixBits)
	if err != nil { // the zero Addr
		return netip.Prefix{}
	}
	return p
}

// acceptBackoff bounds the pause after a failed accept: as net/http's own
// loop does, from 5 ms doubling to a second.
const (
	acceptBackoffMin = 5 * time.Millisecond
	acceptBackoffMax = time.Second
)

// Accept returns the next connection within the limits; the ones over
// them are closed here and never reach the server.
func (l *limitListener) Accept() (net.Conn, error) {
	var backoff time.Duration
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			if !errors.Is(err, syscall.EMFILE) && !errors.Is(err, syscall.ENFILE) {
				return nil, err
			}
			// Out of descriptors: free one if a client holds one idly, and
			// pause, so the loop does not spin at a full CPU.
			l.metrics.AcceptError()
			shed := l.shedOne()
			backoff = min(max(2*backoff, acceptBackoffMin), acceptBackoffMax)
			l.log.Warn("accept failed: out of file descriptors", "err", err.Error(), "open", l.count(), "shed_one", shed, "retry_in", backoff.String())
			time.Sleep(backoff)
			continue
		}
		backoff = 0
		cc := &countedConn{Conn: c, l: l}
		cc.since.Store(time.Now().UnixNano())
		if tcp, ok := c.RemoteAddr().(*net.TCPAddr); ok {
			addr := tcp.AddrPort().Addr()
			cc.addr = addr.Unmap()
			cc.perAddress = l.perAddress >= 0 && !l.trusted.contains(addr)
			cc.key = addressKey(addr)
		} // else not TCP (a test's pipe): counted in all only
		victim, refused := l.admit(cc)
		switch refused {
		case "":
		case metrics.RefusedPerAddress:
			_ = c.Close() // refused: nothing was read or written
			l.metrics.ConnectionRefused(refused)
			l.log.Warn("connection refused: too many open from one address", "address", cc.addr.String(), "counted_as", cc.key.String(), "limit", l.perAddress)
			continue
		default:
			_ = c.Close() // refused: nothing was read or written
			l.metrics.ConnectionRefused(refused)
			l.log.Warn("connection refused: too many open connections, all of them being served", "address", cc.addr.String(), "limit", l.global)
			continue
		}
		if victim != nil {
			l.shed(victim)
		}
		return cc, nil
	}
}

// admit counts c in, or says why not: the per-address limit, or the
// global one with no connection waiting on its client to shed. Over the
// global limit it returns the connection to shed for c.
func (l *limitListener) admit(c *countedConn) (victim *countedConn, refused string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if c.perAddress && l.open[c.key] >= l.perAddress {
		return nil, metrics.RefusedPerAddress
	}
	if l.global >= 0 && len(l.conns) >= l.global {
		if victim = l.longestWaiting(); victim == nil {
			return nil, metrics.RefusedGlobal
		}
	}
	if c.perAddress {
		l.open[c.key]++
	}
	l.conns[c] = struct{}{}
	return victim, ""
}

// longestWaiting is the open connection that has waited longest on its
// client, nil when every one is being served. l.mu is held. It looks at
// every connection, which costs only when the limit is reached.
func (l *limitListener) longestWaiting() *countedConn {
	var oldest *countedConn
	var oldestSince int64
	for c := range l.conns {
		if !c.waiting() {
			continue
		}
		if since := c.since.Load(); oldest == nil || since < oldestSince {
			oldest, oldestSince = c, since
		}
	}
	return oldest
}

// shedOne closes the connection waiting longest on its client, if any,
// and says whether there was one.
func (l *limitListener) shedOne() bool {
	l.mu.Lock()
	victim := l.longestWaiting()
	l.mu.Unlock()
	if victim == nil {
		return false
	}
	l.shed(victim)
	return true
}

// shed closes victim to make room.
func (l *limitListener) shed(victim *countedConn) {
	waited := time.Since(time.Unix(0, victim.since.Load()))
	_ = victim.Close() // whatever it was sending is abandoned
	l.metrics.ConnectionShed()
	l.log.Warn("connection closed to make room: too many open connections", "address", victim.addr.String(), "waited", waited.Round(time.Millisecond).String(), "limit", l.global)
}

// release gives c's slots back.
func (l *limitListener) release(c *countedConn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.conns, c)
	if !c.perAddress {
		return
	}
	if l.open[c.key] <= 1 {
		delete(l.open, c.key)
	} else {
		l.open[c.key]--
	}
}

// count is how many connections are open.
func (l *limitListener) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.conns)
}

// countedConn is an accepted connection: it gives its slots back when
// closed, once, whoever closes it (the server, a WebSocket library after
// a hijack, or the listener shedding it), and knows whether it is waiting
// on its client.
type countedConn struct {
	net.Conn
	l          *limitListener
	addr       netip.Addr
	key        netip.Prefix
	perAddress bool // counted against its address's limit
	closed     atomic.Bool

	// since is when the connection last began to wait on its client (its
	// accept, or the end of its last request), in unix nanoseconds.
	since atomic.Int64
	// serving counts its requests in a handler with their whole request
	// read (more than one over HTTP/2); hijacked, a WebSocket's.
	serving  atomic.Int32
	hijacked atomic.Bool
	// idle says the server reported it between requests (http.StateIdle;
	// HTTP/2 reports it when its last stream has closed).
	idle atomic.Bool

	// multiplexed says it speaks HTTP/2 (a request of its said so). The
	// HTTP/2 server reports a connection idle as soon as the last frame
	// of its last answer is in its write buffer, before that buffer is
	// written out: unflushed is set then, and cleared by the next write.
	// HTTP/1 reports idle only once the answer is written.
	multiplexed, unflushed atomic.Bool
	// closing says it is to be closed once nothing of an answer is left
	// unwritten (closeWhenFlushed).
	closing atomic.Bool
}

// Invariant: the gateway closes a connection of its own accord — to stop,
// or to make room — only with every byte of every answer it began on it
// handed to the kernel. An answer's tail left in the server's buffer is
// lost to a client that has read everything else, and it cannot tell an
// answer cut at a frame's end from a whole one but by the missing end:
// a stream relayed between replicas would break rather than end.

// waiting says whether c waits on its client, and may be shed. An HTTP/2
// connection is only while it is idle with its last answer written out:
// between a handler's return and that, its answer's end is still in the
// server's buffer.
func (c *countedConn) waiting() bool {
	if c.hijacked.Load() || c.serving.Load() != 0 || c.closed.Load() {
		return false
	}
	return !c.multiplexed.Load() || (c.idle.Load() && !c.unflushed.Load())
}

// Write implements net.Conn; a write after an HTTP/2 connection went idle
// is the flush of its buffer, which carries the last answer's end.
func (c *countedConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	if c.unflushed.Load() {
		c.unflushed.Store(false)
		if c.closing.Load() {
			c.closeOnceWritten()
		}
	}
	return n, err
}

// closeWhenFlushed closes c now when nothing of an answer is left
// unwritten, else right after the write that flushes it. Either this or
// that write sees the other's mark (both are sequentially consistent),
// so a connection marked both ways is closed. An HTTP/2 connection whose
// buffer had nothing left to flush is closed by the server's own
// shutdown (a second after its GOAWAY) instead.
func (c *countedConn) closeWhenFlushed() {
	c.closing.Store(true)
	if !c.unflushed.Load() {
		c.closeOnceWritten()
	}
}

// closeOnceWritten ends c with everything written: an HTTP/2 connection
// is half-closed, so that its peer reads the answers' ends and then the
// end of the connection, and closes its side — which ends the server's;
// closing it outright with the peer's last frames (a window update, a
// ping) unread would reset it, and a reset may cost the peer what it has
// not read yet. An HTTP/1 connection between requests is closed.
func (c *countedConn) closeOnceWritten() {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok && c.multiplexed.Load() {
		if cw.CloseWrite() == nil {
			return
		}
	}
	_ = c.Close()
}

// Close implements net.Conn.
func (c *countedConn) Close() error {
	if c.closed.CompareAndSwap(false, true) {
		c.l.release(c)
	}
	return c.Conn.Close()
}

// CloseWrite half-closes the connection, as net/http does to end a
// response on a connection it then drains.
func (c *countedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// trackConnState is http.Server.ConnState: a connection back to idle
// waits on its client from now; a hijacked one (a WebSocket) is served
// until it closes.
func trackConnState(c net.Conn, state http.ConnState) {
	cc, ok := c.(*countedConn)
	if !ok {
		return
	}
	switch state {
	case http.StateIdle:
		cc.since.Store(time.Now().UnixNano())
		if cc.multiplexed.Load() {
			cc.unflushed.Store(true) // before idle: waiting() reads idle first
		}
		cc.idle.Store(true)
		if cc.l.stopping.Load() {
			cc.closeWhenFlushed() // the gateway stops: nothing more to serve
		}
	case http.StateActive:
		cc.idle.Store(false)
	case http.StateHijacked:
		cc.hijacked.Store(true)
	}
}

// countedConnKey is the context key of a request's countedConn.
type countedConnKey struct{}

// withCountedConn is http.Server.ConnContext: it gives each request of a
// counted connection the way back to it (markServing).
func withCountedConn(ctx context.Context, c net.Conn) context.Context {
	if cc, ok := c.(*countedConn); ok {
		return context.WithValue(ctx, countedConnKey{}, cc)
	}
	return ctx
}

// markServing marks r's connection served while r's handler runs with
// its whole request: from now when r has no body, else from the end of
// its body. The caller defers unmarkServing with what it returns; nil
// when r's connection is not counted.
func markServing(r *http.Request) (*countedConn, *servingBody) {
	cc, _ := r.Context().Value(countedConnKey{}).(*countedConn)
	if cc == nil {
		return nil, nil
	}
	if r.ProtoMajor == 2 && !cc.multiplexed.Load() {
		cc.multiplexed.Store(true)
	}
	if r.Body == nil || r.Body == http.NoBody {
		cc.serving.Add(1)
		return cc, nil
	}
	sb := &servingBody{ReadCloser: r.Body, c: cc}
	r.Body = sb
	return cc, sb
}

// unmarkServing ends what markServing began.
func (c *countedConn) unmarkServing(sb *servingBody) {
	if sb == nil || !sb.state.CompareAndSwap(0, 2) {
		c.serving.Add(-1)
	}
}

// servingBody is a request body whose end marks its connection served.
type servingBody struct {
	io.ReadCloser
	c *countedConn
	// state: 0 the body is arriving, 1 it has (serving counted),
	// 2 the handler has returned. The proxy reads the body on a
	// goroutine of its own, hence the atomics.
	state atomic.Int32
}

func (b *servingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF && b.state.CompareAndSwap(0, 1) {
		b.c.serving.Add(1)
	}
	return n, err
}

// clientKey is addressKey for an address as text (a request's client
// address), for the limits keyed by strings; what does not parse is its
// own key.
func clientKey(addr string) string {
	a, err := netip.ParseAddr(addr)
	if err != nil {
		return addr
	}
	k := addressKey(a)
	if k.Addr().Is4() {
		return k.Addr().String()
	}
	return k.String()
}
