package cluster

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/uncaged/workflow/gateway/internal/fakeclock"
	"github.com/uncaged/workflow/gateway/internal/natstest"
	"github.com/uncaged/workflow/gateway/legacy"
	"github.com/uncaged/workflow/gateway/presence"
	"github.com/uncaged/workflow/shared/testkit"
)

// fakeLocal is a replica's own connectors, set by the test.
type fakeLocal struct {
	mu       sync.Mutex
	eps      map[string]presence.Endpoint
	replaced map[string]string // name → reason
	regs     map[string]legacy.Registration
}

func newFakeLocal(eps ...presence.Endpoint) *fakeLocal {
	l := &fakeLocal{eps: map[string]presence.Endpoint{}, replaced: map[string]string{}, regs: map[string]legacy.Registration{}}
	for _, e := range eps {
		l.eps[e.Name] = e
	}
	return l
}

func (l *fakeLocal) List() []presence.Endpoint {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []presence.Endpoint
	for _, e := range l.eps {
		out = append(out, e)
	}
	return out
}

func (l *fakeLocal) Replace(name, _, reason string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.replaced[name] = reason
	e := l.eps[name]
	e.Status = presence.Offline
	l.eps[name] = e
}

func (l *fakeLocal) Registered(r legacy.Registration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.regs[r.Name] = r
}

func (l *fakeLocal) registration(name string) legacy.Registration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.regs[name]
}

func (l *fakeLocal) set(e presence.Endpoint) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.eps[e.Name] = e
}

func (l *fakeLocal) replacedReason(name string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.replaced[name]
}

func online(name string, connectedAt int64) presence.Endpoint {
	return presence.Endpoint{Name: name, URL: "tunnel://" + name, Status: presence.Online, ConnectedAt: connectedAt, LastHeartbeat: connectedAt}
}

// member starts a replica on url holding local's connectors.
func member(t *testing.T, url, id string, interval time.Duration, local *fakeLocal) *Cluster {
	t.Helper()
	c, err := New(Options{NATS: url, ReplicaID: id, Advertise: "http://127.0.0.1:1" + id[1:], Key: testKey, Interval: interval})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(local); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// natsClient is a plain NATS connection: anyone with access to NATS.
func natsClient(t *testing.T, url string) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// wiretap is a natsClient subscribed to the presence subject: whatever
// crosses it, as anyone with access to NATS sees it.
func wiretap(t *testing.T, url string) (*nats.Conn, *nats.Subscription) {
	t.Helper()
	nc := natsClient(t, url)
	wire, err := nc.SubscribeSync(subjectPresence)
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return nc, wire
}

// readGreeting reads messages off wire, tapped before c started, until
// c's greeting: the snapshot it publishes from NATS's connect callback,
// after Start has returned.
func readGreeting(t *testing.T, wire *nats.Subscription, c *Cluster) {
	t.Helper()
	for greeted := false; !greeted; {
		got, err := wire.NextMsg(testkit.WaitBound)
		if err != nil {
			t.Fatalf("waiting for %s's greeting: %v", c.o.ReplicaID, err)
		}
		m, err := decode(c.key, got.Data, got.Header.Get(macHeader), time.Now())
		greeted = err == nil && m.Replica == c.o.ReplicaID && m.Kind == kindSnapshot && !m.More
	}
}

func routeOf(c *Cluster, name string) Route {
	r, _ := c.Lookup(name)
	return r
}

func TestReplicasShareWhoHoldsWhat(t *testing.T) {
	t.Parallel()
	url := natstest.Start(t).ClientURL()
	// A long interval: what the late joiner knows comes from the snapshots
	// it asked for, not from the periodic ones.
	l1, l2 := newFakeLocal(online("laptop", 100)), newFakeLocal(online("ci-box", 100))
	c1 := member(t, url, "r1", time.Hour, l1)
	c2 := member(t, url, "r2", time.Hour, l2)
	testkit.WaitUntil(t, "r1 and r2 to see each other", func() bool { return routeOf(c1, "ci-box").Online && routeOf(c2, "laptop").Online })
	c3 := member(t, url, "r3", time.Hour, newFakeLocal())
	testkit.WaitUntil(t, "the new replica to know the world", func() bool {
		return routeOf(c3, "laptop").Replica == "r1" && routeOf(c3, "ci-box").Replica == "r2"
	})
	if r := routeOf(c3, "laptop"); r.Advertise != "http://127.0.0.1:11" || !r.Online {
		t.Fatalf("route %+v", r)
	}
	if _, known := c3.Lookup("nobody"); known {
		t.Fatal("an unknown name is known")
	}
	if c3.Peers() != 2 || !c3.Connected() {
		t.Fatalf("peers %d, connected %v", c3.Peers(), c3.Connected())
	}

	// A connector arriving on r3 is announced at once.
	l3 := c3.local.(*fakeLocal)
	l3.set(online("phone", 200))
	c3.LocalChanged("phone")
	testkit.WaitUntil(t, "r1 to hear of phone", func() bool { return routeOf(c1, "phone").Replica == "r3" })

	// The endpoints list is global, with the holder of each.
	eps := c1.Endpoints(l1.List())
	got := map[string]string{}
	for _, e := range eps {
		got[e.Name] = e.Replica + "/" + e.Status
	}
	if len(eps) != 3 || got["laptop"] != "r1/online" || got["ci-box"] != "r2/online" || got["phone"] != "r3/online" {
		t.Fatalf("endpoints %v", got)
	}

	// Gone offline on r3: known, not online.
	l3.set(presence.Endpoint{Name: "phone", Status: presence.Offline, ConnectedAt: 200})
	c3.LocalChanged("phone")
	testkit.WaitUntil(t, "r1 to see phone offline", func() bool {
		r, known := c1.Lookup("phone")
		return known && !r.Online
	})

	// A replica leaving takes its connectors offline at once.
	c2.Close()
	testkit.WaitUntil(t, "r1 to see r2's connectors offline", func() bool { return !routeOf(c1, "ci-box").Online })
	if c1.Peers() != 1 {
		t.Fatalf("r1 counts %d peers after r2 left", c1.Peers())
	}
}

func TestASilentReplicaExpires(t *testing.T) {
	t.Parallel()
	url := natstest.Start(t).ClientURL()
	c1 := member(t, url, "r1", 20*time.Millisecond, newFakeLocal())
	c2 := member(t, url, "r2", 20*time.Millisecond, newFakeLocal(online("laptop", 100)))
	testkit.WaitUntil(t, "r1 to see laptop", func() bool { return routeOf(c1, "laptop").Online })
	// Dies without a word: no leave message.
	c2.closeOnce.Do(func() {
		close(c2.stop)
		<-c2.stopped
		c2.nc.Close()
	})
	testkit.WaitUntil(t, "laptop to expire", func() bool {
		r, known := c1.Lookup("laptop")
		return known && !r.Online
	})
	for _, e := range c1.Endpoints(nil) {
		if e.Name == "laptop" && e.Status != presence.Offline {
			t.Fatalf("expired connector listed %+v", e)
		}
	}
}

func TestTheNewestConnectionWinsAcrossReplicas(t *testing.T) {
	t.Parallel()
	url := natstest.Start(t).ClientURL()
	l1, l2 := newFakeLocal(online("laptop", 100)), newFakeLocal()
	c1 := member(t, url, "r1", time.Hour, l1)
	c2 := member(t, url, "r2", time.Hour, l2)
	testkit.WaitUntil(t, "r2 to see laptop on r1", func() bool { return routeOf(c2, "laptop").Replica == "r1" })
	// laptop reconnects, to r2.
	l2.set(online("laptop", 200))
	c2.LocalChanged("laptop")
	testkit.WaitUntil(t, "r1 to give laptop up", func() bool { return l1.replacedReason("laptop") != "" })
	if why := l1.replacedReason("laptop"); !strings.HasPrefix(why, "replaced by a newer connection for laptop on replica r2") {
		t.Fatalf("reason %q", why)
	}
	c1.LocalChanged("laptop")
	testkit.WaitUntil(t, "r2 to see r1's laptop offline", func() bool {
		for _, e := range c2.Endpoints(l2.List()) {
			if e.Name == "laptop" {
				return e.Replica == "r2" && e.Status == presence.Online
			}
		}
		return false
	})
	if l2.replacedReason("laptop") != "" {
		t.Fatal("the newer connection was replaced")
	}
}

func TestNewerBreaksTiesByReplica(t *testing.T) {
	t.Parallel()
	a, b := online("x", 5), online("x", 5)
	if newer(a, "r1", b, "r2") == newer(b, "r2", a, "r1") {
		t.Fatal("a tie must have exactly one winner")
	}
}

func TestForgedPresenceIsIgnored(t *testing.T) {
	t.Parallel()
	url := natstest.Start(t).ClientURL()
	c1 := member(t, url, "r1", time.Hour, newFakeLocal())
	nc := natsClient(t, url)
	forged := message{Kind: kindSnapshot, Replica: "evil", Advertise: "http://203.0.113.1:80", Sent: time.Now().UnixMilli(),
		Endpoints: []presence.Endpoint{online("laptop", 100)}}
	data, _, _ := encode(testKey, forged)
	msg := nats.NewMsg(subjectPresence)
	msg.Data = data
	msg.Header.Set(macHeader, sign([]byte(strings.Repeat("x", 32)), "presence", string(data)))
	if err := nc.PublishMsg(msg); err != nil {
		t.Fatal(err)
	}
	// A genuine message after it, on the same connection, arrives after it.
	genuine := message{Kind: kindSnapshot, Replica: "r9", Advertise: "http://127.0.0.1:9", Sent: time.Now().UnixMilli(),
		Endpoints: []presence.Endpoint{online("marker", 100)}}
	data, mac, _ := encode(c1.key, genuine)
	msg = nats.NewMsg(subjectPresence)
	msg.Data = data
	msg.Header.Set(macHeader, mac)
	if err := nc.PublishMsg(msg); err != nil {
		t.Fatal(err)
	}
	testkit.WaitUntil(t, "the genuine message", func() bool { return routeOf(c1, "marker").Online })
	if _, known := c1.Lookup("laptop"); known {
		t.Fatal("a forged announcement was believed")
	}
}

func TestALargeSnapshotArrivesInParts(t *testing.T) {
	t.Parallel()
	url := natstest.Start(t).ClientURL()
	big := newFakeLocal()
	for i := range 2*maxPerMessage + 7 {
		big.set(online(fmt.Sprintf("m%d", i), 100))
	}
	member(t, url, "r1", time.Hour, big)
	c2 := member(t, url, "r2", time.Hour, newFakeLocal())
	testkit.WaitUntil(t, "r2 to know all of r1's connectors", func() bool { return len(c2.Endpoints(nil)) == 2*maxPerMessage+7 })
	for _, e := range c2.Endpoints(nil) {
		if e.Replica != "r1" || e.Status != presence.Online {
			t.Fatalf("%+v", e)
		}
	}
}

func TestRegistrationsAreSharedSealed(t *testing.T) {
	t.Parallel()
	url := natstest.Start(t).ClientURL()
	c1 := member(t, url, "r1", time.Hour, newFakeLocal())
	l2 := newFakeLocal()
	member(t, url, "r2", time.Hour, l2)
	_, wire := wiretap(t, url)
	c1.ShareRegistration(legacy.Registration{Name: "old-client", URL: "http://10.0.0.5:3000", ClientToken: "client-token-secret"})
	testkit.WaitUntil(t, "r2 to learn the registration", func() bool { return l2.registration("old-client").ClientToken == "client-token-secret" })
	for {
		msg, err := wire.NextMsg(5 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(msg.Data), `"registration"`) {
			if strings.Contains(string(msg.Data), "client-token-secret") {
				t.Fatalf("the client token crossed NATS in clear: %s", msg.Data)
			}
			break
		}
	}
	c1.ShareRegistration(legacy.Registration{Name: "old-client", Removed: true})
	testkit.WaitUntil(t, "r2 to learn the removal", func() bool { return l2.registration("old-client").Removed })
}

func TestOpenRegistrationRefusesBadNames(t *testing.T) {
	t.Parallel()
	key := []byte(strings.Repeat("s", 32))
	good, err := legacy.SealRegistration(key, legacy.Registration{Name: "old-client", ClientToken: "t"})
	if err != nil {
		t.Fatal(err)
	}
	badName, err := legacy.SealRegistration(key, legacy.Registration{Name: "Not A Name"})
	if err != nil {
		t.Fatal(err)
	}
	if r, err := openRegistration(key, badName); err == nil || r.Name != "" {
		t.Errorf("bad name: %+v %v", r, err)
	}
	if r, err := openRegistration(key, "AAAA"); err == nil || r.Name != "" {
		t.Errorf("too short: %+v %v", r, err)
	}
	if r, err := openRegistration(key, good); err != nil || r.ClientToken != "t" {
		t.Fatalf("good: %+v %v", r, err)
	}
}

// A signed message captured off NATS and published again is ignored: here
// a registration the client has since removed would come back.
func TestReplayedMessagesAreIgnored(t *testing.T) {
	t.Parallel()
	url := natstest.Start(t).ClientURL()
	c1 := member(t, url, "r1", time.Hour, newFakeLocal())
	l2 := newFakeLocal()
	c2 := member(t, url, "r2", time.Hour, l2)
	nc, wire := wiretap(t, url)
	c1.ShareRegistration(legacy.Registration{Name: "old-client", URL: "http://10.0.0.5:3000", ClientToken: "t"})
	var captured *nats.Msg
	for captured == nil {
		msg, err := wire.NextMsg(5 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(msg.Data), `"registration"`) {
			captured = msg
		}
	}
	testkit.WaitUntil(t, "r2 to learn the registration", func() bool { return l2.registration("old-client").ClientToken == "t" })
	c1.ShareRegistration(legacy.Registration{Name: "old-client", Removed: true})
	testkit.WaitUntil(t, "r2 to learn the removal", func() bool { return l2.registration("old-client").Removed })

	replay := nats.NewMsg(subjectPresence)
	replay.Data, replay.Header = captured.Data, captured.Header
	if err := nc.PublishMsg(replay); err != nil {
		t.Fatal(err)
	}
	// A genuine message after it, on the same connection, arrives after it.
	marker := message{Kind: kindSnapshot, Replica: "r9", Advertise: "http://127.0.0.1:9", Sent: time.Now().UnixMilli(),
		Endpoints: []presence.Endpoint{online("marker", 100)}}
	data, mac, _ := encode(c1.key, marker)
	msg := nats.NewMsg(subjectPresence)
	msg.Data = data
	msg.Header.Set(macHeader, mac)
	if err := nc.PublishMsg(msg); err != nil {
		t.Fatal(err)
	}
	testkit.WaitUntil(t, "r2 to see the marker", func() bool { return routeOf(c2, "marker").Online })
	if r := l2.registration("old-client"); !r.Removed {
		t.Fatalf("a replayed registration was applied: %+v", r)
	}
}

func TestOnlySignedHellosGetSnapshots(t *testing.T) {
	t.Parallel()
	url := natstest.Start(t).ClientURL()
	// Tapped before r1 starts: its greeting (a snapshot, published from
	// NATS's connect callback, after Start returns) is read off the wire
	// first, so no case below counts it as an answer.
	_, wire := wiretap(t, url)
	c1 := member(t, url, "r1", time.Hour, newFakeLocal(online("laptop", 100)))
	readGreeting(t, wire, c1)
	call := func(kind, replica string, key []byte) *nats.Msg {
		data, mac, _ := encode(key, message{Kind: kind, Replica: replica, Advertise: "http://127.0.0.1:9", Sent: time.Now().UnixMilli()})
		msg := nats.NewMsg(subjectSnapshot)
		msg.Data = data
		msg.Header.Set(macHeader, mac)
		return msg
	}
	// answers hands r1 one call and counts the snapshots it published in
	// answer: everything r1 sends before the marker it sends next.
	answers := func(i int, msg *nats.Msg) int {
		c1.answerSnapshot(msg)
		marker := fmt.Sprintf("marker-%d", i)
		c1.publish(message{Kind: kindUpdate, Endpoints: []presence.Endpoint{online(marker, 100)}})
		n := 0
		for {
			got, err := wire.NextMsg(5 * time.Second)
			if err != nil {
				t.Fatalf("waiting for %s: %v", marker, err)
			}
			m, err := decode(c1.key, got.Data, got.Header.Get(macHeader), time.Now())
			if err != nil || m.Replica != "r1" {
				continue
			}
			if m.Kind == kindSnapshot {
				n++
			}
			if m.Kind == kindUpdate && len(m.Endpoints) == 1 && m.Endpoints[0].Name == marker {
				return n
			}
		}
	}
	unsigned := nats.NewMsg(subjectSnapshot) // how calls looked before they were signed
	genuine := call(kindHello, "r9", c1.key)
	for i, tc := range []struct {
		what string
		msg  *nats.Msg
		want int
	}{
		{"an unsigned call", unsigned, 0},
		{"a forged hello", call(kindHello, "r9", []byte(strings.Repeat("x", 32))), 0},
		{"a signed message of another kind", call(kindSnapshot, "r9", c1.key), 0},
		{"its own hello", call(kindHello, "r1", c1.key), 0},
		{"a genuine hello", genuine, 1},
		{"that hello replayed", genuine, 0},
		{"another genuine hello", call(kindHello, "r8", c1.key), 1},
	} {
		if got := answers(i, tc.msg); got != tc.want {
			t.Errorf("%s: %d snapshots, want %d", tc.what, got, tc.want)
		}
	}
}

// "replica silent" is logged for a replica that went quiet without a
// word, never for one that said it was leaving: its connectors went
// offline at once, and nothing is wrong.
func TestOnlyASilentReplicaIsLoggedSilent(t *testing.T) {
	t.Parallel()
	url := natstest.Start(t).ClientURL()
	clock := fakeclock.New(time.Now())
	// Every replica reads the one clock, so their messages stay fresh
	// while the test moves it; the loops' own sweeps, a minute apart in
	// real time, judge by it too.
	const interval = time.Minute
	var logs testkit.Buffer
	join := func(id string, local *fakeLocal, logger *slog.Logger) *Cluster {
		c, err := New(Options{NATS: url, ReplicaID: id, Advertise: "http://127.0.0.1:1" + id[1:], Key: testKey, Interval: interval, Logger: logger})
		if err != nil {
			t.Fatal(err)
		}
		c.now = clock.Now
		if err := c.Start(local); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		return c
	}
	watcher := join("r1", newFakeLocal(), slog.New(slog.NewJSONHandler(&logs, nil)))
	leaving := join("r2", newFakeLocal(online("laptop", 100)), nil)
	dying := join("r3", newFakeLocal(online("ci-box", 100)), nil)
	testkit.WaitUntil(t, "r1 to see r2's and r3's connectors", func() bool {
		return routeOf(watcher, "laptop").Online && routeOf(watcher, "ci-box").Online
	})
	leaving.Close()
	testkit.WaitUntil(t, "r1 to hear r2 leave", func() bool { return !routeOf(watcher, "laptop").Online })
	dying.closeOnce.Do(func() { // no leave message
		close(dying.stop)
		<-dying.stopped
		dying.nc.Close()
	})
	clock.Advance(expiryIntervals*interval + interval/2)
	// r1 goes on hearing (its own snapshot, every interval): r3's silence
	// is r3's, not a deafness of r1's (heardNow).
	watcher.publishSnapshot()
	testkit.WaitUntil(t, "r1 to hear its own snapshot", func() bool {
		watcher.mu.RLock()
		defer watcher.mu.RUnlock()
		return !watcher.catch.lastHeard.Before(clock.Now())
	})
	changed := watcher.Changed()
	watcher.sweep()
	select {
	case <-changed:
	default:
		t.Fatal("r3 falling silent did not wake those waiting on Changed: its connectors went offline")
	}
	silent := map[string]int{}
	for line := range strings.SplitSeq(strings.TrimSpace(logs.String()), "\n") {
		var l struct{ Msg, Replica string }
		if json.Unmarshal([]byte(line), &l) == nil && strings.HasPrefix(l.Msg, "replica silent") {
			silent[l.Replica]++
		}
	}
	if silent["r2"] != 0 || silent["r3"] == 0 {
		t.Fatalf("replicas logged silent: %v; want r3, which died, and not r2, which left:\n%s", silent, logs.String())
	}
}

// Once a replica has sent its leave, it sends no snapshot or update, so
// the others never take it for back (and then for silent): a call for
// snapshots answered while it leaves, or a connector change, publishes
// nothing.
func TestNothingFollowsTheLeave(t *testing.T) {
	t.Parallel()
	url := natstest.Start(t).ClientURL()
	local := newFakeLocal(online("laptop", 100))
	// Tapped before r1 starts, and its greeting read off the wire: it
	// was published before the leave.
	nc, wire := wiretap(t, url)
	c := member(t, url, "r1", time.Hour, local)
	readGreeting(t, wire, c)
	c.pubMu.Lock()
	c.left = true // as Close does before it sends the leave
	c.pubMu.Unlock()
	c.publishSnapshot()
	local.set(online("ci-box", 200))
	c.dirtyMu.Lock()
	c.dirty["ci-box"] = struct{}{}
	c.dirtyMu.Unlock()
	c.publishChanges()
	// Whatever the replica sent has reached the server once its flush
	// returns, so a message published after that arrives after it: the
	// first to arrive is the marker.
	if err := c.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := nc.Publish(subjectPresence, []byte("marker")); err != nil {
		t.Fatal(err)
	}
	msg, err := wire.NextMsg(testkit.WaitBound)
	if err != nil || string(msg.Data) != "marker" {
		t.Fatalf("a replica that has left published %v (%v)", msg, err)
	}
}
