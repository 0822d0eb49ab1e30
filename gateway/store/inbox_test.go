package store_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/uncaged/workflow/gateway/store"
)

// waiting is a thread waiting for assignee since since, updated then.
func waiting(id, assignee string, since time.Time, deadline *time.Time) store.Thread {
	return store.Thread{ID: id, Workflow: "review", Status: store.WaitingStatus, UpdatedAt: since,
		Waiting: &store.Waiting{Role: "approver", Question: "Ship " + id + "?", Assignee: assignee, Since: since, Deadline: deadline}}
}

// inboxIDs are the page's threads as machine/id, in order.
func inboxIDs(p store.InboxPage) []string {
	out := []string{}
	for _, t := range p.Threads {
		out = append(out, t.Machine+"/"+t.ID)
	}
	return out
}

// inbox lists q, failing the test on an error.
func inbox(t *testing.T, s store.Store, q store.InboxQuery) store.InboxPage {
	t.Helper()
	p, err := s.Inbox(context.Background(), q)
	if err != nil {
		t.Fatalf("Inbox(%+v): %v", q, err)
	}
	return p
}

// The inbox holds the threads whose status is waiting, on every machine,
// oldest wait first, with what they ask; it follows their changes, and a
// thread that stops waiting leaves it, its Waiting cleared.
func TestInboxFollowsWaitingThreads(t *testing.T) {
	each(t, func(t *testing.T, cfg store.Config, clk *clock) {
		ctx := context.Background()
		s := open(t, cfg)
		now := clk.Now()
		t0, t1, t2 := now.Add(-3*time.Hour), now.Add(-2*time.Hour), now.Add(-time.Hour)
		deadline := now.Add(time.Hour)
		a := waiting("a", "ann", t1, &deadline)
		if _, err := s.SyncThreadsAt(ctx, "m1", now, []store.Thread{a, waiting("c", "", t2, nil),
			{ID: "b", Workflow: "build", Status: "running", UpdatedAt: t0}}); err != nil {
			t.Fatal(err)
		}
		// The other machine's thread waits longest; the machine may be
		// offline since: the inbox is the store's, not presence's.
		if _, err := s.SyncThreadsAt(ctx, "m2", now, []store.Thread{waiting("d", "bob", t0, nil)}); err != nil {
			t.Fatal(err)
		}
		all := inbox(t, s, store.InboxQuery{})
		if got, want := inboxIDs(all), []string{"m2/d", "m1/a", "m1/c"}; !reflect.DeepEqual(got, want) || all.Total != 3 {
			t.Fatalf("inbox %v (total %d), want %v", got, all.Total, want)
		}
		if got := all.Threads[1]; got.Workflow != "review" || !reflect.DeepEqual(got.Waiting, a.Waiting) {
			t.Fatalf("a in the inbox: %+v %+v, want %+v", got, got.Waiting, a.Waiting)
		}
		if w := all.Threads[2].Waiting; w == nil || w.Assignee != "" || w.Deadline != nil {
			t.Fatalf("c in the inbox: %+v", w)
		}

		// Filtered by assignee, exactly; paged.
		for _, c := range []struct {
			q     store.InboxQuery
			want  []string
			total int
		}{
			{store.InboxQuery{Assignee: "ann"}, []string{"m1/a"}, 1},
			{store.InboxQuery{Assignee: "bob"}, []string{"m2/d"}, 1},
			{store.InboxQuery{Assignee: "An"}, []string{}, 0},
			{store.InboxQuery{Assignee: "nobody"}, []string{}, 0},
			{store.InboxQuery{Limit: 1}, []string{"m2/d"}, 3},
			{store.InboxQuery{Limit: 2, Offset: 1}, []string{"m1/a", "m1/c"}, 3},
			{store.InboxQuery{Offset: 3}, []string{}, 3},
		} {
			p := inbox(t, s, c.q)
			if got := inboxIDs(p); !reflect.DeepEqual(got, c.want) || p.Total != c.total {
				t.Errorf("Inbox(%+v) = %v (total %d), want %v (total %d)", c.q, got, p.Total, c.want, c.total)
			}
		}

		// a waits anew, for another question, since now: it moves last.
		a2 := waiting("a", "carol", now, nil)
		a2.Waiting.Question = "Really ship a?"
		if _, err := s.SyncThreadsAt(ctx, "m1", now, []store.Thread{a2}); err != nil {
			t.Fatal(err)
		}
		p := inbox(t, s, store.InboxQuery{})
		if got, want := inboxIDs(p), []string{"m2/d", "m1/c", "m1/a"}; !reflect.DeepEqual(got, want) {
			t.Fatalf("after a waits anew: %v, want %v", got, want)
		}
		if w := p.Threads[2].Waiting; !reflect.DeepEqual(w, a2.Waiting) {
			t.Fatalf("a waits for %+v, want %+v", w, a2.Waiting)
		}
		if got := inboxIDs(inbox(t, s, store.InboxQuery{Assignee: "ann"})); len(got) != 0 {
			t.Fatalf("ann's inbox after a was reassigned: %v", got)
		}

		// a runs again, then completes; d completes: they leave the
		// inbox, and their Waiting goes.
		for _, batch := range []struct {
			machine string
			threads []store.Thread
		}{
			{"m1", []store.Thread{{ID: "a", Workflow: "review", Status: "running", UpdatedAt: now.Add(time.Second)}}},
			{"m1", []store.Thread{{ID: "a", Workflow: "review", Status: "completed", UpdatedAt: now.Add(2 * time.Second)}}},
			{"m2", []store.Thread{{ID: "d", Workflow: "review", Status: "completed", UpdatedAt: now.Add(2 * time.Second)}}},
		} {
			if _, err := s.SyncThreadsAt(ctx, batch.machine, now, batch.threads); err != nil {
				t.Fatal(err)
			}
		}
		if got := inboxIDs(inbox(t, s, store.InboxQuery{})); !reflect.DeepEqual(got, []string{"m1/c"}) {
			t.Fatalf("inbox after completions: %v", got)
		}
		for _, k := range [][2]string{{"m1", "a"}, {"m2", "d"}} {
			th, err := s.GetThread(ctx, k[0], k[1])
			if err != nil || th.Waiting != nil || th.Status != "completed" {
				t.Fatalf("%s/%s after it completed: %+v %v", k[0], k[1], th, err)
			}
		}
		// The thread still waiting keeps its Waiting in the thread's
		// summary too.
		if th, err := s.GetThread(ctx, "m1", "c"); err != nil || th.Waiting == nil || th.Waiting.Question != "Ship c?" {
			t.Fatalf("m1/c: %+v %v", th, err)
		}
	})
}

// A connector that says a thread waits, but not what for (Waiting nil),
// still has it in the inbox, waiting since its last change: the status
// decides.
func TestInboxWaitingWithoutWhat(t *testing.T) {
	each(t, func(t *testing.T, cfg store.Config, clk *clock) {
		ctx := context.Background()
		s := open(t, cfg)
		at := clk.Now().Add(-time.Minute)
		if _, err := s.SyncThreadsAt(ctx, "m1", clk.Now(), []store.Thread{{ID: "x", Workflow: "w", Status: store.WaitingStatus, UpdatedAt: at}}); err != nil {
			t.Fatal(err)
		}
		p := inbox(t, s, store.InboxQuery{})
		if len(p.Threads) != 1 || p.Threads[0].Waiting != nil || !p.Threads[0].UpdatedAt.Equal(at) {
			t.Fatalf("inbox %+v", p)
		}
	})
}

// Whatever a connector puts in a Waiting, the store keeps it within its
// bounds, marked and counted where it cut: a question of at most
// QuestionMaxRunes runes, short role and assignee, valid times; a
// Waiting beside another status is dropped. Random hostile values, both
// backends.
func TestWaitingIsBounded(t *testing.T) {
	each(t, func(t *testing.T, cfg store.Config, clk *clock) {
		ctx := context.Background()
		s := open(t, cfg)
		now := clk.Now()
		rng := rand.New(rand.NewPCG(29, 1))
		sizes := []int{0, 10, store.MaxRoleBytes - 1, store.MaxRoleBytes + 1, 1999, 2001, 8000, 100 << 10}
		times := []time.Time{{}, now.Add(-time.Hour), now.Add(store.MaxClockSkew + time.Hour), now.Add(store.MaxDeadlineAhead + time.Hour),
			store.MinThreadTime.Add(-time.Second), time.Date(-5000, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)}
		var sent []store.Thread
		for i := range 60 {
			w := &store.Waiting{
				Role: hostileText(rng, sizes[rng.IntN(len(sizes))]), Question: hostileText(rng, sizes[rng.IntN(len(sizes))]),
				Assignee: hostileText(rng, sizes[rng.IntN(len(sizes))]), Since: times[rng.IntN(len(times))],
			}
			if d := times[rng.IntN(len(times))]; rng.IntN(3) > 0 {
				w.Deadline = &d
			}
			status := store.WaitingStatus
			if i%5 == 0 {
				status = "running" // a Waiting that contradicts its status
			}
			sent = append(sent, store.Thread{ID: fmt.Sprintf("w%d", i), Status: status, UpdatedAt: now.Add(-time.Duration(i) * time.Second), Waiting: w})
		}
		res, err := s.SyncThreadsAt(ctx, "m1", now, sent)
		if err != nil {
			t.Fatal(err)
		}
		for _, in := range sent {
			got, err := s.GetThread(ctx, "m1", in.ID)
			if err != nil {
				t.Fatal(err)
			}
			if in.Status != store.WaitingStatus {
				if got.Waiting != nil {
					t.Errorf("%s: a running thread keeps a Waiting", in.ID)
				}
				continue
			}
			w := got.Waiting
			if w == nil {
				t.Fatalf("%s: its Waiting was lost", in.ID)
			}
			for _, f := range []struct {
				name, sent, kept string
				ok               bool
			}{
				{"role", in.Waiting.Role, w.Role, len(w.Role) <= store.MaxRoleBytes},
				{"assignee", in.Waiting.Assignee, w.Assignee, len(w.Assignee) <= store.MaxAssigneeBytes},
				{"question", in.Waiting.Question, w.Question, utf8.RuneCountInString(w.Question) <= store.QuestionMaxRunes},
			} {
				if !f.ok || !utf8.ValidString(f.kept) || strings.ContainsRune(f.kept, 0) {
					t.Errorf("%s: %s of %d bytes kept as %d bytes, out of bounds or not text", in.ID, f.name, len(f.sent), len(f.kept))
				}
				if f.kept != f.sent && f.kept != "" && !strings.HasSuffix(f.kept, store.CutMark) && utf8.ValidString(f.sent) && !strings.ContainsRune(f.sent, 0) {
					t.Errorf("%s: %s cut without its mark", in.ID, f.name)
				}
			}
			if w.Since.Before(store.MinThreadTime) || w.Since.After(now.Add(store.MaxClockSkew)) {
				t.Errorf("%s: since %v kept", in.ID, w.Since)
			}
			if d := w.Deadline; d != nil && (d.Before(store.MinThreadTime) || d.After(now.Add(store.MaxDeadlineAhead))) {
				t.Errorf("%s: deadline %v kept", in.ID, d)
			}
		}
		if res.Cut[store.FieldWaiting] != 12 || res.Cut[store.FieldWaitingQuestion] == 0 || res.Cut[store.FieldWaitingRole] == 0 ||
			res.Cut[store.FieldWaitingSince] == 0 || res.Cut[store.FieldWaitingDeadline] == 0 {
			t.Errorf("cut counts %v", res.Cut)
		}
		if p := inbox(t, s, store.InboxQuery{Limit: store.MaxLimit}); p.Total != 48 || len(p.Threads) != 48 {
			t.Errorf("inbox holds %d threads (total %d), want 48", len(p.Threads), p.Total)
		}
	})
}

// An over-long question is cut to QuestionMaxRunes runes, the last the
// cut mark; one that fits is kept whole.
func TestWaitingQuestionCut(t *testing.T) {
	each(t, func(t *testing.T, cfg store.Config, clk *clock) {
		ctx := context.Background()
		s := open(t, cfg)
		long := strings.Repeat("日", store.QuestionMaxRunes+1)
		fits := strings.Repeat("é", store.QuestionMaxRunes)
		a, b := waiting("a", "", clk.Now(), nil), waiting("b", "", clk.Now(), nil)
		a.Waiting.Question, b.Waiting.Question = long, fits
		res, err := s.SyncThreadsAt(ctx, "m1", clk.Now(), []store.Thread{a, b})
		if err != nil || res.Cut[store.FieldWaitingQuestion] != 1 {
			t.Fatalf("%+v %v", res, err)
		}
		p := inbox(t, s, store.InboxQuery{})
		byID := map[string]string{}
		for _, th := range p.Threads {
			byID[th.ID] = th.Waiting.Question
		}
		if want := strings.Repeat("日", store.QuestionMaxRunes-1) + store.CutMark; byID["a"] != want {
			t.Errorf("long question kept as %d runes", utf8.RuneCountInString(byID["a"]))
		}
		if byID["b"] != fits {
			t.Errorf("a question that fits was changed")
		}
		if a.Waiting.Question != long {
			t.Errorf("the caller's thread was changed")
		}
	})
}

// An assignee filter that no thread could have is refused with a clear
// error, not sent to the database (PostgreSQL would fail on it).
func TestInboxRefusesBadAssignee(t *testing.T) {
	each(t, func(t *testing.T, cfg store.Config, _ *clock) {
		s := open(t, cfg)
		for _, a := range []string{"\xff", "a\x00b", strings.Repeat("x", store.MaxAssigneeBytes+1)} {
			if _, err := s.Inbox(context.Background(), store.InboxQuery{Assignee: a}); err == nil || !strings.Contains(err.Error(), "assignee") {
				t.Errorf("assignee %q: %v", a, err)
			}
		}
	})
}

// A waiting thread's notification carries its question (cut to
// MaxNotifySummary runes); a new wait straight after the last — another
// question, the status still waiting — notifies again; the same wait
// heard again does not.
func TestNotifyWaitingCarriesQuestion(t *testing.T) {
	each(t, func(t *testing.T, cfg store.Config, clk *clock) {
		ctx := context.Background()
		s := open(t, cfg)
		if err := s.SetNotify(store.NotifySettings{Targets: notifyTargets[:1]}); err != nil {
			t.Fatal(err)
		}
		now := clk.Now()
		first := waiting("a", "ann", now.Add(-time.Minute), nil)
		first.Waiting.Question = strings.Repeat("q", store.MaxNotifySummary+10)
		second := waiting("a", "ann", now, nil)
		for _, b := range [][]store.Thread{{first}, {first}, {second}, {second}} {
			if _, err := s.SyncThreadsAt(ctx, "m1", now, b); err != nil {
				t.Fatal(err)
			}
		}
		page, err := s.ListNotifications(ctx, store.NotificationQuery{})
		if err != nil || page.Total != 2 {
			t.Fatalf("%d notifications, want 2: %+v %v", page.Total, page.Notifications, err)
		}
		newest, oldest := page.Notifications[0], page.Notifications[1]
		if want := strings.Repeat("q", store.MaxNotifySummary-1) + store.CutMark; oldest.Question != want {
			t.Errorf("first notification's question: %d runes %q…", utf8.RuneCountInString(oldest.Question), oldest.Question[:10])
		}
		if newest.Question != "Ship a?" || newest.Status != store.WaitingStatus {
			t.Errorf("second notification: %+v", newest)
		}
		// Other statuses carry none.
		if _, err := s.SyncThreadsAt(ctx, "m1", now, []store.Thread{{ID: "a", Status: "failed", UpdatedAt: now.Add(time.Second)}}); err != nil {
			t.Fatal(err)
		}
		page, err = s.ListNotifications(ctx, store.NotificationQuery{Limit: 1})
		if err != nil || page.Notifications[0].Status != "failed" || page.Notifications[0].Question != "" {
			t.Fatalf("%+v %v", page.Notifications, err)
		}
	})
}
