package store_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/pressly/goose/v3"

	"github.com/uncaged/workflow/gateway/store"
)

// newWebhook is a valid webhook trigger for machine.
func newWebhook(machine string) store.Trigger {
	return store.Trigger{ID: store.NewTriggerID(), Kind: store.TriggerWebhook, Machine: machine, Workflow: "deploy",
		Prompt: "Deploy {{.ref}}", Secret: "s3cret", Note: "on push", CreatedBy: "ann"}
}

// newSchedule is a valid schedule trigger for machine.
func newSchedule(machine string) store.Trigger {
	return store.Trigger{ID: store.NewTriggerID(), Kind: store.TriggerSchedule, Machine: machine, Workflow: "nightly",
		Prompt: "Run the nightly checks", Schedule: "0 3 * * *", TimeZone: "Europe/Paris", CreatedBy: "bob"}
}

// createTrigger stores tr and returns it as stored.
func createTrigger(t *testing.T, s store.Store, tr store.Trigger) store.Trigger {
	t.Helper()
	ctx := context.Background()
	if err := s.CreateTrigger(ctx, tr); err != nil {
		t.Fatalf("CreateTrigger(%s): %v", tr.ID, err)
	}
	got, err := s.GetTrigger(ctx, tr.ID)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// addRun adds r, which must be new.
func addRun(t *testing.T, s store.Store, r store.TriggerRun) store.TriggerRun {
	t.Helper()
	got, added, err := s.AddRun(context.Background(), r)
	if err != nil || !added {
		t.Fatalf("AddRun(%+v) = %v, %v; want added", r, added, err)
	}
	return got
}

// claim claims machine's runs for owner, for an hour.
func claim(t *testing.T, s store.Store, machine, owner string, limit int) []store.TriggerRun {
	t.Helper()
	runs, err := s.ClaimRuns(context.Background(), machine, owner, time.Hour, limit)
	if err != nil {
		t.Fatalf("ClaimRuns(%s, %s): %v", machine, owner, err)
	}
	return runs
}

func runIDs(runs []store.TriggerRun) []string {
	out := []string{}
	for _, r := range runs {
		out = append(out, r.ID)
	}
	return out
}

// listRuns lists every run matching q.
func listRuns(t *testing.T, s store.Store, q store.RunQuery) store.RunPage {
	t.Helper()
	q.Limit = store.MaxRunLimit
	p, err := s.ListRuns(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// seeded is a random source whose seed the test log tells, so that a
// failure can be replayed.
func seeded(t *testing.T) (*rand.Rand, int64) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	return rand.New(rand.NewSource(seed)), seed
}

func TestNewIDs(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		for _, c := range []struct{ id, prefix string }{{store.NewTriggerID(), "trg_"}, {store.NewRunID(), "run_"}} {
			rest, ok := strings.CutPrefix(c.id, c.prefix)
			if !ok || len(rest) != 26 || strings.Trim(rest, "abcdefghijklmnopqrstuvwxyz0123456789") != "" {
				t.Fatalf("id %q is not %s and 26 lowercase base32 characters", c.id, c.prefix)
			}
			if seen[c.id] {
				t.Fatalf("id %q made twice", c.id)
			}
			seen[c.id] = true
		}
	}
	if err := newWebhook("m").Check(); err != nil {
		t.Fatalf("a trigger with a new id: %v", err)
	}
}

func TestTriggerRoundTrip(t *testing.T) {
	each(t, func(t *testing.T, cfg store.Config, clk *clock) {
		ctx := context.Background()
		s := open(t, cfg)
		hook := newWebhook("alpha")
		fired := clk.Now().Add(-time.Hour)
		sched := newSchedule("beta")
		sched.CreatedAt = clk.Now().Add(-time.Minute)
		sched.Missed = store.MissedSkip
		sched.Expire = 90 * time.Minute
		sched.Paused = true
		sched.LastFired = &fired
		for _, tr := range []store.Trigger{hook, sched} {
			if err := s.CreateTrigger(ctx, tr); err != nil {
				t.Fatalf("CreateTrigger(%s): %v", tr.Kind, err)
			}
		}
		wantHook := hook
		wantHook.Expire, wantHook.CreatedAt = store.DefaultRunExpiry, clk.Now()
		for _, want := range []store.Trigger{wantHook, sched} {
			got, err := s.GetTrigger(ctx, want.ID)
			if err != nil || !reflect.DeepEqual(got, want) {
				t.Fatalf("GetTrigger(%s) =\n %+v, %v\nwant %+v", want.ID, got, err, want)
			}
		}
		// A schedule's policy defaults to run-once.
		plain := newSchedule("beta")
		if got := createTrigger(t, s, plain); got.Missed != store.MissedRunOnce || got.Expire != store.DefaultRunExpiry {
			t.Fatalf("schedule without policy or expiry stored as %q, %v", got.Missed, got.Expire)
		}
		list, err := s.ListTriggers(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := triggerIDs(list), []string{sched.ID, minID(hook.ID, plain.ID), maxID(hook.ID, plain.ID)}; !reflect.DeepEqual(got, want) {
			t.Fatalf("ListTriggers = %v, want oldest first %v", got, want)
		}
		if err := s.CreateTrigger(ctx, hook); !errors.Is(err, store.ErrExists) {
			t.Fatalf("CreateTrigger of a taken id: %v, want ErrExists", err)
		}

		paused, err := s.SetTriggerPaused(ctx, hook.ID, true)
		wantHook.Paused = true
		if err != nil || !reflect.DeepEqual(paused, wantHook) {
			t.Fatalf("SetTriggerPaused(true) = %+v, %v; want %+v", paused, err, wantHook)
		}
		if got, _ := s.GetTrigger(ctx, hook.ID); !got.Paused {
			t.Fatal("the pause was not stored")
		}
		if resumed, err := s.SetTriggerPaused(ctx, hook.ID, false); err != nil || resumed.Paused {
			t.Fatalf("SetTriggerPaused(false) = %+v, %v", resumed, err)
		}
		if _, err := s.SetTriggerPaused(ctx, "trg_nope", true); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("SetTriggerPaused(unknown): %v, want ErrNotFound", err)
		}

		if err := s.DeleteTrigger(ctx, hook.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := s.GetTrigger(ctx, hook.ID); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("GetTrigger after delete: %v, want ErrNotFound", err)
		}
		if err := s.DeleteTrigger(ctx, hook.ID); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("DeleteTrigger twice: %v, want ErrNotFound", err)
		}
		if list, err := s.ListTriggers(ctx); err != nil || len(list) != 2 {
			t.Fatalf("after delete: %d triggers, %v; want 2", len(list), err)
		}
	})
}

func triggerIDs(ts []store.Trigger) []string {
	out := []string{}
	for _, tr := range ts {
		out = append(out, tr.ID)
	}
	return out
}

func minID(a, b string) string { return min(a, b) }
func maxID(a, b string) string { return max(a, b) }

// randomTrigger is a valid trigger with random fields, some at their
// bounds, as stored (defaults filled in; CreatedAt set).
func randomTrigger(rng *rand.Rand, created time.Time) store.Trigger {
	pick := func(s string) byte { return s[rng.Intn(len(s))] }
	const alnum = "abcdefghijklmnopqrstuvwxyz0123456789"
	name := []byte{pick(alnum)}
	if n := rng.Intn(63); n > 0 {
		for range n - 1 {
			name = append(name, pick(alnum+"-"))
		}
		name = append(name, pick(alnum))
	}
	text := func(maxBytes int, words []string) string {
		var b strings.Builder
		for b.Len() < maxBytes {
			w := words[rng.Intn(len(words))]
			if b.Len()+len(w) > maxBytes {
				break
			}
			b.WriteString(w)
			if rng.Intn(8) == 0 {
				break
			}
		}
		return b.String()
	}
	label := []string{"deploy", " ", "日本", "é", "-", "x", "{{.ref}}"}
	prose := append(label, "\n", "\t", "🚀")
	tr := store.Trigger{
		ID: store.NewTriggerID(), Machine: string(name), CreatedAt: created,
		Workflow:  "w" + text(store.MaxTriggerWorkflowBytes-1, label),
		Prompt:    text(1+rng.Intn(store.MaxTriggerPromptBytes), prose),
		Note:      text(store.MaxTriggerNoteBytes, prose),
		CreatedBy: text(store.MaxTriggerCreatedByBytes, label),
		Paused:    rng.Intn(2) == 0,
		Expire:    []time.Duration{store.DefaultRunExpiry, store.MinRunExpiry, store.MaxRunExpiry, store.MinRunExpiry + time.Duration(rng.Int63n(int64(store.MaxRunExpiry-store.MinRunExpiry)))}[rng.Intn(4)],
	}
	if rng.Intn(2) == 0 {
		fired := created.Add(-time.Duration(rng.Int63n(int64(1000 * time.Hour)))).Truncate(time.Microsecond)
		tr.LastFired = &fired
	}
	if rng.Intn(2) == 0 {
		tr.Kind, tr.Secret = store.TriggerWebhook, "k"+text(store.MaxTriggerSecretBytes-1, label)
	} else {
		tr.Kind, tr.Schedule = store.TriggerSchedule, "*/"+fmt.Sprint(1+rng.Intn(59))+" * * * *"
		tr.TimeZone = []string{"", "UTC", "America/New_York", "Asia/Tokyo"}[rng.Intn(4)]
		tr.Missed = []store.MissedPolicy{store.MissedRunOnce, store.MissedSkip}[rng.Intn(2)]
	}
	return tr
}

// RotateTriggerSecret replaces a webhook's secret, keeps the one before
// until the time given (or not at all), forgets any older one, and
// refuses schedules, unknown triggers and secrets a webhook may not have,
// changing nothing then.
func TestRotateTriggerSecret(t *testing.T) {
	each(t, func(t *testing.T, cfg store.Config, clk *clock) {
		ctx := context.Background()
		s := open(t, cfg)
		hook := createTrigger(t, s, newWebhook("alpha"))
		sched := createTrigger(t, s, newSchedule("beta"))
		until := clk.Now().Add(24 * time.Hour)

		got, err := s.RotateTriggerSecret(ctx, hook.ID, "second", &until)
		want := hook
		want.Secret, want.PreviousSecret, want.PreviousUntil = "second", "s3cret", &until
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("first rotation = %+v, %v; want %+v", got, err, want)
		}
		if stored, _ := s.GetTrigger(ctx, hook.ID); !reflect.DeepEqual(stored, want) {
			t.Fatalf("stored %+v, want %+v", stored, want)
		}
		// Again: the first secret is forgotten, the second kept.
		later := until.Add(time.Hour)
		got, err = s.RotateTriggerSecret(ctx, hook.ID, "third", &later)
		want.Secret, want.PreviousSecret, want.PreviousUntil = "third", "second", &later
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("second rotation = %+v, %v; want %+v", got, err, want)
		}
		// At once: no previous secret at all.
		got, err = s.RotateTriggerSecret(ctx, hook.ID, "fourth", nil)
		want.Secret, want.PreviousSecret, want.PreviousUntil = "fourth", "", nil
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("rotation ending the old secret at once = %+v, %v; want %+v", got, err, want)
		}

		for _, bad := range []struct {
			name, id, secret string
			want             error
		}{
			{"a schedule", sched.ID, "x", store.ErrInvalid},
			{"unknown", "trg_nope", "x", store.ErrNotFound},
			{"empty secret", hook.ID, "", store.ErrInvalid},
			{"long secret", hook.ID, strings.Repeat("s", store.MaxTriggerSecretBytes+1), store.ErrInvalid},
			{"control character", hook.ID, "a\nb", store.ErrInvalid},
		} {
			if _, err := s.RotateTriggerSecret(ctx, bad.id, bad.secret, &until); !errors.Is(err, bad.want) {
				t.Errorf("%s: %v, want %v", bad.name, err, bad.want)
			}
		}
		if stored, _ := s.GetTrigger(ctx, hook.ID); !reflect.DeepEqual(stored, want) {
			t.Fatalf("refused rotations changed the webhook: %+v, want %+v", stored, want)
		}
		if stored, _ := s.GetTrigger(ctx, sched.ID); !reflect.DeepEqual(stored, sched) {
			t.Fatalf("a refused rotation changed the schedule: %+v", stored)
		}
	})
}

func TestTriggerRandomRoundTrip(t *testing.T) {
	each(t, func(t *testing.T, cfg store.Config, clk *clock) {
		s := open(t, cfg)
		rng, _ := seeded(t)
		for i := range 40 {
			want := randomTrigger(rng, clk.Now().Add(time.Duration(i)*time.Second))
			if err := want.Check(); err != nil {
				t.Fatalf("a valid trigger refused: %v\n%+v", err, want)
			}
			if got := createTrigger(t, s, want); !reflect.DeepEqual(got, want) {
				t.Fatalf("stored\n %+v\nwant %+v", got, want)
			}
		}
	})
}

func TestTriggerCheckRefuses(t *testing.T) {
	cases := []struct {
		name, field string
		base        func(string) store.Trigger
		change      func(*store.Trigger)
	}{
		{"no id", "id", newWebhook, func(tr *store.Trigger) { tr.ID = "" }},
		{"short id", "id", newWebhook, func(tr *store.Trigger) { tr.ID = "trg_abc" }},
		{"upper-case id", "id", newWebhook, func(tr *store.Trigger) { tr.ID = strings.ToUpper(tr.ID) }},
		{"run id", "id", newWebhook, func(tr *store.Trigger) { tr.ID = store.NewRunID() }},
		{"no kind", "kind", newWebhook, func(tr *store.Trigger) { tr.Kind = "" }},
		{"bad kind", "kind", newWebhook, func(tr *store.Trigger) { tr.Kind = "cron" }},
		{"empty machine", "machine", newWebhook, func(tr *store.Trigger) { tr.Machine = "" }},
		{"long machine", "machine", newWebhook, func(tr *store.Trigger) { tr.Machine = strings.Repeat("m", 64) }},
		{"control in machine", "machine", newWebhook, func(tr *store.Trigger) { tr.Machine = "a\nb" }},
		{"upper-case machine", "machine", newWebhook, func(tr *store.Trigger) { tr.Machine = "Alpha" }},
		{"empty workflow", "workflow", newWebhook, func(tr *store.Trigger) { tr.Workflow = "" }},
		{"long workflow", "workflow", newWebhook, func(tr *store.Trigger) { tr.Workflow = strings.Repeat("w", store.MaxTriggerWorkflowBytes+1) }},
		{"control in workflow", "workflow", newWebhook, func(tr *store.Trigger) { tr.Workflow = "de\tploy" }},
		{"DEL in workflow", "workflow", newWebhook, func(tr *store.Trigger) { tr.Workflow = "deploy\x7f" }},
		{"invalid UTF-8 workflow", "workflow", newWebhook, func(tr *store.Trigger) { tr.Workflow = "de\xffploy" }},
		{"long prompt", "prompt", newWebhook, func(tr *store.Trigger) { tr.Prompt = strings.Repeat("p", store.MaxTriggerPromptBytes+1) }},
		{"NUL in prompt", "prompt", newWebhook, func(tr *store.Trigger) { tr.Prompt = "a\x00b" }},
		{"long note", "note", newWebhook, func(tr *store.Trigger) { tr.Note = strings.Repeat("n", store.MaxTriggerNoteBytes+1) }},
		{"long creator", "createdBy", newWebhook, func(tr *store.Trigger) { tr.CreatedBy = strings.Repeat("c", store.MaxTriggerCreatedByBytes+1) }},
		{"control in creator", "createdBy", newWebhook, func(tr *store.Trigger) { tr.CreatedBy = "ann\r\n" }},
		{"negative expiry", "expire", newWebhook, func(tr *store.Trigger) { tr.Expire = -time.Hour }},
		{"short expiry", "expire", newWebhook, func(tr *store.Trigger) { tr.Expire = 500 * time.Millisecond }},
		{"long expiry", "expire", newWebhook, func(tr *store.Trigger) { tr.Expire = store.MaxRunExpiry + time.Nanosecond }},
		{"webhook without secret", "secret", newWebhook, func(tr *store.Trigger) { tr.Secret = "" }},
		{"long secret", "secret", newWebhook, func(tr *store.Trigger) { tr.Secret = strings.Repeat("s", store.MaxTriggerSecretBytes+1) }},
		{"webhook with schedule", "schedule", newWebhook, func(tr *store.Trigger) { tr.Schedule = "* * * * *" }},
		{"webhook with time zone", "timeZone", newWebhook, func(tr *store.Trigger) { tr.TimeZone = "UTC" }},
		{"webhook with missed policy", "missed", newWebhook, func(tr *store.Trigger) { tr.Missed = store.MissedSkip }},
		{"schedule without schedule", "schedule", newSchedule, func(tr *store.Trigger) { tr.Schedule = "" }},
		{"long schedule", "schedule", newSchedule, func(tr *store.Trigger) { tr.Schedule = strings.Repeat("*", store.MaxTriggerScheduleBytes+1) }},
		{"control in schedule", "schedule", newSchedule, func(tr *store.Trigger) { tr.Schedule = "0 3 * * *\n" }},
		{"schedule with secret", "secret", newSchedule, func(tr *store.Trigger) { tr.Secret = "s3cret" }},
		{"unknown time zone", "timeZone", newSchedule, func(tr *store.Trigger) { tr.TimeZone = "Mars/Olympus_Mons" }},
		{"local time zone", "timeZone", newSchedule, func(tr *store.Trigger) { tr.TimeZone = "Local" }},
		{"path as time zone", "timeZone", newSchedule, func(tr *store.Trigger) { tr.TimeZone = "../../etc/passwd" }},
		{"long time zone", "timeZone", newSchedule, func(tr *store.Trigger) { tr.TimeZone = strings.Repeat("Z", store.MaxTriggerTimeZoneBytes+1) }},
		{"bad missed policy", "missed", newSchedule, func(tr *store.Trigger) { tr.Missed = "catch-up" }},
	}
	each(t, func(t *testing.T, cfg store.Config, _ *clock) {
		ctx := context.Background()
		s := open(t, cfg)
		for _, c := range cases {
			tr := c.base("alpha")
			c.change(&tr)
			err := tr.Check()
			if !errors.Is(err, store.ErrInvalid) || !strings.Contains(err.Error(), " "+c.field+": ") {
				t.Errorf("%s: Check() = %v, want ErrInvalid naming %s", c.name, err, c.field)
			}
			if len(err.Error()) > 400 {
				t.Errorf("%s: an error of %d bytes: %.100s…", c.name, len(err.Error()), err)
			}
			if err := s.CreateTrigger(ctx, tr); !errors.Is(err, store.ErrInvalid) || !strings.Contains(err.Error(), " "+c.field+": ") {
				t.Errorf("%s: CreateTrigger = %v, want ErrInvalid naming %s", c.name, err, c.field)
			}
		}
		if list, err := s.ListTriggers(ctx); err != nil || len(list) != 0 {
			t.Fatalf("refused triggers stored: %d, %v", len(list), err)
		}
	})
	// The bounds themselves are within.
	edge := newWebhook(strings.Repeat("m", 63))
	edge.Workflow = strings.Repeat("w", store.MaxTriggerWorkflowBytes)
	edge.Prompt = strings.Repeat("p", store.MaxTriggerPromptBytes)
	edge.Note = strings.Repeat("n", store.MaxTriggerNoteBytes)
	edge.Secret = strings.Repeat("s", store.MaxTriggerSecretBytes)
	for _, d := range []time.Duration{0, store.MinRunExpiry, store.MaxRunExpiry} {
		edge.Expire = d
		if err := edge.Check(); err != nil {
			t.Errorf("a trigger at the bounds (expiry %v): %v", d, err)
		}
	}
}

func TestAddRun(t *testing.T) {
	each(t, func(t *testing.T, cfg store.Config, clk *clock) {
		ctx := context.Background()
		s := open(t, cfg)
		hook := createTrigger(t, s, newWebhook("alpha"))
		other := createTrigger(t, s, newWebhook("beta"))

		first := addRun(t, s, store.TriggerRun{TriggerID: hook.ID, Prompt: "Deploy main", DeliveryID: "d-1"})
		want := store.TriggerRun{ID: first.ID, TriggerID: hook.ID, Machine: "alpha", Workflow: "deploy", Prompt: "Deploy main", DeliveryID: "d-1",
			State: store.RunQueued, CreatedAt: clk.Now(), ExpiresAt: clk.Now().Add(store.DefaultRunExpiry), UpdatedAt: clk.Now()}
		if !strings.HasPrefix(first.ID, store.RunIDPrefix) || !reflect.DeepEqual(first, want) {
			t.Fatalf("AddRun =\n %+v\nwant %+v", first, want)
		}
		if got, err := s.GetRun(ctx, first.ID); err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("GetRun = %+v, %v", got, err)
		}

		// The same delivery again, later and with another prompt: the first run.
		clk.Add(time.Minute)
		again, added, err := s.AddRun(ctx, store.TriggerRun{TriggerID: hook.ID, Prompt: "Deploy other", DeliveryID: "d-1"})
		if err != nil || added || !reflect.DeepEqual(again, want) {
			t.Fatalf("repeated delivery = %+v, %v, %v; want the first run, not added", again, added, err)
		}
		// Another trigger may have a delivery of the same id; runs without
		// a delivery id are all added.
		addRun(t, s, store.TriggerRun{TriggerID: other.ID, DeliveryID: "d-1"})
		addRun(t, s, store.TriggerRun{TriggerID: hook.ID})
		addRun(t, s, store.TriggerRun{TriggerID: hook.ID})
		if p := listRuns(t, s, store.RunQuery{TriggerID: hook.ID}); p.Total != 3 {
			t.Fatalf("%d runs of the trigger, want 3", p.Total)
		}

		// Given fields are kept.
		id := store.NewRunID()
		created := clk.Now().Add(-time.Second)
		given := store.TriggerRun{ID: id, TriggerID: hook.ID, Machine: "gamma", Workflow: "other", CreatedAt: created, ExpiresAt: created.Add(time.Hour)}
		got := addRun(t, s, given)
		if got.ID != id || got.Machine != "gamma" || got.Workflow != "other" || !got.CreatedAt.Equal(created) || !got.ExpiresAt.Equal(created.Add(time.Hour)) {
			t.Fatalf("given fields not kept: %+v", got)
		}
		if _, _, err := s.AddRun(ctx, store.TriggerRun{ID: id, TriggerID: hook.ID}); !errors.Is(err, store.ErrExists) {
			t.Fatalf("AddRun with a taken id: %v, want ErrExists", err)
		}
		if _, _, err := s.AddRun(ctx, store.TriggerRun{TriggerID: "trg_nope"}); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("AddRun of an unknown trigger: %v, want ErrNotFound", err)
		}

		before := listRuns(t, s, store.RunQuery{})
		for _, c := range []struct {
			name, field string
			run         store.TriggerRun
		}{
			{"no trigger", "triggerId", store.TriggerRun{}},
			{"bad id", "id", store.TriggerRun{ID: "run_1", TriggerID: hook.ID}},
			{"bad machine", "machine", store.TriggerRun{TriggerID: hook.ID, Machine: "No Such"}},
			{"control in workflow", "workflow", store.TriggerRun{TriggerID: hook.ID, Workflow: "a\x01"}},
			{"long prompt", "prompt", store.TriggerRun{TriggerID: hook.ID, Prompt: strings.Repeat("p", store.MaxRunPromptBytes+1)}},
			{"NUL in prompt", "prompt", store.TriggerRun{TriggerID: hook.ID, Prompt: "\x00"}},
			{"long delivery", "deliveryId", store.TriggerRun{TriggerID: hook.ID, DeliveryID: strings.Repeat("d", store.MaxDeliveryIDBytes+1)}},
			{"control in delivery", "deliveryId", store.TriggerRun{TriggerID: hook.ID, DeliveryID: "d\n2"}},
			{"finished state", "state", store.TriggerRun{TriggerID: hook.ID, State: store.RunStarted}},
			{"expiry before creation", "expiresAt", store.TriggerRun{TriggerID: hook.ID, CreatedAt: clk.Now(), ExpiresAt: clk.Now()}},
		} {
			if _, _, err := s.AddRun(ctx, c.run); !errors.Is(err, store.ErrInvalid) || !strings.Contains(err.Error(), " "+c.field+": ") {
				t.Errorf("%s: AddRun = %v, want ErrInvalid naming %s", c.name, err, c.field)
			}
		}
		if after := listRuns(t, s, store.RunQuery{}); !reflect.DeepEqual(after, before) {
			t.Fatalf("refused runs changed the store: %d runs, were %d", after.Total, before.Total)
		}
	})
}

func TestAddRunRaisesLastFired(t *testing.T) {
	each(t, func(t *testing.T, cfg store.Config, clk *clock) {
		ctx := context.Background()
		s := open(t, cfg)
		sched := createTrigger(t, s, newSchedule("alpha"))
		hook := createTrigger(t, s, newWebhook("alpha"))
		base := clk.Now().Truncate(time.Hour)
		lastFired := func(id string) *time.Time {
			t.Helper()
			tr, err := s.GetTrigger(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			return tr.LastFired
		}
		if lf := lastFired(sched.ID); lf != nil {
			t.Fatalf("a new trigger fired at %v", lf)
		}
		for _, step := range []struct {
			at, want time.Duration
		}{{2 * time.Hour, 2 * time.Hour}, {time.Hour, 2 * time.Hour}, {3 * time.Hour, 3 * time.Hour}, {-time.Hour, 3 * time.Hour}} {
			at := base.Add(step.at)
			run := addRun(t, s, store.TriggerRun{TriggerID: sched.ID, ScheduledFor: &at, DeliveryID: "schedule:" + at.Format(time.RFC3339)})
			if run.ScheduledFor == nil || !run.ScheduledFor.Equal(at) {
				t.Fatalf("run scheduled for %v, want %v", run.ScheduledFor, at)
			}
			if lf := lastFired(sched.ID); lf == nil || !lf.Equal(base.Add(step.want)) {
				t.Fatalf("after a run for %v: last fired %v, want %v", at, lf, base.Add(step.want))
			}
		}
		// Another trigger's LastFired is its own.
		if lf := lastFired(hook.ID); lf != nil {
			t.Fatalf("a webhook's LastFired moved to %v", lf)
		}
		// Two replicas firing the same time: one run.
		at := base.Add(3 * time.Hour)
		if _, added, err := s.AddRun(ctx, store.TriggerRun{TriggerID: sched.ID, ScheduledFor: &at, DeliveryID: "schedule:" + at.Format(time.RFC3339)}); err != nil || added {
			t.Fatalf("a scheduled time fired twice: added %v, %v", added, err)
		}
	})
}

func TestAddRunConcurrentDelivery(t *testing.T) {
	each(t, func(t *testing.T, cfg store.Config, _ *clock) {
		ctx := context.Background()
		stores := []store.Store{open(t, cfg), open(t, cfg)}
		hook := createTrigger(t, stores[0], newWebhook("alpha"))
		rng, _ := seeded(t)
		for round := range 3 {
			delivery := fmt.Sprintf("delivery-%d-%d", round, rng.Int63())
			const writers = 16
			var wg sync.WaitGroup
			var mu sync.Mutex
			ids := map[string]int{}
			added := 0
			for w := range writers {
				wg.Go(func() {
					run, ok, err := stores[w%2].AddRun(ctx, store.TriggerRun{TriggerID: hook.ID, DeliveryID: delivery, Prompt: fmt.Sprint("writer ", w)})
					if err != nil {
						t.Errorf("writer %d: %v", w, err)
						return
					}
					mu.Lock()
					defer mu.Unlock()
					ids[run.ID]++
					if ok {
						added++
					}
				})
			}
			wg.Wait()
			if added != 1 || len(ids) != 1 {
				t.Fatalf("round %d: %d writers added, runs returned %v; want one run, added once", round, added, ids)
			}
		}
		if p := listRuns(t, stores[1], store.RunQuery{TriggerID: hook.ID}); p.Total != 3 {
			t.Fatalf("%d runs stored, want 3", p.Total)
		}
	})
}

func TestClaimRuns(t *testing.T) {
	each(t, func(t *testing.T, cfg store.Config, clk *clock) {
		ctx := context.Background()
		s := open(t, cfg)
		a := createTrigger(t, s, newWebhook("alpha"))
		b := createTrigger(t, s, newWebhook("beta"))
		paused := createTrigger(t, s, newWebhook("alpha"))
		now := clk.Now()
		// Added out of order: claims go by CreatedAt.
		var wantOrder []string
		for _, age := range []int{3, 5, 1, 4, 2} {
			run := addRun(t, s, store.TriggerRun{TriggerID: a.ID, CreatedAt: now.Add(-time.Duration(age) * time.Minute)})
			wantOrder = append(wantOrder, run.ID)
		}
		// by age, oldest first: 5, 4, 3, 2, 1
		wantOrder = []string{wantOrder[1], wantOrder[3], wantOrder[0], wantOrder[4], wantOrder[2]}
		// Same time: by id.
		tie := []string{store.NewRunID(), store.NewRunID()}
		slices.Sort(tie)
		for _, id := range []string{tie[1], tie[0]} {
			addRun(t, s, store.TriggerRun{ID: id, TriggerID: a.ID, CreatedAt: now})
		}
		wantOrder = append(wantOrder, tie...)
		addRun(t, s, store.TriggerRun{TriggerID: paused.ID, CreatedAt: now.Add(-time.Hour)})
		if _, err := s.SetTriggerPaused(ctx, paused.ID, true); err != nil {
			t.Fatal(err)
		}
		old := addRun(t, s, store.TriggerRun{TriggerID: a.ID, CreatedAt: now.Add(-2 * time.Hour), ExpiresAt: now})
		onB := addRun(t, s, store.TriggerRun{TriggerID: b.ID})

		got := claim(t, s, "alpha", "one", 2)
		if !reflect.DeepEqual(runIDs(got), wantOrder[:2]) {
			t.Fatalf("first claim = %v, want the two oldest %v", runIDs(got), wantOrder[:2])
		}
		for _, r := range got {
			if r.State != store.RunSending || r.Attempts != 1 || r.Machine != "alpha" {
				t.Fatalf("claimed run = %+v, want sending, one attempt", r)
			}
		}
		if got := claim(t, s, "alpha", "two", 100); !reflect.DeepEqual(runIDs(got), wantOrder[2:]) {
			t.Fatalf("second claim = %v, want the rest %v (not the paused trigger's, not the expired)", runIDs(got), wantOrder[2:])
		}
		if got := claim(t, s, "alpha", "three", 100); len(got) != 0 {
			t.Fatalf("runs held by others claimed again: %v", runIDs(got))
		}
		if got := claim(t, s, "beta", "one", 100); !reflect.DeepEqual(runIDs(got), []string{onB.ID}) {
			t.Fatalf("beta's claim = %v, want %s", runIDs(got), onB.ID)
		}
		if r, _ := s.GetRun(ctx, old.ID); r.State != store.RunQueued || r.Attempts != 0 {
			t.Fatalf("an expired run was claimed: %+v", r)
		}

		// A resumed trigger's runs are claimable.
		if _, err := s.SetTriggerPaused(ctx, paused.ID, false); err != nil {
			t.Fatal(err)
		}
		resumed := claim(t, s, "alpha", "three", 100)
		if len(resumed) != 1 || resumed[0].TriggerID != paused.ID {
			t.Fatalf("after resuming: %+v", resumed)
		}
		if err := s.FinishRun(ctx, store.RunResult{ID: resumed[0].ID, Owner: "three", State: store.RunFailed, Error: "no"}); err != nil {
			t.Fatal(err)
		}

		// A lapsed lease: another owner takes the run, counting an attempt,
		// and the first owner's result is refused.
		clk.Add(time.Hour)
		retaken := claim(t, s, "alpha", "four", 1)
		if len(retaken) != 1 || retaken[0].ID != wantOrder[0] || retaken[0].Attempts != 2 {
			t.Fatalf("after the lease lapsed: %+v, want %s with 2 attempts", retaken, wantOrder[0])
		}
		err := s.FinishRun(ctx, store.RunResult{ID: wantOrder[0], Owner: "one", State: store.RunStarted, ThreadID: "t1"})
		if !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("FinishRun by the lapsed owner: %v, want ErrNotFound", err)
		}
		if err := s.FinishRun(ctx, store.RunResult{ID: wantOrder[0], Owner: "four", State: store.RunStarted, ThreadID: "t1"}); err != nil {
			t.Fatal(err)
		}

		for _, bad := range []struct {
			machine, owner string
			lease          time.Duration
			limit          int
		}{{"", "o", time.Second, 1}, {"alpha", "", time.Second, 1}, {"alpha", "o", 0, 1}, {"alpha", "o", time.Second, 0}} {
			if _, err := s.ClaimRuns(ctx, bad.machine, bad.owner, bad.lease, bad.limit); !errors.Is(err, store.ErrInvalid) {
				t.Errorf("ClaimRuns(%+v) = %v, want ErrInvalid", bad, err)
			}
		}
	})
}

// TestClaimRunsExclusive has several owners claim and finish random runs
// at once, on PostgreSQL through two stores sharing the database (as
// replicas do): a run is held by one owner at a time, and a finished one
// is never claimed again. SQLite's owners share one store: two writing
// this hard starve each other's connection past the busy timeout, and a
// SQLite file serves one gateway (Backend.Shared).
func TestClaimRunsExclusive(t *testing.T) {
	each(t, func(t *testing.T, cfg store.Config, _ *clock) {
		ctx := context.Background()
		stores := []store.Store{open(t, cfg)}
		if stores[0].Backend().Shared() {
			stores = append(stores, open(t, cfg))
		}
		rng, seed := seeded(t)
		machines := []string{"m1", "m2", "m3"}
		triggers := map[string]string{}
		for _, m := range machines {
			triggers[m] = createTrigger(t, stores[0], newWebhook(m)).ID
		}
		total := 40 + rng.Intn(40)
		for range total {
			addRun(t, stores[rng.Intn(len(stores))], store.TriggerRun{TriggerID: triggers[machines[rng.Intn(len(machines))]]})
		}
		var mu sync.Mutex
		held := map[string]string{}
		finished := map[string]store.RunState{}
		var wg sync.WaitGroup
		for o := range 4 {
			wg.Go(func() {
				owner := fmt.Sprint("owner-", o)
				st := stores[o%len(stores)]
				r := rand.New(rand.NewSource(seed + int64(o)))
				for range 5000 {
					mu.Lock()
					done := len(finished) == total
					mu.Unlock()
					if done {
						return
					}
					m := machines[r.Intn(len(machines))]
					runs, err := st.ClaimRuns(ctx, m, owner, time.Hour, 1+r.Intn(4))
					if err != nil {
						t.Errorf("%s: %v", owner, err)
						return
					}
					mu.Lock()
					for _, run := range runs {
						if other, ok := held[run.ID]; ok {
							t.Errorf("%s claimed %s, held by %s", owner, run.ID, other)
						}
						if st, ok := finished[run.ID]; ok {
							t.Errorf("%s claimed %s, %s already", owner, run.ID, st)
						}
						if run.Machine != m {
							t.Errorf("a claim for %s took a run of %s", m, run.Machine)
						}
						held[run.ID] = owner
					}
					mu.Unlock()
					for _, run := range runs {
						res := store.RunResult{ID: run.ID, Owner: owner}
						switch r.Intn(3) {
						case 0:
							res.State, res.Error = store.RunQueued, "machine busy"
						case 1:
							res.State, res.ThreadID = store.RunStarted, "thread-"+run.ID
						default:
							res.State, res.Error = store.RunFailed, "refused"
						}
						// Released before the result is written: once it
						// is, another owner may take a requeued run.
						mu.Lock()
						delete(held, run.ID)
						mu.Unlock()
						if err := st.FinishRun(ctx, res); err != nil {
							t.Errorf("%s: FinishRun(%s): %v", owner, run.ID, err)
						}
						if res.State != store.RunQueued {
							mu.Lock()
							finished[run.ID] = res.State
							mu.Unlock()
						}
					}
				}
				t.Errorf("%s: runs left after 5000 claims", owner)
			})
		}
		wg.Wait()
		p := listRuns(t, stores[0], store.RunQuery{})
		if p.Total != total {
			t.Fatalf("%d runs, want %d", p.Total, total)
		}
		for _, run := range p.Runs {
			if want := finished[run.ID]; run.State != want || run.Attempts < 1 {
				t.Errorf("run %s ended %s after %d attempts, want %s", run.ID, run.State, run.Attempts, want)
			}
			if run.State == store.RunStarted && run.ThreadID != "thread-"+run.ID {
				t.Errorf("run %s started thread %q", run.ID, run.ThreadID)
			}
		}
	})
}

func TestFinishRun(t *testing.T) {
	each(t, func(t *testing.T, cfg store.Config, clk *clock) {
		ctx := context.Background()
		s := open(t, cfg)
		hook := createTrigger(t, s, newWebhook("alpha"))
		for range 3 {
			addRun(t, s, store.TriggerRun{TriggerID: hook.ID})
		}
		runs := claim(t, s, "alpha", "me", 3)
		if len(runs) != 3 {
			t.Fatalf("claimed %d runs, want 3", len(runs))
		}
		started, failed, requeued := runs[0], runs[1], runs[2]

		before := listRuns(t, s, store.RunQuery{})
		for _, c := range []struct {
			name, field string
			r           store.RunResult
		}{
			{"no id", "id", store.RunResult{Owner: "me", State: store.RunFailed, Error: "x"}},
			{"no owner", "owner", store.RunResult{ID: started.ID, State: store.RunFailed, Error: "x"}},
			{"no state", "state", store.RunResult{ID: started.ID, Owner: "me"}},
			{"expired by a sender", "state", store.RunResult{ID: started.ID, Owner: "me", State: store.RunExpired}},
			{"started without thread", "threadId", store.RunResult{ID: started.ID, Owner: "me", State: store.RunStarted}},
			{"long thread id", "threadId", store.RunResult{ID: started.ID, Owner: "me", State: store.RunStarted, ThreadID: strings.Repeat("t", store.MaxThreadIDBytes+1)}},
			{"failed without error", "error", store.RunResult{ID: started.ID, Owner: "me", State: store.RunFailed, Error: " "}},
			{"queued with thread", "threadId", store.RunResult{ID: started.ID, Owner: "me", State: store.RunQueued, ThreadID: "t"}},
		} {
			if err := s.FinishRun(ctx, c.r); !errors.Is(err, store.ErrInvalid) || !strings.Contains(err.Error(), " "+c.field+": ") {
				t.Errorf("%s: FinishRun = %v, want ErrInvalid naming %s", c.name, err, c.field)
			}
		}
		if after := listRuns(t, s, store.RunQuery{}); !reflect.DeepEqual(after, before) {
			t.Fatal("refused results changed runs")
		}

		clk.Add(time.Second)
		if err := s.FinishRun(ctx, store.RunResult{ID: started.ID, Owner: "someone else", State: store.RunStarted, ThreadID: "t1"}); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("FinishRun by another owner: %v, want ErrNotFound", err)
		}
		long := strings.Repeat("é", store.MaxRunErrorRunes+10)
		for _, r := range []store.RunResult{
			{ID: started.ID, Owner: "me", State: store.RunStarted, ThreadID: "01JTHREAD"},
			{ID: failed.ID, Owner: "me", State: store.RunFailed, Error: long},
			{ID: requeued.ID, Owner: "me", State: store.RunQueued, Error: "tunnel closed"},
		} {
			if err := s.FinishRun(ctx, r); err != nil {
				t.Fatalf("FinishRun(%+v): %v", r.State, err)
			}
			if err := s.FinishRun(ctx, r); !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("FinishRun(%s) twice: %v, want ErrNotFound", r.State, err)
			}
		}
		get := func(id string) store.TriggerRun {
			t.Helper()
			r, err := s.GetRun(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			return r
		}
		if r := get(started.ID); r.State != store.RunStarted || r.ThreadID != "01JTHREAD" || !r.UpdatedAt.Equal(clk.Now()) {
			t.Fatalf("started run = %+v", r)
		}
		r := get(failed.ID)
		if r.State != store.RunFailed || utf8.RuneCountInString(r.Error) != store.MaxRunErrorRunes || !strings.HasSuffix(r.Error, store.CutMark) {
			t.Fatalf("failed run: %s with an error of %d runes, want %d ending with %s", r.State, utf8.RuneCountInString(r.Error), store.MaxRunErrorRunes, store.CutMark)
		}
		if r := get(requeued.ID); r.State != store.RunQueued || r.Error != "tunnel closed" {
			t.Fatalf("requeued run = %+v", r)
		}
		// Only the requeued run is claimed again.
		again := claim(t, s, "alpha", "me", 10)
		if len(again) != 1 || again[0].ID != requeued.ID || again[0].Attempts != 2 {
			t.Fatalf("claim after finishing = %+v, want only %s, second attempt", again, requeued.ID)
		}
	})
}

func TestExpireRuns(t *testing.T) {
	each(t, func(t *testing.T, cfg store.Config, clk *clock) {
		ctx := context.Background()
		s := open(t, cfg)
		short := newWebhook("alpha")
		short.Expire = 10 * time.Minute
		hook := createTrigger(t, s, short)
		pausedTrigger := newWebhook("beta")
		pausedTrigger.Expire = 90 * time.Minute
		paused := createTrigger(t, s, pausedTrigger)
		long := createTrigger(t, s, newWebhook("alpha"))

		// Created a microsecond apart, so claims take them in this order.
		t0 := clk.Now()
		at := func(i int) time.Time { return t0.Add(time.Duration(i) * time.Microsecond) }
		leased := addRun(t, s, store.TriggerRun{TriggerID: hook.ID, CreatedAt: at(0)})
		lapsed := addRun(t, s, store.TriggerRun{TriggerID: hook.ID, CreatedAt: at(1)})
		done := addRun(t, s, store.TriggerRun{TriggerID: hook.ID, CreatedAt: at(2)})
		queued := addRun(t, s, store.TriggerRun{TriggerID: hook.ID, CreatedAt: at(3)})
		waiting := addRun(t, s, store.TriggerRun{TriggerID: long.ID, CreatedAt: at(4)})
		ofPaused := addRun(t, s, store.TriggerRun{TriggerID: paused.ID})
		if _, err := s.SetTriggerPaused(ctx, paused.ID, true); err != nil {
			t.Fatal(err)
		}
		if got, err := s.ClaimRuns(ctx, "alpha", "sender", 2*time.Hour, 1); err != nil || len(got) != 1 || got[0].ID != leased.ID {
			t.Fatalf("claim for two hours = %v, %v; want %s", runIDs(got), err, leased.ID)
		}
		if got, err := s.ClaimRuns(ctx, "alpha", "sender", time.Hour, 2); err != nil || !reflect.DeepEqual(runIDs(got), []string{lapsed.ID, done.ID}) {
			t.Fatalf("claim for an hour = %v, %v; want %s, %s", runIDs(got), err, lapsed.ID, done.ID)
		}
		if err := s.FinishRun(ctx, store.RunResult{ID: done.ID, Owner: "sender", State: store.RunStarted, ThreadID: "t1"}); err != nil {
			t.Fatal(err)
		}
		clk.Add(5 * time.Minute)
		if n, err := s.ExpireRuns(ctx, clk.Now()); err != nil || n != 0 {
			t.Fatalf("ExpireRuns before any expiry = %d, %v", n, err)
		}

		// Past the short expiry and the hour's lease, not the two hours'.
		clk.Add(56 * time.Minute)
		n, err := s.ExpireRuns(ctx, clk.Now())
		if err != nil || n != 2 {
			t.Fatalf("ExpireRuns = %d, %v; want 2 (the queued run and the lapsed lease)", n, err)
		}
		get := func(id string) store.TriggerRun {
			t.Helper()
			r, err := s.GetRun(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			return r
		}
		for _, id := range []string{queued.ID, lapsed.ID} {
			if r := get(id); r.State != store.RunExpired || r.Error != "expired: machine alpha was offline for 10m" || !r.UpdatedAt.Equal(clk.Now()) {
				t.Fatalf("expired run = %+v", r)
			}
		}
		for id, want := range map[string]store.RunState{leased.ID: store.RunSending, done.ID: store.RunStarted, waiting.ID: store.RunQueued, ofPaused.ID: store.RunQueued} {
			if r := get(id); r.State != want {
				t.Fatalf("run %s is %s, want %s", id, r.State, want)
			}
		}
		if err := s.FinishRun(ctx, store.RunResult{ID: lapsed.ID, Owner: "sender", State: store.RunStarted, ThreadID: "late"}); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("FinishRun of an expired run: %v, want ErrNotFound", err)
		}

		// Past the paused trigger's expiry and the two hours' lease.
		clk.Add(time.Hour)
		if n, err := s.ExpireRuns(ctx, clk.Now()); err != nil || n != 2 {
			t.Fatalf("ExpireRuns = %d, %v; want 2 (the paused trigger's run and the lapsed lease)", n, err)
		}
		if r := get(ofPaused.ID); r.State != store.RunExpired || r.Error != "expired: trigger paused: not started within 1h30m" {
			t.Fatalf("the paused trigger's run = %+v", r)
		}
		if r := get(leased.ID); r.State != store.RunExpired {
			t.Fatalf("a lapsed lease past its expiry: %s", r.State)
		}
		if n, err := s.ExpireRuns(ctx, clk.Now()); err != nil || n != 0 {
			t.Fatalf("ExpireRuns again = %d, %v", n, err)
		}
		if r := get(waiting.ID); r.State != store.RunQueued {
			t.Fatalf("a run within its expiry: %s", r.State)
		}
	})
}

func TestQueuedMachinesAndCounts(t *testing.T) {
	each(t, func(t *testing.T, cfg store.Config, clk *clock) {
		ctx := context.Background()
		s := open(t, cfg)
		queued := func() []string {
			t.Helper()
			ms, err := s.QueuedMachines(ctx)
			if err != nil {
				t.Fatal(err)
			}
			return ms
		}
		counts := func() store.RunCounts {
			t.Helper()
			c, err := s.CountRuns(ctx)
			if err != nil {
				t.Fatal(err)
			}
			return c
		}
		zero := store.RunCounts{store.RunQueued: 0, store.RunSending: 0, store.RunStarted: 0, store.RunExpired: 0, store.RunFailed: 0}
		if got := queued(); len(got) != 0 {
			t.Fatalf("queued machines of an empty store: %v", got)
		}
		if got := counts(); !reflect.DeepEqual(got, zero) {
			t.Fatalf("counts of an empty store: %v", got)
		}
		trig := map[string]store.Trigger{}
		for _, m := range []string{"zeta", "alpha", "paused", "sent", "gone", "leased"} {
			trig[m] = createTrigger(t, s, newWebhook(m))
			addRun(t, s, store.TriggerRun{TriggerID: trig[m].ID})
		}
		addRun(t, s, store.TriggerRun{TriggerID: trig["zeta"].ID})
		if _, err := s.SetTriggerPaused(ctx, trig["paused"].ID, true); err != nil {
			t.Fatal(err)
		}
		sent := claim(t, s, "sent", "me", 1)
		if err := s.FinishRun(ctx, store.RunResult{ID: sent[0].ID, Owner: "me", State: store.RunStarted, ThreadID: "t"}); err != nil {
			t.Fatal(err)
		}
		claim(t, s, "leased", "me", 1)
		addRun(t, s, store.TriggerRun{TriggerID: trig["gone"].ID, CreatedAt: clk.Now().Add(-time.Hour), ExpiresAt: clk.Now()})
		if got, want := queued(), []string{"alpha", "gone", "zeta"}; !reflect.DeepEqual(got, want) {
			t.Fatalf("QueuedMachines = %v, want %v", got, want)
		}
		want := store.RunCounts{store.RunQueued: 6, store.RunSending: 1, store.RunStarted: 1, store.RunExpired: 0, store.RunFailed: 0}
		if got := counts(); !reflect.DeepEqual(got, want) {
			t.Fatalf("CountRuns = %v, want %v", got, want)
		}
		// An hour on, the lease lapsed.
		clk.Add(time.Hour)
		if got, want := queued(), []string{"alpha", "gone", "leased", "zeta"}; !reflect.DeepEqual(got, want) {
			t.Fatalf("QueuedMachines an hour on = %v, want %v", got, want)
		}
	})
}

func TestListRuns(t *testing.T) {
	each(t, func(t *testing.T, cfg store.Config, clk *clock) {
		ctx := context.Background()
		s := open(t, cfg)
		rng, _ := seeded(t)
		a := createTrigger(t, s, newWebhook("alpha"))
		b := createTrigger(t, s, newWebhook("beta"))
		c := createTrigger(t, s, newSchedule("alpha"))
		var all []store.TriggerRun
		for i := range 30 {
			tr := []store.Trigger{a, b, c}[rng.Intn(3)]
			clk.Add(time.Duration(rng.Intn(2)) * time.Second) // ties too
			all = append(all, addRun(t, s, store.TriggerRun{TriggerID: tr.ID, Prompt: fmt.Sprint("run ", i)}))
		}
		// Some runs move on.
		for _, r := range claim(t, s, "alpha", "me", 8) {
			res := store.RunResult{ID: r.ID, Owner: "me", State: store.RunFailed, Error: "no"}
			if rng.Intn(2) == 0 {
				res.State, res.Error, res.ThreadID = store.RunStarted, "", "t"
			}
			if err := s.FinishRun(ctx, res); err != nil {
				t.Fatal(err)
			}
		}
		claim(t, s, "beta", "me", 2)
		for i, r := range all {
			if all[i], _ = s.GetRun(ctx, r.ID); all[i].ID != r.ID {
				t.Fatalf("run %s lost", r.ID)
			}
		}
		newestFirst := slices.Clone(all)
		slices.SortFunc(newestFirst, func(x, y store.TriggerRun) int {
			if c := y.CreatedAt.Compare(x.CreatedAt); c != 0 {
				return c
			}
			return strings.Compare(y.ID, x.ID)
		})
		for _, q := range []store.RunQuery{
			{}, {TriggerID: a.ID}, {Machine: "alpha"}, {Machine: "beta", State: store.RunSending}, {State: store.RunQueued},
			{State: store.RunStarted}, {TriggerID: c.ID, State: store.RunFailed}, {TriggerID: "trg_none"},
		} {
			var want []store.TriggerRun
			for _, r := range newestFirst {
				if (q.TriggerID == "" || r.TriggerID == q.TriggerID) && (q.Machine == "" || r.Machine == q.Machine) && (q.State == "" || r.State == q.State) {
					want = append(want, r)
				}
			}
			// Page through in small pages.
			var got []store.TriggerRun
			size := 1 + rng.Intn(5)
			for off := 0; ; off += size {
				q.Limit, q.Offset = size, off
				p, err := s.ListRuns(ctx, q)
				if err != nil {
					t.Fatal(err)
				}
				if p.Total != len(want) {
					t.Fatalf("ListRuns(%+v).Total = %d, want %d", q, p.Total, len(want))
				}
				if len(p.Runs) == 0 {
					break
				}
				got = append(got, p.Runs...)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("ListRuns(%+v) by pages of %d:\n got %v\nwant %v", q, size, runIDs(got), runIDs(want))
			}
		}
		if p, err := s.ListRuns(ctx, store.RunQuery{}); err != nil || len(p.Runs) != min(store.DefaultRunLimit, len(all)) {
			t.Fatalf("default page: %d runs, %v", len(p.Runs), err)
		}
		if p, err := s.ListRuns(ctx, store.RunQuery{Limit: 3, Offset: -5}); err != nil || !reflect.DeepEqual(p.Runs, newestFirst[:3]) {
			t.Fatalf("a negative offset: %v, %v", runIDs(p.Runs), err)
		}
		if _, err := s.ListRuns(ctx, store.RunQuery{State: "done"}); !errors.Is(err, store.ErrInvalid) || !strings.Contains(err.Error(), "state") {
			t.Fatalf("ListRuns of an unknown state: %v, want ErrInvalid naming the state", err)
		}
	})
}

func TestDeleteTriggerRemovesRuns(t *testing.T) {
	each(t, func(t *testing.T, cfg store.Config, _ *clock) {
		ctx := context.Background()
		s := open(t, cfg)
		gone := createTrigger(t, s, newWebhook("alpha"))
		kept := createTrigger(t, s, newWebhook("beta"))
		var goneRuns []store.TriggerRun
		for range 3 {
			goneRuns = append(goneRuns, addRun(t, s, store.TriggerRun{TriggerID: gone.ID}))
		}
		keptRun := addRun(t, s, store.TriggerRun{TriggerID: kept.ID, DeliveryID: "d"})
		claimed := claim(t, s, "alpha", "me", 1)
		if err := s.DeleteTrigger(ctx, gone.ID); err != nil {
			t.Fatal(err)
		}
		for _, r := range goneRuns {
			if _, err := s.GetRun(ctx, r.ID); !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("run %s of a deleted trigger: %v, want ErrNotFound", r.ID, err)
			}
		}
		if err := s.FinishRun(ctx, store.RunResult{ID: claimed[0].ID, Owner: "me", State: store.RunStarted, ThreadID: "t"}); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("FinishRun of a deleted run: %v, want ErrNotFound", err)
		}
		if p := listRuns(t, s, store.RunQuery{}); p.Total != 1 || p.Runs[0].ID != keptRun.ID {
			t.Fatalf("runs left: %v, want only %s", runIDs(p.Runs), keptRun.ID)
		}
		if _, _, err := s.AddRun(ctx, store.TriggerRun{TriggerID: gone.ID}); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("AddRun of a deleted trigger: %v, want ErrNotFound", err)
		}
	})
}

func TestFinishedRunsBound(t *testing.T) {
	each(t, func(t *testing.T, cfg store.Config, clk *clock) {
		ctx := context.Background()
		s := open(t, cfg)
		short := newWebhook("alpha")
		short.Expire = time.Minute
		hook := createTrigger(t, s, short)
		other := createTrigger(t, s, newWebhook("alpha"))
		// The oldest run of all waits longer: queued runs are never deleted.
		start := clk.Now()
		waiting := addRun(t, s, store.TriggerRun{TriggerID: hook.ID, CreatedAt: start.Add(-time.Second), ExpiresAt: start.Add(time.Hour)})
		otherRun := addRun(t, s, store.TriggerRun{TriggerID: other.ID, CreatedAt: start.Add(-time.Second), ExpiresAt: start.Add(time.Second)})
		const extra = 3
		var runs []store.TriggerRun
		for i := range store.MaxFinishedRuns + extra {
			runs = append(runs, addRun(t, s, store.TriggerRun{TriggerID: hook.ID, CreatedAt: start.Add(time.Duration(i) * time.Microsecond)}))
		}
		clk.Add(2 * time.Minute)
		if n, err := s.ExpireRuns(ctx, clk.Now()); err != nil || n != store.MaxFinishedRuns+extra+1 {
			t.Fatalf("ExpireRuns = %d, %v; want %d", n, err, store.MaxFinishedRuns+extra+1)
		}
		if p, err := s.ListRuns(ctx, store.RunQuery{TriggerID: hook.ID, State: store.RunExpired, Limit: 10 * store.MaxRunLimit}); err != nil || p.Total != store.MaxFinishedRuns+extra || len(p.Runs) != store.MaxRunLimit {
			t.Fatalf("before the next run: %d finished, a page of %d; want %d, a page of %d", p.Total, len(p.Runs), store.MaxFinishedRuns+extra, store.MaxRunLimit)
		}
		latest := addRun(t, s, store.TriggerRun{TriggerID: hook.ID})
		if p := listRuns(t, s, store.RunQuery{TriggerID: hook.ID, State: store.RunExpired}); p.Total != store.MaxFinishedRuns {
			t.Fatalf("after the next run: %d finished runs, want %d", p.Total, store.MaxFinishedRuns)
		}
		for i, r := range runs {
			_, err := s.GetRun(ctx, r.ID)
			if deleted := i < extra; deleted != errors.Is(err, store.ErrNotFound) {
				t.Fatalf("run %d of %d: %v (deleted: %v)", i, len(runs), err, deleted)
			}
		}
		for _, r := range []store.TriggerRun{waiting, latest, otherRun} {
			if _, err := s.GetRun(ctx, r.ID); err != nil {
				t.Fatalf("run %s deleted: %v", r.ID, err)
			}
		}
	})
}

func TestTriggerChanges(t *testing.T) {
	each(t, func(t *testing.T, cfg store.Config, clk *clock) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		s := open(t, cfg)
		ch, err := s.Subscribe(ctx)
		if err != nil {
			t.Fatal(err)
		}
		hook := newWebhook("alpha")
		steps := []func() error{
			func() error { return s.CreateTrigger(ctx, hook) },
			func() error { _, err := s.SetTriggerPaused(ctx, hook.ID, true); return err },
			func() error { return s.DeleteTrigger(ctx, hook.ID) },
		}
		for i, step := range steps {
			if err := step(); err != nil {
				t.Fatal(err)
			}
			if c := recv(t, ch); c.Kind != store.ChangeTrigger || !reflect.DeepEqual(c.IDs, []string{hook.ID}) {
				t.Fatalf("step %d: change %+v, want %s of %s", i, c, store.ChangeTrigger, hook.ID)
			}
		}
		// A run queued says for which machine; the same delivery again
		// queues nothing and says nothing.
		hook = newWebhook("alpha")
		if err := s.CreateTrigger(ctx, hook); err != nil {
			t.Fatal(err)
		}
		recv(t, ch)
		for i := 0; i < 2; i++ {
			if _, _, err := s.AddRun(ctx, store.TriggerRun{TriggerID: hook.ID, DeliveryID: "d-1"}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.SetTriggerPaused(ctx, hook.ID, true); err != nil {
			t.Fatal(err)
		}
		if c := recv(t, ch); c.Kind != store.ChangeRun || !reflect.DeepEqual(c.IDs, []string{hook.Machine}) {
			t.Fatalf("the run's change %+v, want %s of %s", c, store.ChangeRun, hook.Machine)
		}
		if c := recv(t, ch); c.Kind != store.ChangeTrigger {
			t.Fatalf("after one run queued, then a pause: %+v (a repeated delivery said something)", c)
		}

		// A run's moves say whose trigger's runs moved: claimed, finished,
		// expired. A claim or an expiry that finds nothing says nothing.
		if _, err := s.SetTriggerPaused(ctx, hook.ID, false); err != nil {
			t.Fatal(err)
		}
		recv(t, ch)
		wantRunState := func(what string) {
			t.Helper()
			if c := recv(t, ch); c.Kind != store.ChangeRunState || !reflect.DeepEqual(c.IDs, []string{hook.ID}) {
				t.Fatalf("%s: change %+v, want %s of %s", what, c, store.ChangeRunState, hook.ID)
			}
		}
		claimed, err := s.ClaimRuns(ctx, hook.Machine, "one", time.Hour, 5)
		if err != nil || len(claimed) != 1 {
			t.Fatalf("claim: %v %v", claimed, err)
		}
		wantRunState("the claim")
		if _, err := s.ClaimRuns(ctx, hook.Machine, "one", time.Hour, 5); err != nil {
			t.Fatal(err)
		}
		if err := s.FinishRun(ctx, store.RunResult{ID: claimed[0].ID, Owner: "one", State: store.RunQueued}); err != nil {
			t.Fatal(err)
		}
		wantRunState("the run given back")
		if err := s.FinishRun(ctx, store.RunResult{ID: claimed[0].ID, Owner: "one", State: store.RunQueued}); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("finishing a run not claimed: %v", err)
		}
		if n, err := s.ExpireRuns(ctx, clk.Now()); err != nil || n != 0 {
			t.Fatalf("expire nothing: %d %v", n, err)
		}
		if n, err := s.ExpireRuns(ctx, clk.Now().Add(10*365*24*time.Hour)); err != nil || n != 1 {
			t.Fatalf("expire the run: %d %v", n, err)
		}
		wantRunState("the expiry")
		if _, err := s.SetTriggerPaused(ctx, hook.ID, true); err != nil {
			t.Fatal(err)
		}
		if c := recv(t, ch); c.Kind != store.ChangeTrigger {
			t.Fatalf("after the run's moves: %+v (a claim, failed finish or expiry of nothing said something)", c)
		}
	})
}

// TestTriggerMigrationsUpDown undoes the triggers' migration on a
// database holding triggers, then opens it again: the tables are gone,
// then back, and what other tables hold is kept.
func TestTriggerMigrationsUpDown(t *testing.T) {
	each(t, func(t *testing.T, cfg store.Config, clk *clock) {
		ctx := context.Background()
		s, err := store.Open(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		version, err := s.SchemaVersion(ctx)
		if err != nil {
			t.Fatal(err)
		}
		hook := newWebhook("alpha")
		if err := s.CreateTrigger(ctx, hook); err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.AddRun(ctx, store.TriggerRun{TriggerID: hook.ID}); err != nil {
			t.Fatal(err)
		}
		if err := s.CreateToken(ctx, store.Token{ID: "keep", Kind: store.KindConnector, Name: "alpha", CreatedAt: clk.Now()}); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}

		driver, dsn, dialect, dir := "pgx", cfg.DatabaseURL, goose.DialectPostgres, "postgres"
		if cfg.DatabaseURL == "" {
			driver, dsn, dialect, dir = "sqlite", "file:"+filepath.Join(cfg.DataDir, store.SQLiteFile)+"?_pragma=busy_timeout(10000)&_pragma=foreign_keys(ON)", goose.DialectSQLite3, "sqlite"
		}
		db, err := sql.Open(driver, dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = db.Close() }() // a test's side connection
		p, err := goose.NewProvider(dialect, db, os.DirFS(filepath.Join("migrations", dir)), goose.WithDisableGlobalRegistry(true))
		if err != nil {
			t.Fatal(err)
		}
		var triggersVersion int64
		for _, src := range p.ListSources() {
			if strings.HasSuffix(src.Path, "_triggers.sql") {
				triggersVersion = src.Version
			}
		}
		if triggersVersion == 0 || triggersVersion > version {
			t.Fatalf("the triggers' migration is version %d, the database %d", triggersVersion, version)
		}
		if _, err := p.DownTo(ctx, triggersVersion-1); err != nil {
			t.Fatalf("migrating down: %v", err)
		}
		for _, table := range []string{"triggers", "trigger_runs"} {
			if _, err := db.ExecContext(ctx, `SELECT count(*) FROM `+table); err == nil {
				t.Fatalf("table %s is still there after migrating down", table)
			}
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}

		s = open(t, cfg)
		if v, err := s.SchemaVersion(ctx); err != nil || v != version {
			t.Fatalf("migrated up again to version %d, %v; want %d", v, err, version)
		}
		if _, err := s.GetToken(ctx, "keep"); err != nil {
			t.Fatalf("a token lost over the migrations: %v", err)
		}
		if list, err := s.ListTriggers(ctx); err != nil || len(list) != 0 {
			t.Fatalf("triggers after migrating down and up: %d, %v; want none", len(list), err)
		}
		createTrigger(t, s, hook)
		addRun(t, s, store.TriggerRun{TriggerID: hook.ID})
	})
}
