package presence

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/uncaged/workflow/shared/testkit"
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

func TestTwoMissedHeartbeatsMeanOffline(t *testing.T) {
	t.Parallel()
	r := New(20 * time.Millisecond)
	var changes []string
	var mu sync.Mutex
	r.OnChange = func(name, status string) { mu.Lock(); changes = append(changes, name+"="+status); mu.Unlock() }
	c := newFake()
	attach(t, r, "laptop", c, Info{Version: "v1", Protocol: "h2"})
	testkit.WaitUntil(t, "three pings", func() bool { return c.pings.Load() >= 3 })
	if _, online, known := r.Get("laptop"); !online || !known {
		t.Fatal("not online while answering pings")
	}
	c.failing.Store(true)
	testkit.WaitUntil(t, "laptop to be offline", func() bool { _, online, _ := r.Get("laptop"); return !online })
	testkit.WaitUntil(t, "the connection to be closed", func() bool { return c.reason.Load() != nil })
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
	t.Parallel()
	r := New(time.Hour)
	old, newer := newFake(), newFake()
	attach(t, r, "laptop", old, Info{})
	attach(t, r, "laptop", newer, Info{})
	testkit.WaitUntil(t, "the old connection to be closed", func() bool { return old.reason.Load() != nil })
	if got := old.reason.Load(); got != "replaced by a newer connection for laptop" {
		t.Fatalf("old closed with %v", got)
	}
	// The old connection's end does not take the name offline. Nothing is
	// waited for here: the pause gives a wrong offline the time to show.
	time.Sleep(20 * time.Millisecond)
	c, online, _ := r.Get("laptop")
	if !online || c != newer || r.Online() != 1 {
		t.Fatalf("after replacement: online=%v conn=%v", online, c == newer)
	}
	if err := newer.Close("gone"); err != nil {
		t.Fatal(err)
	}
	testkit.WaitUntil(t, "nobody online", func() bool { return r.Online() == 0 })
	if _, _, known := r.Get("ghost"); known {
		t.Fatal("unknown name known")
	}
}

// stuckConn is a connection whose Close does not return until released, as
// a tunnel to a connector that stopped reading could be; its pings fail
// once it is told to.
type stuckConn struct {
	*fakeConn
	release chan struct{}
	closing chan struct{}
	once    sync.Once
}

func newStuck() *stuckConn {
	return &stuckConn{fakeConn: newFake(), release: make(chan struct{}), closing: make(chan struct{})}
}

func (s *stuckConn) Close(reason string) error {
	s.once.Do(func() { close(s.closing) })
	<-s.release
	return s.fakeConn.Close(reason)
}

// returnsIn runs f and fails the test if it has not returned within a
// generous deadline.
// attach attaches c as name, failing the test (from any goroutine) if the
// registry refuses it.
func attach(t *testing.T, r *Registry, name string, c Conn, info Info) {
	t.Helper()
	if _, err := r.Attach(name, c, info); err != nil {
		t.Error(err)
	}
}

func returnsIn(t *testing.T, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	ctx, cancel := context.WithTimeout(context.Background(), testkit.WaitBound)
	defer cancel()
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatalf("%s is held by a connection that does not close", what)
	}
}

func TestAConnectionSlowToCloseHoldsNobody(t *testing.T) {
	t.Parallel()
	r := New(20 * time.Millisecond)
	old := newStuck()
	t.Cleanup(func() { close(old.release) })
	attach(t, r, "laptop", old, Info{})
	newer := newFake()
	returnsIn(t, "a replacement", func() { attach(t, r, "laptop", newer, Info{}) })
	if c, online, _ := r.Get("laptop"); !online || c != newer {
		t.Fatal("the replacement does not hold the name")
	}
	testkit.WaitUntil(t, "the old connection to start closing", func() bool {
		select {
		case <-old.closing:
			return true
		default:
			return false
		}
	})

	// Missing heartbeats shows the name offline even while the close hangs.
	stuck := newStuck()
	t.Cleanup(func() { close(stuck.release) })
	attach(t, r, "ci-box", stuck, Info{})
	stuck.failing.Store(true)
	testkit.WaitUntil(t, "ci-box to be offline", func() bool { _, online, _ := r.Get("ci-box"); return !online })
	// And the next connection for the name takes it at once.
	returnsIn(t, "a reconnection", func() { attach(t, r, "ci-box", newFake(), Info{}) })
	if _, online, _ := r.Get("ci-box"); !online {
		t.Fatal("the reconnection is not online")
	}
}

func TestTheSharedSecretCannotTakeATokenBoundName(t *testing.T) {
	t.Parallel()
	r := New(time.Hour)
	token := Info{Credential: CredentialToken, Address: "10.0.0.2"}
	secret := Info{Credential: CredentialSecret, Address: "10.0.0.9"}
	alpha := newFake()
	if replaced, err := r.Attach("alpha", alpha, token); replaced != nil || err != nil {
		t.Fatalf("first attach: %v, %v", replaced, err)
	}
	intruder := newFake()
	if _, err := r.Attach("alpha", intruder, secret); !errors.Is(err, ErrTokenBound) {
		t.Fatalf("the secret took a token's name: %v", err)
	}
	if c, online, _ := r.Get("alpha"); c != alpha || !online || alpha.reason.Load() != nil || !r.HeldByToken("alpha") {
		t.Fatal("the token-bound connection lost its name")
	}
	if eps := r.List(); eps[0].Credential != CredentialToken {
		t.Fatalf("listed %+v", eps)
	}
	// Offline, whether the name is still the token's is the gateway's
	// bindings' to say, which outlive this registry: here it no longer
	// holds.
	if err := alpha.Close("gone"); err != nil {
		t.Fatal(err)
	}
	testkit.WaitUntil(t, "nobody online", func() bool { return r.Online() == 0 })
	if r.HeldByToken("alpha") {
		t.Fatal("an offline token connection holds the name")
	}
	// The token itself comes back.
	again := newFake()
	if _, err := r.Attach("alpha", again, token); err != nil {
		t.Fatal(err)
	}

	// A token replaces a shared-secret holder; secret replaces secret.
	shared := newFake()
	attach(t, r, "beta", shared, secret)
	if r.HeldByToken("beta") {
		t.Fatal("a secret holder counts as a token")
	}
	shared2 := newFake()
	if replaced, err := r.Attach("beta", shared2, secret); err != nil || replaced == nil || replaced.Address != "10.0.0.9" {
		t.Fatalf("secret over secret: %+v, %v", replaced, err)
	}
	bound := newFake()
	if replaced, err := r.Attach("beta", bound, token); err != nil || replaced == nil || replaced.Credential != CredentialSecret {
		t.Fatalf("token over secret: %+v, %v", replaced, err)
	}
	testkit.WaitUntil(t, "the older beta to be replaced", func() bool { return shared2.reason.Load() == "replaced by a newer connection for beta" })
	if _, err := r.Attach("beta", newFake(), secret); !errors.Is(err, ErrTokenBound) {
		t.Fatalf("the secret took the name back: %v", err)
	}
}

// CloseConn closes the one connection whose credential ended, with the
// reason, shows its name offline, and leaves the others alone; a
// connection already replaced is closed without touching its successor.
func TestCloseConn(t *testing.T) {
	t.Parallel()
	r := New(time.Hour)
	ended, kept, older, newer := newFake(), newFake(), newFake(), newFake()
	attach(t, r, "alpha", ended, Info{Credential: CredentialToken})
	attach(t, r, "beta", kept, Info{Credential: CredentialToken})
	attach(t, r, "gamma", older, Info{Credential: CredentialToken})
	attach(t, r, "gamma", newer, Info{Credential: CredentialToken})
	if !r.CloseConn("alpha", ended, "token expired at 2030-01-01T00:00:00Z") {
		t.Fatal("alpha was not online")
	}
	if _, online, _ := r.Get("alpha"); online {
		t.Fatal("alpha still online")
	}
	testkit.WaitUntil(t, "alpha's connection to be closed", func() bool { return ended.reason.Load() != nil })
	if got := ended.reason.Load(); got != "token expired at 2030-01-01T00:00:00Z" {
		t.Fatalf("close reason %v", got)
	}
	if r.CloseConn("gamma", older, "token revoked") {
		t.Fatal("the replaced connection counted as online")
	}
	if _, online, _ := r.Get("gamma"); !online || newer.reason.Load() != nil {
		t.Fatal("closing the replaced connection took its successor down")
	}
	if _, online, _ := r.Get("beta"); !online || kept.reason.Load() != nil {
		t.Fatal("beta was closed")
	}
	if r.CloseConn("alpha", ended, "token revoked") {
		t.Fatal("closed twice")
	}
}

func TestValidName(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"a", "m1", "ci-box", strings.Repeat("a", 63)} {
		if !ValidName(ok) {
			t.Errorf("%q refused", ok)
		}
	}
	for _, bad := range []string{"", "-a", "a-", "A", "a_b", "a.b", "a/b", strings.Repeat("a", 64), "ü"} {
		if ValidName(bad) {
			t.Errorf("%q accepted", bad)
		}
	}
}

// CloseAll (a gateway stopping) takes each connector online offline as
// its leaving would, told to OnChange once, before closing them all; a
// connector already offline is not told again.
func TestCloseAllTakesEachOnlineConnectorOffline(t *testing.T) {
	t.Parallel()
	r := New(time.Hour)
	var mu sync.Mutex
	var changes []string
	r.OnChange = func(name, status string) { mu.Lock(); changes = append(changes, name+"="+status); mu.Unlock() }
	laptop, ciBox, gone := newFake(), newFake(), newFake()
	attach(t, r, "laptop", laptop, Info{})
	attach(t, r, "ci-box", ciBox, Info{})
	attach(t, r, "gone", gone, Info{})
	_ = gone.Close("left") // the fake's close does not fail
	testkit.WaitUntil(t, "gone to be offline", func() bool { _, online, _ := r.Get("gone"); return !online })
	r.CloseAll("gateway shutting down")
	for _, c := range []*fakeConn{laptop, ciBox} {
		if got := c.reason.Load(); got != "gateway shutting down" {
			t.Fatalf("closed with %v", got)
		}
	}
	if r.Online() != 0 {
		t.Fatalf("%d online after CloseAll", r.Online())
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{"laptop=online", "ci-box=online", "gone=online", "gone=offline", "ci-box=offline", "laptop=offline"}
	if strings.Join(changes, " ") != strings.Join(want, " ") {
		t.Fatalf("changes %v, want %v", changes, want)
	}
}

// Release takes a connection off without closing it, only while it is
// the name's online connection, and OnChange hears "moved", not
// "offline"; a newer connection under the name is untouched.
func TestReleaseTakesOffWithoutClosing(t *testing.T) {
	t.Parallel()
	r := New(time.Hour)
	var changes []string
	var mu sync.Mutex
	r.OnChange = func(name, status string) { mu.Lock(); changes = append(changes, name+"="+status); mu.Unlock() }
	old, newer := newFake(), newFake()
	attach(t, r, "laptop", old, Info{Protocol: "h2"})
	if r.Release("laptop", newer) || r.Release("desk", old) {
		t.Fatal("released a connection that is not the name's")
	}
	if !r.Release("laptop", old) {
		t.Fatal("did not release the name's connection")
	}
	if r.Release("laptop", old) {
		t.Fatal("released twice")
	}
	if _, online, known := r.Get("laptop"); online || !known {
		t.Fatalf("after release: online %v, known %v", online, known)
	}
	if old.reason.Load() != nil {
		t.Fatalf("release closed the connection: %v", old.reason.Load())
	}
	attach(t, r, "laptop", newer, Info{Protocol: "h2"})
	if r.Release("laptop", old) {
		t.Fatal("released the old connection over the newer one")
	}
	if c, online, _ := r.Get("laptop"); !online || c != newer {
		t.Fatal("the newer connection is not the name's")
	}
	mu.Lock()
	defer mu.Unlock()
	if got := strings.Join(changes, " "); got != "laptop=online laptop=moved laptop=online" {
		t.Fatalf("changes: %s", got)
	}
}

// OnEnd hears of every connection Attach took exactly once, when it has
// ended, whichever way it ends: its connector leaves, a newer connection
// replaces it, Release takes it off (its caller closes it later), it
// misses its heartbeats, or CloseAll ends it. Never before it has ended.
func TestOnEndHearsOfEachConnectionOnceItHasEnded(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		end  func(t *testing.T, r *Registry, c *fakeConn)
	}{
		{"its connector leaves", func(_ *testing.T, _ *Registry, c *fakeConn) { _ = c.Close("bye") }},
		{"a newer connection replaces it", func(t *testing.T, r *Registry, _ *fakeConn) { attach(t, r, "laptop", newFake(), Info{}) }},
		{"it is released, then closed", func(t *testing.T, r *Registry, c *fakeConn) {
			if !r.Release("laptop", c) {
				t.Error("not released")
			}
			_ = c.Close("moved")
		}},
		{"it misses its heartbeats", func(_ *testing.T, _ *Registry, c *fakeConn) { c.failing.Store(true) }},
		{"the gateway stops", func(_ *testing.T, r *Registry, _ *fakeConn) { r.CloseAll("stopping") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := New(10 * time.Millisecond)
			c := newFake()
			var ends atomic.Int32
			r.OnEnd = func(name string, got Conn) {
				select {
				case <-got.Done():
				default:
					t.Error("OnEnd heard of a connection that has not ended")
				}
				if name != "laptop" || got != c {
					t.Errorf("OnEnd(%s, %v)", name, got)
				}
				ends.Add(1)
			}
			attach(t, r, "laptop", c, Info{})
			testkit.WaitUntil(t, "a ping", func() bool { return c.pings.Load() > 0 })
			if n := ends.Load(); n != 0 {
				t.Fatalf("OnEnd heard %d times of a live connection", n)
			}
			tc.end(t, r, c)
			testkit.WaitUntil(t, "OnEnd to hear", func() bool { return ends.Load() > 0 })
			if n := ends.Load(); n != 1 {
				t.Fatalf("OnEnd heard %d times", n)
			}
		})
	}
}
