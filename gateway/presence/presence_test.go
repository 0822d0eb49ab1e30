package presence

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeConn is a connection whose pings succeed until it is told to fail.
type fakeConn struct {
	failing atomic.Bool
	pings   atomic.Int64
	done    chan struct{}
	once    sync.Once
	reason  atomic.Value
}

func newFake() *fakeConn { return &fakeConn{done: make(chan struct{})} }

func (f *fakeConn) RoundTrip(*http.Request) (*http.Response, error) { return nil, errors.New("unused") }
func (f *fakeConn) Done() <-chan struct{}                           { return f.done }
func (f *fakeConn) Ping(ctx context.Context) error {
	f.pings.Add(1)
	if f.failing.Load() {
		return errors.New("no pong")
	}
	return nil
}
func (f *fakeConn) Close(reason string) error {
	f.reason.Store(reason)
	f.once.Do(func() { close(f.done) })
	return nil
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestTwoMissedHeartbeatsMeanOffline(t *testing.T) {
	r := New(20 * time.Millisecond)
	var changes []string
	var mu sync.Mutex
	r.OnChange = func(name, status string) { mu.Lock(); changes = append(changes, name+"="+status); mu.Unlock() }
	c := newFake()
	r.Attach("laptop", c, Info{Version: "v1", Protocol: "h2"})
	waitFor(t, func() bool { return c.pings.Load() >= 3 })
	if _, online, known := r.Get("laptop"); !online || !known {
		t.Fatal("not online while answering pings")
	}
	c.failing.Store(true)
	waitFor(t, func() bool { _, online, _ := r.Get("laptop"); return !online })
	if got := c.reason.Load(); got != "missed two heartbeats" {
		t.Fatalf("close reason %v", got)
	}
	eps := r.List()
	if len(eps) != 1 || eps[0].Status != Offline || eps[0].Version != "v1" || eps[0].LastHeartbeat == 0 {
		t.Fatalf("endpoints %+v", eps)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(changes) != 2 || changes[0] != "laptop=online" || changes[1] != "laptop=offline" {
		t.Fatalf("changes %v", changes)
	}
}

func TestNewerConnectionReplacesTheOlder(t *testing.T) {
	r := New(time.Hour)
	old, newer := newFake(), newFake()
	r.Attach("laptop", old, Info{})
	r.Attach("laptop", newer, Info{})
	if got := old.reason.Load(); got != "replaced by a newer connection for laptop" {
		t.Fatalf("old closed with %v", got)
	}
	// The old connection's end does not take the name offline.
	time.Sleep(20 * time.Millisecond)
	c, online, _ := r.Get("laptop")
	if !online || c != newer || r.Online() != 1 {
		t.Fatalf("after replacement: online=%v conn=%v", online, c == newer)
	}
	newer.Close("gone")
	waitFor(t, func() bool { return r.Online() == 0 })
	if _, _, known := r.Get("ghost"); known {
		t.Fatal("unknown name known")
	}
}
