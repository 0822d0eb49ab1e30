package link

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/uncaged/workflow/shared/testkit"
	"github.com/uncaged/workflow/shared/tunnel"
)

// fakeGateway accepts tunnels as the gateway does, except that the
// connection attempts numbered in refuse (from 1) are answered 503
// "gateway busy", a refusal worth retrying. Its tunnels and server close
// when the test ends.
type fakeGateway struct {
	*httptest.Server
	accepted chan *tunnel.Client // each tunnel, in the order accepted

	mu       sync.Mutex
	attempts int
	clients  []*tunnel.Client
}

func newFakeGateway(t *testing.T, refuse ...int) *fakeGateway {
	t.Helper()
	g := &fakeGateway{accepted: make(chan *tunnel.Client, 16)}
	g.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g.mu.Lock()
		g.attempts++
		n := g.attempts
		g.mu.Unlock()
		for _, bad := range refuse {
			if n == bad {
				http.Error(w, "gateway busy", http.StatusServiceUnavailable)
				return
			}
		}
		ws, err := tunnel.Accept(w, r)
		if err != nil {
			return
		}
		c, _ := tunnel.NewClient(ws)
		g.mu.Lock()
		g.clients = append(g.clients, c)
		g.mu.Unlock()
		g.accepted <- c
	}))
	t.Cleanup(func() {
		g.mu.Lock()
		for _, c := range g.clients {
			_ = c.Close("test over") // best effort: the connector may have gone already
		}
		g.mu.Unlock()
		g.Close()
	})
	return g
}

// next waits for the next tunnel the gateway accepts. The bound only turns
// a link that never connects into a failure that shows the link's output
// (out may be nil) instead of a hung test.
func (g *fakeGateway) next(t *testing.T, out fmt.Stringer) *tunnel.Client {
	t.Helper()
	select {
	case c := <-g.accepted:
		return c
	case <-time.After(testkit.WaitBound):
		if out != nil {
			t.Fatalf("no tunnel connection; output:\n%s", out)
		}
		t.Fatal("no tunnel connection")
		return nil
	}
}
