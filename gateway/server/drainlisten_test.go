package server

import (
	"errors"
	"net"
	"runtime"
	"testing"
	"time"
)

// Connections the kernel queued before the drain are all handed out, none
// reset; then the listener closes, and a new connection is refused.
func TestADrainTakesWhatIsQueuedBeforeClosing(t *testing.T) {
	t.Parallel()
	for _, queued := range []int{0, 1, 7} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		l := newDrainingListener(ln)
		var clients []net.Conn
		for range queued {
			c, err := net.Dial("tcp", ln.Addr().String()) // queued: nobody accepts yet
			if err != nil {
				t.Fatal(err)
			}
			clients = append(clients, c)
		}
		l.Drain()
		got := 0
		for {
			c, err := l.Accept()
			if err != nil {
				if !errors.Is(err, net.ErrClosed) {
					t.Fatalf("%d queued: Accept failed with %v, want net.ErrClosed", queued, err)
				}
				break
			}
			got++
			_ = c.Close() // the test only counts
		}
		if got != queued {
			t.Fatalf("the drain handed out %d of %d queued connections", got, queued)
		}
		select {
		case <-l.Closed():
		default:
			t.Fatal("the listener is not closed after the drain")
		}
		if c, err := net.DialTimeout("tcp", ln.Addr().String(), 2*time.Second); err == nil {
			_ = c.Close()
			t.Fatal("a connection after the drain was accepted by the kernel")
		}
		for _, c := range clients {
			_ = c.Close()
		}
	}
}

// Once a drain has begun no new connection completes (Linux: the socket
// filter drops their handshakes), so nothing the kernel accepts after the
// last look at its queue can be reset by the close.
func TestADrainCompletesNoNewConnection(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" {
		t.Skip("the socket filter is Linux's")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }() // closed already by the end, or not: either is fine
	if !stopHandshakes(ln) {
		// gVisor, for one, has no socket filters: the drain's short
		// waits alone narrow the window there.
		t.Skip("this kernel does not attach socket filters")
	}
	c, err := net.DialTimeout("tcp", ln.Addr().String(), 300*time.Millisecond)
	if err == nil {
		_ = c.Close()
		t.Fatal("a connection completed after the filter was attached")
	}
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("dial after the filter: %v, want a timeout (the SYN dropped)", err)
	}
}
