package server

import (
	"net"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// The connection-level limits: how long a connection may take to send its
// headers and may sit idle between requests (http.Server), and how many
// connections one client address may hold open at once (the listener).
// With the body deadline (bodytimeout.go) every phase of a request that
// waits on the client is bounded, and one address cannot take more than
// its share of the process's file descriptors however slowly it talks.

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

// refusedLogInterval spaces the log lines about refused connections: under
// a flood there would otherwise be one per attempt.
const refusedLogInterval = time.Minute

// HTTPServer is the http.Server to serve the gateway with: its handler
// and the header and idle timeouts of Options. Serve it on Listener(ln).
func (g *Gateway) HTTPServer() *http.Server {
	return &http.Server{
		Handler:           g.Handler(),
		ReadHeaderTimeout: DefaultReadHeaderTimeout,
		IdleTimeout:       g.opts.IdleTimeout,
	}
}

// Listener wraps ln so that no client address holds more than
// Options.MaxConnsPerIP connections at once; one more is closed as soon as
// it is accepted. Trusted proxies carry many clients and are exempt.
func (g *Gateway) Listener(ln net.Listener) net.Listener {
	if g.opts.MaxConnsPerIP < 0 {
		return ln
	}
	return &limitListener{Listener: ln, max: g.opts.MaxConnsPerIP, trusted: g.opts.TrustedProxies, g: g, open: map[netip.Addr]int{}}
}

// limitListener counts the open connections per peer address.
type limitListener struct {
	net.Listener
	max     int
	trusted trustedProxies
	g       *Gateway

	mu   sync.Mutex
	open map[netip.Addr]int

	refused    atomic.Int64
	lastLogged atomic.Int64 // unix nanoseconds
}

// Accept returns the next connection within its address's limit; the
// ones over it are closed here and never reach the server.
func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		tcp, ok := c.RemoteAddr().(*net.TCPAddr)
		if !ok {
			return c, nil // not TCP (a test's pipe): nothing to count
		}
		addr := tcp.AddrPort().Addr().Unmap()
		if l.trusted.contains(addr) {
			return c, nil
		}
		if !l.take(addr) {
			_ = c.Close() // refused: nothing was read or written
			l.noteRefused(addr)
			continue
		}
		return &countedConn{Conn: c, l: l, addr: addr}, nil
	}
}

func (l *limitListener) take(a netip.Addr) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[a] >= l.max {
		return false
	}
	l.open[a]++
	return true
}

func (l *limitListener) release(a netip.Addr) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[a] <= 1 {
		delete(l.open, a)
	} else {
		l.open[a]--
	}
}

// noteRefused logs refused connections, at most once a minute.
func (l *limitListener) noteRefused(a netip.Addr) {
	n := l.refused.Add(1)
	now := time.Now().UnixNano()
	last := l.lastLogged.Load()
	if now-last < int64(refusedLogInterval) || !l.lastLogged.CompareAndSwap(last, now) {
		return
	}
	l.g.opts.Logger.Warn("connections refused: too many open from one address", "address", a.String(), "limit", l.max, "refused_since_start", n)
}

// countedConn gives its slot back when closed, once, whoever closes it
// (the server, or a WebSocket library after a hijack).
type countedConn struct {
	net.Conn
	l      *limitListener
	addr   netip.Addr
	closed atomic.Bool
}

func (c *countedConn) Close() error {
	if c.closed.CompareAndSwap(false, true) {
		c.l.release(c.addr)
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
