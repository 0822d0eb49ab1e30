package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/uncaged/workflow/gateway/notify"
	"github.com/uncaged/workflow/gateway/store"
	"github.com/uncaged/workflow/shared/fleet"
	"github.com/uncaged/workflow/shared/testkit"
	"github.com/uncaged/workflow/shared/testkit/pgtest"
)

// notifyReceiver is a real HTTP receiver: it verifies every body's
// signature as a user's would, and refuses the first failures requests.
type notifyReceiver struct {
	t      *testing.T
	secret []byte
	srv    *httptest.Server

	mu       sync.Mutex
	failures int
	attempts int
	got      []notify.Payload
	bad      []string
}

func newNotifyReceiver(t *testing.T, secret []byte, failures int) *notifyReceiver {
	r := &notifyReceiver{t: t, secret: secret, failures: failures}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		defer r.mu.Unlock()
		r.attempts++
		if !notify.Verify(r.secret, body, req.Header.Get(notify.SignatureHeader)) {
			r.bad = append(r.bad, "bad signature: "+string(body))
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		if r.failures > 0 {
			r.failures--
			http.Error(w, "try later", http.StatusServiceUnavailable)
			return
		}
		var p notify.Payload
		if err := json.Unmarshal(body, &p); err != nil || req.Header.Get(notify.DeliveryHeader) != fmt.Sprint(p.Delivery) {
			r.bad = append(r.bad, "bad body: "+string(body))
		}
		r.got = append(r.got, p)
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// setFailures makes the next n requests fail.
func (r *notifyReceiver) setFailures(n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failures = n
}

// events are what it took, as "machine/thread status", in arrival order.
func (r *notifyReceiver) events() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.bad) > 0 {
		r.t.Errorf("refused: %q", r.bad)
	}
	var out []string
	for _, p := range r.got {
		out = append(out, p.Machine+"/"+p.Thread+" "+p.Status)
	}
	return out
}

func (r *notifyReceiver) waitEvents(n int) []string {
	r.t.Helper()
	var got []string
	testkit.WaitUntil(r.t, fmt.Sprintf("%d notifications", n), func() bool {
		got = r.events()
		return len(got) >= n
	})
	return got
}

var notifySecret = []byte("webhook secret")

// notifyConfig notifies r of the statuses on.
func notifyConfig(t *testing.T, r *notifyReceiver, on ...string) *notify.Config {
	t.Helper()
	targets, err := notify.ParseTargets([]string{r.srv.URL + "/hook"})
	if err != nil {
		t.Fatal(err)
	}
	return &notify.Config{Targets: targets, On: on, Secret: notifySecret, Format: notify.FormatJSON, PublicURL: "https://gw.example.com"}
}

// quickRetries retries at once and polls often: the tests wait for the
// sends, never for a backoff.
func quickRetries(o *notify.Options) {
	o.Backoff = func(int, float64) time.Duration { return time.Millisecond }
	o.Poll = 10 * time.Millisecond
}

// newNotifyFixture is a gateway keeping its fleet in a SQLite store in
// dir, notifying cfg.
func newNotifyFixture(t *testing.T, dir string, cfg *notify.Config) (*fixture, store.Store) {
	t.Helper()
	st, err := store.Open(context.Background(), store.Config{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return newFixture(t, time.Hour, func(o *Options) {
		o.Store, o.Notify, o.notifyOptions = st, cfg, quickRetries
	}), st
}

// The gateway notifies a real receiver, which verifies every signature,
// of the waiting and completed threads a connector reports, not of a
// status it did not ask for; a receiver failing twice gets it on the
// third attempt.
func TestNotifyWaitingAndCompletedSigned(t *testing.T) {
	t.Parallel()
	r := newNotifyReceiver(t, notifySecret, 2)
	f, st := newNotifyFixture(t, t.TempDir(), notifyConfig(t, r, "waiting", "completed"))
	now := time.Now().UTC()
	fc := newFakeConnector(fakeThread("a", "wf", "running", "do it", "", now))
	f.connector("laptop", fc)
	fc.add(fakeThread("a", "wf", "waiting", "do it", "", now.Add(time.Second)))
	fc.add(fakeThread("b", "wf", "failed", "other", "broke", now.Add(2*time.Second)))
	fc.add(fakeThread("a", "wf", "completed", "do it", "all done", now.Add(3*time.Second)))
	got := slices.Sorted(slices.Values(r.waitEvents(2))) // sent at once: either may arrive first
	// The failed thread is heard before the completion, so by then its
	// (absent) notification would have been added.
	if want := []string{"laptop/a completed", "laptop/a waiting"}; !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	r.mu.Lock()
	attempts, last := r.attempts, r.got[0]
	if last.Status != "completed" {
		last = r.got[1]
	}
	r.mu.Unlock()
	if attempts < 4 || last.Summary != "all done" || last.URL != "https://gw.example.com/#/m/laptop/threads/a" || last.Workflow != "wf" {
		t.Fatalf("%d attempts; last %+v", attempts, last)
	}
	page, err := st.ListNotifications(context.Background(), store.NotificationQuery{})
	if err != nil || page.Total != 2 {
		t.Fatalf("%+v %v", page, err)
	}
	testkit.WaitUntil(t, "both recorded delivered", func() bool {
		page, _ := st.ListNotifications(context.Background(), store.NotificationQuery{State: store.NotifyDelivered})
		return page.Total == 2
	})

	// The dashboard's list: newest first, dashboard credential only.
	resp, body := f.do("GET", "/api/gateway/notifications", f.dash, nil)
	var list struct {
		Notifications []notificationJSON `json:"notifications"`
		Total         int                `json:"total"`
		Enabled       bool               `json:"enabled"`
	}
	if resp.StatusCode != 200 || json.Unmarshal([]byte(body), &list) != nil || list.Total != 2 || !list.Enabled ||
		list.Notifications[0].Status != "completed" || list.Notifications[1].State != "delivered" ||
		list.Notifications[0].Attempts+list.Notifications[1].Attempts != 4 || strings.Contains(body, "/hook") {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}

	// One notification, a receiver failing twice: the third attempt.
	r.setFailures(2)
	fc.add(fakeThread("c", "wf", "waiting", "p", "", now.Add(4*time.Second)))
	if got := r.waitEvents(3); got[2] != "laptop/c waiting" {
		t.Fatalf("got %q", got)
	}
	testkit.WaitUntil(t, "c recorded delivered on its third attempt", func() bool {
		page, _ := st.ListNotifications(context.Background(), store.NotificationQuery{State: store.NotifyDelivered, Limit: 1})
		return page.Total == 3 && page.Notifications[0].Thread == "c" && page.Notifications[0].Attempts == 3
	})
	if resp, _ := f.do("GET", "/api/gateway/notifications", "", nil); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("without a credential: %d", resp.StatusCode)
	}
	for _, bad := range []string{"state=sent", "limit=0", "offset=-1", "machine=a%20b", "color=red", "state=failed&state=pending"} {
		if resp, body := f.do("GET", "/api/gateway/notifications?"+bad, f.dash, nil); resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%s: %d %s", bad, resp.StatusCode, body)
		}
	}
}

// A change stream heard again — resumed after a break, resynced after the
// connector restarted, read again after the tunnel came back — notifies
// of nothing it notified of before.
func TestNotifyNotTwiceFromAResyncedStream(t *testing.T) {
	t.Parallel()
	for _, v := range []struct {
		name  string
		again func(f *fixture, fc *fakeConnector, cancel *context.CancelFunc)
	}{
		{"the stream breaks and resumes", func(_ *fixture, fc *fakeConnector, _ *context.CancelFunc) { fc.breakStreams() }},
		{"the connector restarts and sends everything", func(_ *fixture, fc *fakeConnector, _ *context.CancelFunc) {
			fc.restart()
			fc.breakStreams()
		}},
		{"the tunnel goes and comes back", func(f *fixture, fc *fakeConnector, cancel *context.CancelFunc) {
			(*cancel)()
			f.waitStatus("laptop", "offline")
			*cancel = f.connector("laptop", fc)
		}},
		{"the tunnel comes back to a restarted connector", func(f *fixture, fc *fakeConnector, cancel *context.CancelFunc) {
			(*cancel)()
			f.waitStatus("laptop", "offline")
			fc.restart()
			*cancel = f.connector("laptop", fc)
		}},
	} {
		t.Run(v.name, func(t *testing.T) {
			t.Parallel()
			r := newNotifyReceiver(t, notifySecret, 0)
			f, _ := newNotifyFixture(t, t.TempDir(), notifyConfig(t, r, "waiting", "failed", "completed"))
			now := time.Now().UTC()
			fc := newFakeConnector(
				fakeThread("a", "wf", "running", "p", "", now),
				fakeThread("a", "wf", "completed", "p", "done", now.Add(time.Second)),
				fakeThread("b", "wf", "failed", "p", "broke", now.Add(2*time.Second)),
			)
			cancel := f.connector("laptop", fc)
			first := r.waitEvents(2)
			for round := range 3 {
				v.again(f, fc, &cancel)
				// A new change after the replay: once it is heard, so was
				// everything before it (the store's writes are in order).
				marker := fmt.Sprintf("m%d", round)
				fc.add(fakeThread(marker, "wf", "completed", "p", "", now.Add(time.Duration(3+round)*time.Second)))
				got := r.waitEvents(3 + round)
				want := append(slices.Clone(first), "laptop/m0 completed")
				for i := 1; i <= round; i++ {
					want = append(want, fmt.Sprintf("laptop/m%d completed", i))
				}
				if !slices.Equal(got, want) {
					t.Fatalf("round %d: got %q, want %q", round, got, want)
				}
			}
		})
	}
}

// A notification pending when the gateway stops is sent, once, by the
// gateway started again on the same data directory.
func TestNotifySurvivesARestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	r := newNotifyReceiver(t, notifySecret, 1_000_000) // down for now
	cfg := notifyConfig(t, r, "completed")
	f, st := newNotifyFixture(t, dir, cfg)
	fc := newFakeConnector(fakeThread("a", "wf", "completed", "p", "done", time.Now().UTC()))
	f.connector("laptop", fc)
	testkit.WaitUntil(t, "an attempt failed", func() bool {
		page, _ := st.ListNotifications(context.Background(), store.NotificationQuery{})
		return len(page.Notifications) == 1 && page.Notifications[0].Attempts >= 1
	})
	f.gw.Shutdown() // its sender stops; the notification stays pending
	page, err := st.ListNotifications(context.Background(), store.NotificationQuery{})
	if err != nil || page.Notifications[0].State != store.NotifyPending {
		t.Fatalf("after the stop: %+v %v", page, err)
	}
	r.setFailures(0) // the receiver is back

	again, st2 := newNotifyFixture(t, dir, cfg)
	_ = again
	testkit.WaitUntil(t, "delivered after the restart", func() bool {
		page, _ := st2.ListNotifications(context.Background(), store.NotificationQuery{State: store.NotifyDelivered})
		return page.Total == 1
	})
	if got := r.events(); !slices.Equal(got, []string{"laptop/a completed"}) {
		t.Fatalf("got %q", got)
	}
}

// Replicas sharing a PostgreSQL database each run a sender: every
// notification is delivered by exactly one of them, through retries.
func TestNotifyExactlyOnceAcrossReplicas(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	r := newNotifyReceiver(t, notifySecret, 5)
	cfg := notifyConfig(t, r, "completed")
	var replicas []*fixture
	var stores []store.Store
	for range 3 {
		st, err := store.Open(context.Background(), store.Config{DatabaseURL: url})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		stores = append(stores, st)
		replicas = append(replicas, newFixture(t, time.Hour, func(o *Options) {
			o.Store, o.Notify, o.notifyOptions = st, cfg, quickRetries
		}))
	}
	const threads = 40
	now := time.Now().UTC()
	var list []fleet.Thread
	for i := range threads {
		list = append(list, fakeThread(fmt.Sprintf("t%02d", i), "wf", "completed", "p", "", now))
	}
	// Two machines on two replicas, as a cluster spreads connectors.
	replicas[0].connector("laptop", newFakeConnector(list[:threads/2]...))
	replicas[1].connector("ci-box", newFakeConnector(list[threads/2:]...))
	got := r.waitEvents(threads)
	testkit.WaitUntil(t, "every notification recorded delivered", func() bool {
		page, _ := stores[2].ListNotifications(context.Background(), store.NotificationQuery{State: store.NotifyDelivered})
		return page.Total == threads
	})
	r.mu.Lock()
	ids := map[int64]int{}
	for _, p := range r.got {
		ids[p.Delivery]++
	}
	r.mu.Unlock()
	for id, n := range ids {
		if n != 1 {
			t.Errorf("delivery %d received %d times", id, n)
		}
	}
	if len(got) != threads || len(ids) != threads {
		t.Fatalf("%d received, %d distinct, want %d", len(got), len(ids), threads)
	}
}
