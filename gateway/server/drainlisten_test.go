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

// Once a drain has begun no new connection completes where the kernel
// attaches socket filters (Linux: the filter drops their handshakes), so
// nothing it accepts after the drain's last look at its queue can be
// reset by the close. Where it does not (gVisor), stopHandshakes says so
// and connections still complete: the drain's short waits are all there
// is. Either way what it reports is what the kernel does.
func TestADrainCompletesNoNewConnection(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }() // the test is over either way
	attached := stopHandshakes(ln)
	if runtime.GOOS != "linux" && attached {
		t.Fatal("a socket filter reported attached off Linux")
	}
	c, err := net.DialTimeout("tcp", ln.Addr().String(), 300*time.Millisecond)
	switch {
	case attached && err == nil:
		_ = c.Close()
		t.Fatal("a connection completed after the filter was attached")
	case attached:
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			t.Fatalf("dial after the filter: %v, want a timeout (the SYN dropped)", err)
		}
	case err != nil:
		t.Fatalf("no filter attached, yet the dial failed: %v", err)
	default:
		_ = c.Close()
		t.Logf("this kernel does not attach socket filters: the drain relies on its waits alone")
	}
}
