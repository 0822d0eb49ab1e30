package loadgen

import (
	"io"
	"net"
	"sync"
	"time"
)

// Balancer is a TCP load balancer on loopback in front of gateway
// replicas, as a cluster runs behind one in production: each new
// connection goes to the next replica, round robin, skipping one that
// refuses. When a replica dies its connections break, and their clients
// reconnect to the others through the balancer.
type Balancer struct {
	ln       net.Listener
	backends []string

	mu     sync.Mutex
	next   int
	active map[string]int // open connections per backend
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// NewBalancer listens on a free loopback port in front of backends
// (host:port each).
func NewBalancer(backends []string) (*Balancer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	b := &Balancer{ln: ln, backends: backends, active: map[string]int{}, conns: map[net.Conn]struct{}{}}
	b.wg.Add(1)
	go b.accept()
	return b, nil
}

// Addr is where clients reach the balancer.
func (b *Balancer) Addr() string { return b.ln.Addr().String() }

// Active is how many connections the balancer holds open to backend.
func (b *Balancer) Active(backend string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.active[backend]
}

// Close stops accepting and closes every connection. Here and below, a
// Close of a connection or the listener fails only for one closed
// already (by the other direction's pipe, or the far end): nothing to do.
func (b *Balancer) Close() {
	b.mu.Lock()
	b.closed = true
	for c := range b.conns {
		_ = c.Close()
	}
	b.mu.Unlock()
	_ = b.ln.Close()
	b.wg.Wait()
}

func (b *Balancer) accept() {
	defer b.wg.Done()
	for {
		c, err := b.ln.Accept()
		if err != nil {
			return
		}
		b.wg.Add(1)
		go func() { defer b.wg.Done(); b.serve(c) }()
	}
}

// pick returns a connection to the next backend that accepts one.
func (b *Balancer) pick() (net.Conn, string) {
	b.mu.Lock()
	start := b.next
	b.next = (b.next + 1) % len(b.backends)
	b.mu.Unlock()
	for i := range b.backends {
		addr := b.backends[(start+i)%len(b.backends)]
		if c, err := net.DialTimeout("tcp", addr, 2*time.Second); err == nil {
			return c, addr
		}
	}
	return nil, ""
}

// track registers open connections (false: the balancer is closing) and
// unregisters them.
func (b *Balancer) track(backend string, add bool, cs ...net.Conn) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if add && b.closed {
		return false
	}
	for _, c := range cs {
		if add {
			b.conns[c] = struct{}{}
		} else {
			delete(b.conns, c)
		}
	}
	if add {
		b.active[backend]++
	} else {
		b.active[backend]--
	}
	return true
}

func (b *Balancer) serve(client net.Conn) {
	backend, addr := b.pick()
	if backend == nil {
		_ = client.Close()
		return
	}
	if !b.track(addr, true, client, backend) {
		_ = client.Close()
		_ = backend.Close()
		return
	}
	defer b.track(addr, false, client, backend)
	// Either side ending ends both: a dead replica's clients see their
	// connection break, as they would behind a real balancer.
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		// Its error is one side going away, which is how a pipe ends.
		_, _ = io.Copy(dst, src)
		_ = dst.Close()
		_ = src.Close()
		done <- struct{}{}
	}
	go pipe(backend, client)
	go pipe(client, backend)
	<-done
	<-done
}
