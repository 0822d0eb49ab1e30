package store_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/uncaged/workflow/gateway/store"
)

// notifyTargets are two receivers: one hears of everything, one of
// completions only.
var notifyTargets = []store.NotifyTarget{
	{Key: "all", Label: "https://all.example", On: []string{"waiting", "failed", "completed"}},
	{Key: "done", Label: "https://done.example", On: []string{"completed"}},
}

// st is a thread of the notification tests, updated at the given time.
func st(id, status string, at time.Time) store.Thread {
	return store.Thread{ID: id, Workflow: "wf", Status: status, UpdatedAt: at, Summary: "summary of " + id}
}

// event is what a notification is about, to compare lists.
func event(n store.Notification) string {
	return fmt.Sprintf("%s %s %s %s", n.Target, n.Thread, n.Status, n.UpdatedAt.Format("15:04:05"))
}

// TestNotifyOnTransitions feeds a store batches of threads as change
// streams send them — resumed, resynced, replayed, reordered — and checks
// that a notification is added once per change of status into one a
// receiver hears of, never for one heard again.
func TestNotifyOnTransitions(t *testing.T) {
	base := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC) // the clock's start
	t0, t1, t2 := base.Add(-3*time.Minute), base.Add(-2*time.Minute), base.Add(-time.Minute)
	old := base.Add(-2 * time.Hour)
	cases := []struct {
		name    string
		batches [][]store.Thread
		want    []string // events, sorted
	}{
		{"running then completed",
			[][]store.Thread{{st("a", "running", t0)}, {st("a", "completed", t1)}},
			[]string{"all a completed 11:58:00", "done a completed 11:58:00"}},
		{"completed heard again after a reconnect",
			[][]store.Thread{{st("a", "running", t0)}, {st("a", "completed", t1)}, {st("a", "completed", t1)}},
			[]string{"all a completed 11:58:00", "done a completed 11:58:00"}},
		{"full resync after a connector restart repeats every thread",
			[][]store.Thread{{st("a", "running", t0), st("b", "failed", t0)}, {st("a", "completed", t1)},
				{st("a", "completed", t1), st("b", "failed", t0)}},
			[]string{"all a completed 11:58:00", "all b failed 11:57:00", "done a completed 11:58:00"}},
		{"a batch replayed from the spill file after newer ones",
			[][]store.Thread{{st("a", "running", t0)}, {st("a", "completed", t1)}, {st("a", "running", t0)}, {st("a", "completed", t1)}},
			[]string{"all a completed 11:58:00", "done a completed 11:58:00"}},
		{"a status no receiver hears of",
			[][]store.Thread{{st("a", "running", t0)}, {st("a", "killed", t1)}, {st("a", "interrupted", t2)}},
			nil},
		{"failed is heard by the receiver that asked only",
			[][]store.Thread{{st("a", "running", t0)}, {st("a", "failed", t1)}},
			[]string{"all a failed 11:58:00"}},
		{"waiting twice, with a run between",
			[][]store.Thread{{st("a", "running", t0)}, {st("a", "waiting", t1)}, {st("a", "running", t1.Add(time.Second))}, {st("a", "waiting", t2)}},
			[]string{"all a waiting 11:58:00", "all a waiting 11:59:00"}},
		{"another field changes, the status does not",
			[][]store.Thread{{st("a", "completed", t0)}, {func() store.Thread { x := st("a", "completed", t1); x.Summary = "new"; return x }()}},
			[]string{"all a completed 11:57:00", "done a completed 11:57:00"}},
		{"both changes in one batch",
			[][]store.Thread{{st("a", "running", t0), st("a", "completed", t1)}},
			[]string{"all a completed 11:58:00", "done a completed 11:58:00"}},
		{"the store hears of it first as completed, lately",
			[][]store.Thread{{st("a", "completed", t1)}},
			[]string{"all a completed 11:58:00", "done a completed 11:58:00"}},
		{"old history the store had not heard of",
			[][]store.Thread{{st("a", "completed", old), st("b", "failed", old)}, {st("a", "completed", old)}},
			nil},
		{"old history that changes now is news",
			[][]store.Thread{{st("a", "running", old)}, {st("a", "failed", old.Add(time.Minute))}},
			[]string{"all a failed 10:01:00"}},
	}
	each(t, func(t *testing.T, cfg store.Config, clk *clock) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				ctx := context.Background()
				s := open(t, func() store.Config {
					if cfg.DatabaseURL != "" {
						return store.Config{DatabaseURL: pgtestURL(t), Now: clk.Now}
					}
					return store.Config{DataDir: t.TempDir(), Now: clk.Now}
				}())
				if err := s.SetNotify(store.NotifySettings{Targets: notifyTargets}); err != nil {
					t.Fatal(err)
				}
				added := 0
				for _, b := range c.batches {
					res, err := s.SyncThreadsAt(ctx, "m1", base, b)
					if err != nil {
						t.Fatal(err)
					}
					added += res.Notified
				}
				page, err := s.ListNotifications(ctx, store.NotificationQuery{})
				if err != nil {
					t.Fatal(err)
				}
				var got []string
				for _, n := range page.Notifications {
					got = append(got, event(n))
					if n.State != store.NotifyPending || n.Machine != "m1" || n.Workflow != "wf" || n.Summary != "summary of "+n.Thread && n.Summary != "new" {
						t.Errorf("notification %+v", n)
					}
				}
				slices.Sort(got)
				if !slices.Equal(got, c.want) || added != len(c.want) || page.Total != len(c.want) {
					t.Fatalf("notifications %q (added %d, total %d), want %q", got, added, page.Total, c.want)
				}
			})
		}
	})
}

// pgtestURL is a fresh PostgreSQL database.
var pgtestURL = func(t testing.TB) string { return backends[1].cfg(t).DatabaseURL }

func TestNotifyWithoutReceiversAddsNothing(t *testing.T) {
	each(t, func(t *testing.T, cfg store.Config, clk *clock) {
		ctx := context.Background()
		s := open(t, cfg)
		res, err := s.SyncThreadsAt(ctx, "m1", clk.Now(), []store.Thread{st("a", "completed", clk.Now())})
		if err != nil || res.Notified != 0 {
			t.Fatalf("%+v %v", res, err)
		}
	})
}

func TestSetNotifyRefusesBadSettings(t *testing.T) {
	s := open(t, store.Config{DataDir: t.TempDir()})
	for _, bad := range [][]store.NotifyTarget{
		{{Key: "", On: []string{"completed"}}},
		{{Key: strings.Repeat("k", store.MaxNotifyKey+1), On: []string{"completed"}}},
		{{Key: "a", On: []string{"completed"}}, {Key: "a", On: []string{"failed"}}},
		{{Key: "a"}},
		{{Key: "a", On: []string{"running"}}},
		{{Key: "a", On: []string{"Completed"}}},
	} {
		if err := s.SetNotify(store.NotifySettings{Targets: bad}); err == nil {
			t.Errorf("%+v: accepted", bad)
		}
	}
	// A refusal changes nothing: the receivers set before stay.
	if err := s.SetNotify(store.NotifySettings{Targets: notifyTargets[:1]}); err != nil {
		t.Fatal(err)
	}
	_ = s.SetNotify(store.NotifySettings{Targets: []store.NotifyTarget{{Key: "x"}}})
	now := time.Now()
	res, err := s.SyncThreadsAt(context.Background(), "m1", now, []store.Thread{st("a", "failed", now)})
	if err != nil || res.Notified != 1 {
		t.Fatalf("%+v %v", res, err)
	}
}

// addNotifications makes n pending notifications for receiver "all".
func addNotifications(t *testing.T, s store.Store, at time.Time, n int) {
	t.Helper()
	if err := s.SetNotify(store.NotifySettings{Targets: notifyTargets[:1]}); err != nil {
		t.Fatal(err)
	}
	var threads []store.Thread
	for i := range n {
		threads = append(threads, st(fmt.Sprintf("t%03d", i), "completed", at))
	}
	res, err := s.SyncThreadsAt(context.Background(), "m1", at, threads)
	if err != nil || res.Notified != n {
		t.Fatalf("%+v %v", res, err)
	}
}

func TestNotificationClaimsAndOutcomes(t *testing.T) {
	each(t, func(t *testing.T, cfg store.Config, clk *clock) {
		ctx := context.Background()
		s := open(t, cfg)
		addNotifications(t, s, clk.Now(), 3)
		if b, err := s.NotificationBacklog(ctx); err != nil || b.Pending != 3 || !b.Oldest.Equal(clk.Now()) {
			t.Fatalf("backlog %+v %v", b, err)
		}
		got, err := s.ClaimNotifications(ctx, "A", time.Minute, 2)
		if err != nil || len(got) != 2 || got[0].Attempts != 1 {
			t.Fatalf("claim: %+v %v", got, err)
		}
		// Another sender takes what is left, not what A holds.
		rest, err := s.ClaimNotifications(ctx, "B", time.Minute, 10)
		if err != nil || len(rest) != 1 || slices.ContainsFunc(got, func(n store.Notification) bool { return n.ID == rest[0].ID }) {
			t.Fatalf("second claim: %+v %v", rest, err)
		}
		if more, err := s.ClaimNotifications(ctx, "C", time.Minute, 10); err != nil || len(more) != 0 {
			t.Fatalf("third claim: %+v %v", more, err)
		}
		// Delivered; failed, to retry in a minute; failed for good.
		if err := s.FinishNotification(ctx, store.NotificationResult{ID: got[0].ID, Owner: "A", Delivered: true, Code: 204}); err != nil {
			t.Fatal(err)
		}
		if err := s.FinishNotification(ctx, store.NotificationResult{ID: got[1].ID, Owner: "A", Code: 503, Error: "503 Service Unavailable",
			RetryAt: clk.Now().Add(time.Minute)}); err != nil {
			t.Fatal(err)
		}
		if err := s.FinishNotification(ctx, store.NotificationResult{ID: rest[0].ID, Owner: "A", Error: "x"}); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("finish by a sender that does not hold it: %v", err)
		}
		if err := s.FinishNotification(ctx, store.NotificationResult{ID: rest[0].ID, Owner: "B", Error: "gone"}); err != nil {
			t.Fatal(err)
		}
		if err := s.FinishNotification(ctx, store.NotificationResult{ID: got[0].ID, Owner: "A", Delivered: true}); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("finish twice: %v", err)
		}
		// Not due yet; then due, and claimed again as a second attempt.
		if more, err := s.ClaimNotifications(ctx, "C", time.Minute, 10); err != nil || len(more) != 0 {
			t.Fatalf("claim before due: %+v %v", more, err)
		}
		clk.Add(time.Minute)
		again, err := s.ClaimNotifications(ctx, "C", time.Minute, 10)
		if err != nil || len(again) != 1 || again[0].ID != got[1].ID || again[0].Attempts != 2 || again[0].LastCode != 503 {
			t.Fatalf("claim when due: %+v %v", again, err)
		}
		// A claim that lapses (its sender died) is taken by another.
		clk.Add(time.Minute)
		lapsed, err := s.ClaimNotifications(ctx, "D", time.Minute, 10)
		if err != nil || len(lapsed) != 1 || lapsed[0].Attempts != 3 {
			t.Fatalf("claim after the lease: %+v %v", lapsed, err)
		}
		if err := s.FinishNotification(ctx, store.NotificationResult{ID: again[0].ID, Owner: "C", Delivered: true}); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("finish after the lease lapsed: %v", err)
		}
		page, err := s.ListNotifications(ctx, store.NotificationQuery{})
		if err != nil || page.Total != 3 {
			t.Fatalf("list: %+v %v", page, err)
		}
		states := map[int64]store.Notification{}
		for _, n := range page.Notifications {
			states[n.ID] = n
		}
		if n := states[got[0].ID]; n.State != store.NotifyDelivered || n.LastCode != 204 || n.FinishedAt == nil {
			t.Errorf("delivered: %+v", n)
		}
		if n := states[rest[0].ID]; n.State != store.NotifyFailed || n.LastError != "gone" || n.FinishedAt == nil {
			t.Errorf("failed: %+v", n)
		}
		if n := states[got[1].ID]; n.State != store.NotifyPending || n.LastError != "503 Service Unavailable" {
			t.Errorf("pending: %+v", n)
		}
		for _, q := range []struct {
			q    store.NotificationQuery
			want int
		}{
			{store.NotificationQuery{State: store.NotifyPending}, 1},
			{store.NotificationQuery{State: store.NotifyDelivered}, 1},
			{store.NotificationQuery{Machine: "m2"}, 0},
			{store.NotificationQuery{Limit: 2}, 2},
			{store.NotificationQuery{Offset: 2}, 1},
		} {
			p, err := s.ListNotifications(ctx, q.q)
			if err != nil || len(p.Notifications) != q.want {
				t.Errorf("%+v: %d, %v; want %d", q.q, len(p.Notifications), err, q.want)
			}
		}
		if b, err := s.NotificationBacklog(ctx); err != nil || b.Pending != 1 {
			t.Fatalf("backlog %+v %v", b, err)
		}
		// Pruning forgets finished notifications, never pending ones.
		res, err := s.Prune(ctx, clk.Now().Add(time.Hour))
		if err != nil || res.Notifications != 2 {
			t.Fatalf("prune: %+v %v", res, err)
		}
		if p, err := s.ListNotifications(ctx, store.NotificationQuery{}); err != nil || p.Total != 1 || p.Notifications[0].State != store.NotifyPending {
			t.Fatalf("after prune: %+v %v", p, err)
		}
	})
}

// TestNotificationClaimsAreExclusive has several stores on one database
// — replicas — claim at once: each notification is claimed by one.
func TestNotificationClaimsAreExclusive(t *testing.T) {
	each(t, func(t *testing.T, cfg store.Config, clk *clock) {
		ctx := context.Background()
		const replicas, total = 3, 60
		stores := []store.Store{open(t, cfg)}
		for range replicas - 1 {
			stores = append(stores, open(t, cfg))
		}
		addNotifications(t, stores[0], clk.Now(), total)
		var mu sync.Mutex
		claimed := map[int64]string{}
		var wg sync.WaitGroup
		errs := make(chan error, replicas)
		for i, s := range stores {
			owner := fmt.Sprintf("replica-%d", i)
			wg.Go(func() {
				for {
					got, err := s.ClaimNotifications(ctx, owner, time.Hour, 4)
					if err != nil {
						errs <- err
						return
					}
					if len(got) == 0 {
						return
					}
					mu.Lock()
					for _, n := range got {
						if prev, ok := claimed[n.ID]; ok {
							errs <- fmt.Errorf("notification %d claimed by %s and %s", n.ID, prev, owner)
						}
						claimed[n.ID] = owner
					}
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		if len(claimed) != total {
			t.Fatalf("%d claimed of %d", len(claimed), total)
		}
	})
}
