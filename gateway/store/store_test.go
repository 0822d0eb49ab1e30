package store_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/uncaged/workflow/gateway/store"
	"github.com/uncaged/workflow/shared/testkit"
	"github.com/uncaged/workflow/shared/testkit/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// clock is a settable time source, so times the store fills in are known.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// backend makes a Config for a fresh database of one kind.
type backend struct {
	name string
	cfg  func(t testing.TB) store.Config
}

var backends = []backend{
	{"sqlite", func(t testing.TB) store.Config { return store.Config{DataDir: t.TempDir()} }},
	{"postgres", func(t testing.TB) store.Config { return store.Config{DatabaseURL: pgtest.URL(t)} }},
}

// each runs f once per backend, on a fresh database with a fake clock.
func each(t *testing.T, f func(t *testing.T, cfg store.Config, clk *clock)) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			clk := newClock()
			cfg := b.cfg(t)
			cfg.Now = clk.Now
			f(t, cfg, clk)
		})
	}
}

func open(t testing.TB, cfg store.Config) store.Store {
	t.Helper()
	s, err := store.Open(context.Background(), cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

func ptr[T any](v T) *T { return &v }

func TestBackend(t *testing.T) {
	each(t, func(t *testing.T, cfg store.Config, _ *clock) {
		s := open(t, cfg)
		want := store.BackendSQLite
		if cfg.DatabaseURL != "" {
			want = store.BackendPostgres
		}
		if s.Backend() != want {
			t.Fatalf("Backend() = %q, want %q", s.Backend(), want)
		}
		if s.Backend().Shared() != (want == store.BackendPostgres) {
			t.Fatalf("%s: Shared() = %v", want, s.Backend().Shared())
		}
	})
}

func TestTokens(t *testing.T) {
	each(t, func(t *testing.T, cfg store.Config, clk *clock) {
		ctx := context.Background()
		s := open(t, cfg)
		created := clk.Now().Add(-time.Hour)
		exp := created.Add(24 * time.Hour)
		toks := []store.Token{
			{ID: "c1", Kind: store.KindConnector, Name: "alpha", CreatedAt: created, ExpiresAt: &exp, Note: "first"},
			{ID: "c2", Kind: store.KindConnector, Name: "alpha", CreatedAt: created.Add(time.Minute)},
			{ID: "c3", Kind: store.KindConnector, Name: "beta", CreatedAt: created.Add(2 * time.Minute)},
			{ID: "d1", Kind: store.KindDashboard, Name: "ann", CreatedAt: created.Add(3 * time.Minute), Note: "laptop"},
			{ID: "d2", Kind: store.KindDashboard, Name: "bob", CreatedAt: created.Add(4 * time.Minute)},
		}
		for _, tk := range toks {
			if err := s.CreateToken(ctx, tk); err != nil {
				t.Fatalf("CreateToken(%s): %v", tk.ID, err)
			}
		}
		if err := s.CreateToken(ctx, toks[0]); !errors.Is(err, store.ErrExists) {
			t.Fatalf("duplicate CreateToken: %v, want ErrExists", err)
		}
		if err := s.CreateToken(ctx, store.Token{ID: "x", Kind: "admin"}); err == nil {
			t.Fatal("CreateToken with an unknown kind succeeded")
		}
		if err := s.CreateToken(ctx, store.Token{Kind: store.KindDashboard}); err == nil {
			t.Fatal("CreateToken without id succeeded")
		}

		got, err := s.GetToken(ctx, "c1")
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, toks[0]) {
			t.Fatalf("GetToken = %+v, want %+v", got, toks[0])
		}
		if got.CreatedAt.Location() != time.UTC {
			t.Fatalf("times are not UTC: %v", got.CreatedAt.Location())
		}
		if _, err := s.GetToken(ctx, "nope"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("GetToken(unknown): %v, want ErrNotFound", err)
		}

		ids := func(ts []store.Token) []string {
			var out []string
			for _, tk := range ts {
				out = append(out, tk.ID)
			}
			return out
		}
		list := func(f store.TokenFilter) []string {
			t.Helper()
			ts, err := s.ListTokens(ctx, f)
			if err != nil {
				t.Fatal(err)
			}
			return ids(ts)
		}
		if got := list(store.TokenFilter{}); !reflect.DeepEqual(got, []string{"d2", "d1", "c3", "c2", "c1"}) {
			t.Fatalf("ListTokens() = %v, want newest first", got)
		}
		if got := list(store.TokenFilter{Kind: store.KindConnector, Name: "alpha"}); !reflect.DeepEqual(got, []string{"c2", "c1"}) {
			t.Fatalf("ListTokens(connector alpha) = %v", got)
		}

		clk.Add(time.Minute)
		revoked, err := s.RevokeToken(ctx, "d1")
		if err != nil {
			t.Fatal(err)
		}
		if revoked.RevokedAt == nil || !revoked.RevokedAt.Equal(clk.Now()) || revoked.Note != "laptop" {
			t.Fatalf("RevokeToken = %+v, want revoked at %v", revoked, clk.Now())
		}
		firstRevocation := *revoked.RevokedAt
		clk.Add(time.Minute)
		again, err := s.RevokeToken(ctx, "d1")
		if err != nil || again.RevokedAt == nil || !again.RevokedAt.Equal(firstRevocation) {
			t.Fatalf("revoking again = %+v, %v; want unchanged", again, err)
		}
		if _, err := s.RevokeToken(ctx, "unknown"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("RevokeToken(unknown): %v, want ErrNotFound", err)
		}
		if got := list(store.TokenFilter{Kind: store.KindDashboard, ActiveOnly: true}); !reflect.DeepEqual(got, []string{"d2"}) {
			t.Fatalf("active dashboard tokens = %v", got)
		}

		rs, err := s.RevokeConnectorTokens(ctx, "alpha")
		if err != nil {
			t.Fatal(err)
		}
		if got := ids(rs); len(got) != 2 || !contains(got, "c1") || !contains(got, "c2") {
			t.Fatalf("RevokeConnectorTokens(alpha) = %v", got)
		}
		if rs, err := s.RevokeConnectorTokens(ctx, "alpha"); err != nil || len(rs) != 0 {
			t.Fatalf("second RevokeConnectorTokens = %v, %v; want none", rs, err)
		}
		if rs, err := s.RevokeConnectorTokens(ctx, "ann"); err != nil || len(rs) != 0 {
			t.Fatalf("RevokeConnectorTokens of a dashboard subject = %v, %v; want none", rs, err)
		}
		rs, err = s.RevokeKind(ctx, store.KindDashboard)
		if err != nil || !reflect.DeepEqual(ids(rs), []string{"d2"}) {
			t.Fatalf("RevokeKind(dashboard) = %v, %v; want only d2 (d1 was revoked)", ids(rs), err)
		}
		if _, err := s.RevokeKind(ctx, "admin"); err == nil {
			t.Fatal("RevokeKind of an unknown kind succeeded")
		}
		all, err := s.RevokedTokenIDs(ctx)
		if err != nil || !reflect.DeepEqual(all, []string{"c1", "c2", "d1", "d2"}) {
			t.Fatalf("RevokedTokenIDs = %v, %v", all, err)
		}
	})
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

func TestRegistrations(t *testing.T) {
	each(t, func(t *testing.T, cfg store.Config, clk *clock) {
		ctx := context.Background()
		s := open(t, cfg)
		a := store.Registration{Name: "a", URL: "http://a:1", TokenSealed: []byte{0, 1, 2, 255}, RegisteredAt: clk.Now(), LastHeartbeat: clk.Now()}
		b := store.Registration{Name: "b", URL: "http://b:1", TokenSealed: []byte("sealed"), RegisteredAt: clk.Now(), LastHeartbeat: clk.Now()}
		for _, r := range []store.Registration{b, a} {
			if err := s.PutRegistration(ctx, r); err != nil {
				t.Fatal(err)
			}
		}
		got, err := s.ListRegistrations(ctx)
		if err != nil || !reflect.DeepEqual(got, []store.Registration{a, b}) {
			t.Fatalf("ListRegistrations = %+v, %v", got, err)
		}
		a.URL = "http://a:2"
		a.RegisteredAt = clk.Now().Add(time.Minute)
		if err := s.PutRegistration(ctx, a); err != nil {
			t.Fatal(err)
		}
		hb := clk.Now().Add(2 * time.Minute)
		if err := s.TouchRegistration(ctx, "a", hb); err != nil {
			t.Fatal(err)
		}
		a.LastHeartbeat = hb
		if got, err := s.GetRegistration(ctx, "a"); err != nil || !reflect.DeepEqual(got, a) {
			t.Fatalf("GetRegistration = %+v, %v; want %+v", got, err, a)
		}
		if err := s.TouchRegistration(ctx, "zz", hb); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("TouchRegistration(unknown): %v", err)
		}
		if err := s.DeleteRegistration(ctx, "b"); err != nil {
			t.Fatal(err)
		}
		if err := s.DeleteRegistration(ctx, "b"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("DeleteRegistration twice: %v", err)
		}
		if _, err := s.GetRegistration(ctx, "b"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("GetRegistration(deleted): %v", err)
		}
		if err := s.PutRegistration(ctx, store.Registration{}); err == nil {
			t.Fatal("PutRegistration without a name succeeded")
		}
	})
}

func thread(id string, updated time.Time) store.Thread {
	return store.Thread{ID: id, Workflow: "build", Status: "done", Prompt: "prompt of " + id, UpdatedAt: updated}
}

func TestThreadsAndMachines(t *testing.T) {
	each(t, func(t *testing.T, cfg store.Config, clk *clock) {
		ctx := context.Background()
		s := open(t, cfg)
		first := clk.Now()
		started := first.Add(-time.Hour)
		full := store.Thread{ID: "t1", Workflow: "deploy", Status: "failed", Prompt: "ship it",
			StartedAt: &started, UpdatedAt: first, Duration: 90*time.Second + 123*time.Microsecond, Steps: 7,
			ReturnCode: ptr(3), Summary: "it broke", Usage: json.RawMessage(`{"input_tokens": 10, "output_tokens": 2}`)}
		if err := s.SyncThreads(ctx, "m1", []store.Thread{full, thread("t2", first)}); err != nil {
			t.Fatal(err)
		}
		got, err := s.GetThread(ctx, "m1", "t1")
		if err != nil {
			t.Fatal(err)
		}
		want := full
		want.Machine = "m1"
		var gotUsage, wantUsage any
		if err := json.Unmarshal(got.Usage, &gotUsage); err != nil {
			t.Fatalf("usage %q: %v", got.Usage, err)
		}
		if err := json.Unmarshal(want.Usage, &wantUsage); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(gotUsage, wantUsage) {
			t.Fatalf("usage = %s, want %s", got.Usage, want.Usage)
		}
		got.Usage, want.Usage = nil, nil
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("GetThread = %+v\nwant %+v", got, want)
		}
		if t2, err := s.GetThread(ctx, "m1", "t2"); err != nil || t2.StartedAt != nil || t2.ReturnCode != nil || t2.Usage != nil {
			t.Fatalf("thread without optional fields = %+v, %v", t2, err)
		}
		if _, err := s.GetThread(ctx, "m2", "t1"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("GetThread on another machine: %v", err)
		}

		// A resync updates what changed and keeps threads it does not name.
		clk.Add(time.Minute)
		upd := full
		upd.Status, upd.Summary, upd.UpdatedAt, upd.ReturnCode, upd.Usage = "done", "fixed", clk.Now(), nil, nil
		if err := s.SyncThreads(ctx, "m1", []store.Thread{upd}); err != nil {
			t.Fatal(err)
		}
		if got, err := s.GetThread(ctx, "m1", "t1"); err != nil || got.Status != "done" || got.Summary != "fixed" || got.ReturnCode != nil || got.Usage != nil {
			t.Fatalf("after resync: %+v, %v", got, err)
		}
		if _, err := s.GetThread(ctx, "m1", "t2"); err != nil {
			t.Fatalf("a thread left out of a resync was dropped: %v", err)
		}

		// A thread without UpdatedAt is stamped now.
		if err := s.SyncThreads(ctx, "m2", []store.Thread{{ID: "x"}}); err != nil {
			t.Fatal(err)
		}
		if got, err := s.GetThread(ctx, "m2", "x"); err != nil || !got.UpdatedAt.Equal(clk.Now()) {
			t.Fatalf("thread without time = %+v, %v", got, err)
		}

		clk.Add(time.Minute)
		m, err := s.TouchMachine(ctx, "m1")
		if err != nil || m.Name != "m1" || !m.FirstSeen.Equal(first) || !m.LastSeen.Equal(clk.Now()) {
			t.Fatalf("TouchMachine = %+v, %v; first seen %v, last %v", m, err, first, clk.Now())
		}
		if _, err := s.TouchMachine(ctx, "m3"); err != nil {
			t.Fatal(err)
		}
		ms, err := s.ListMachines(ctx)
		if err != nil || len(ms) != 3 || ms[0].Name != "m1" || ms[2].Name != "m3" || !ms[2].FirstSeen.Equal(clk.Now()) {
			t.Fatalf("ListMachines = %+v, %v", ms, err)
		}

		for name, machine := range map[string]string{"no machine": "", "a machine that is not text": "m\xff", "a NUL": "m\x00"} {
			if err := s.SyncThreads(ctx, machine, []store.Thread{thread("a", first)}); err == nil {
				t.Errorf("SyncThreads with %s succeeded", name)
			}
		}
		// A thread the store cannot keep is refused alone, and one whose
		// usage is not JSON is kept without it (bounds_test.go has the rest).
		res, err := s.SyncThreadsResult(ctx, "m1", []store.Thread{{}, {ID: "u", Usage: json.RawMessage(`{not json`)}})
		if err != nil || len(res.Refused) != 1 || res.Refused[0].Reason != store.RefusedBadID || res.Cut[store.FieldUsage] != 1 {
			t.Fatalf("a thread without an id and one with bad usage: %+v, %v", res, err)
		}
		if u, err := s.GetThread(ctx, "m1", "u"); err != nil || u.Usage != nil {
			t.Fatalf("the thread with bad usage: %+v, %v", u, err)
		}
		if _, err := s.TouchMachine(ctx, ""); err == nil {
			t.Error("TouchMachine without a name succeeded")
		}
	})
}

func TestPromptTruncation(t *testing.T) {
	each(t, func(t *testing.T, cfg store.Config, clk *clock) {
		ctx := context.Background()
		s := open(t, cfg)
		// 499 ASCII runes, then multi-byte ones: a byte cut at 500 would
		// split "é"; the store must cut after whole runes, and say it cut.
		long := strings.Repeat("a", 499) + strings.Repeat("é日", 100)
		exact := strings.Repeat("日", store.PromptMaxRunes)
		dirty := "bad \xff byte and a \x00 nul"
		err := s.SyncThreads(ctx, "m", []store.Thread{
			{ID: "long", Prompt: long, UpdatedAt: clk.Now()},
			{ID: "exact", Prompt: exact, UpdatedAt: clk.Now()},
			{ID: "dirty", Prompt: dirty, Summary: dirty, UpdatedAt: clk.Now()},
		})
		if err != nil {
			t.Fatal(err)
		}
		got, err := s.GetThread(ctx, "m", "long")
		if err != nil {
			t.Fatal(err)
		}
		if want := strings.Repeat("a", 499) + store.CutMark; got.Prompt != want {
			t.Fatalf("prompt kept %d runes (%q...), want the first 499 and the cut mark", utf8.RuneCountInString(got.Prompt), got.Prompt[490:])
		}
		if got, err := s.GetThread(ctx, "m", "exact"); err != nil || got.Prompt != exact {
			t.Fatalf("a prompt of exactly %d runes was changed: %v", store.PromptMaxRunes, err)
		}
		got, err = s.GetThread(ctx, "m", "dirty")
		if err != nil {
			t.Fatal(err)
		}
		if !utf8.ValidString(got.Prompt) || strings.Contains(got.Prompt, "\x00") || !strings.HasPrefix(got.Prompt, "bad ") || got.Summary != got.Prompt {
			t.Fatalf("invalid text stored as %q / %q", got.Prompt, got.Summary)
		}
	})
}

func TestSearch(t *testing.T) {
	each(t, func(t *testing.T, cfg store.Config, clk *clock) {
		ctx := context.Background()
		s := open(t, cfg)
		base := clk.Now()
		at := func(i int) time.Time { return base.Add(time.Duration(i) * time.Minute) }
		m1 := []store.Thread{
			{ID: "a", Workflow: "deploy", Status: "done", Prompt: "Deploy the payments service", Summary: "rolled out", UpdatedAt: at(1)},
			{ID: "b", Workflow: "deploy", Status: "failed", Prompt: "deploy search", Summary: "timeout talking to the database", UpdatedAt: at(2)},
			{ID: "c", Workflow: "review", Status: "done", Prompt: "review pull request 42", Summary: "looks good", UpdatedAt: at(3)},
		}
		m2 := []store.Thread{
			{ID: "a", Workflow: "deploy", Status: "done", Prompt: "deploy payments to staging", Summary: "ok", UpdatedAt: at(4)},
			{ID: "d", Workflow: "review", Status: "running", Prompt: "review the database migration", UpdatedAt: at(5)},
		}
		if err := s.SyncThreads(ctx, "m1", m1); err != nil {
			t.Fatal(err)
		}
		if err := s.SyncThreads(ctx, "m2", m2); err != nil {
			t.Fatal(err)
		}
		keys := func(p store.ThreadPage) []string {
			var out []string
			for _, th := range p.Threads {
				out = append(out, th.Machine+"/"+th.ID)
			}
			return out
		}
		cases := []struct {
			name  string
			q     store.ThreadQuery
			want  []string
			total int
		}{
			{"all newest first", store.ThreadQuery{}, []string{"m2/d", "m2/a", "m1/c", "m1/b", "m1/a"}, 5},
			{"machine", store.ThreadQuery{Machine: "m1"}, []string{"m1/c", "m1/b", "m1/a"}, 3},
			{"workflow", store.ThreadQuery{Workflow: "review"}, []string{"m2/d", "m1/c"}, 2},
			{"status", store.ThreadQuery{Status: "done"}, []string{"m2/a", "m1/c", "m1/a"}, 3},
			{"since inclusive", store.ThreadQuery{Since: at(4)}, []string{"m2/d", "m2/a"}, 2},
			{"until exclusive", store.ThreadQuery{Until: at(2)}, []string{"m1/a"}, 1},
			{"one word, any case", store.ThreadQuery{Q: "PAYMENTS"}, []string{"m2/a", "m1/a"}, 2},
			{"summary too", store.ThreadQuery{Q: "database"}, []string{"m2/d", "m1/b"}, 2},
			{"every word", store.ThreadQuery{Q: "deploy database"}, []string{"m1/b"}, 1},
			{"text and filters", store.ThreadQuery{Q: "deploy", Machine: "m1", Status: "done"}, []string{"m1/a"}, 1},
			{"no match", store.ThreadQuery{Q: "kubernetes"}, nil, 0},
			{"punctuation only filters nothing", store.ThreadQuery{Q: " -*\"( "}, []string{"m2/d", "m2/a", "m1/c", "m1/b", "m1/a"}, 5},
			{"quotes and stars are not syntax", store.ThreadQuery{Q: `"deploy" payments*`}, []string{"m2/a", "m1/a"}, 2},
			{"operators are words", store.ThreadQuery{Q: `deploy AND NEAR(payments`}, nil, 0},
			{"page", store.ThreadQuery{Limit: 2, Offset: 1}, []string{"m2/a", "m1/c"}, 5},
			{"page past the end", store.ThreadQuery{Limit: 2, Offset: 10}, nil, 5},
			{"page of a text search", store.ThreadQuery{Q: "deploy", Limit: 1, Offset: 1}, []string{"m1/b"}, 3},
		}
		for _, c := range cases {
			p, err := s.SearchThreads(ctx, c.q)
			if err != nil {
				t.Errorf("%s: %v", c.name, err)
				continue
			}
			if got := keys(p); !reflect.DeepEqual(got, c.want) || p.Total != c.total {
				t.Errorf("%s: got %v (total %d), want %v (total %d)", c.name, got, p.Total, c.want, c.total)
			}
		}

		// The index follows updates: the old words no longer match.
		upd := m1[0]
		upd.Prompt, upd.Summary = "rename a column", "done"
		if err := s.SyncThreads(ctx, "m1", []store.Thread{upd}); err != nil {
			t.Fatal(err)
		}
		if p, err := s.SearchThreads(ctx, store.ThreadQuery{Q: "payments"}); err != nil || !reflect.DeepEqual(keys(p), []string{"m2/a"}) {
			t.Fatalf("after an update, payments matches %v, %v", keys(p), err)
		}
		if p, err := s.SearchThreads(ctx, store.ThreadQuery{Q: "column"}); err != nil || !reflect.DeepEqual(keys(p), []string{"m1/a"}) {
			t.Fatalf("after an update, column matches %v, %v", keys(p), err)
		}
	})
}

func TestAudit(t *testing.T) {
	each(t, func(t *testing.T, cfg store.Config, clk *clock) {
		ctx := context.Background()
		s := open(t, cfg)
		entries := []store.AuditEntry{
			{TokenID: "d1", Actor: "laptop", Source: "10.0.0.1", Action: "start", Machine: "m1", Target: "t1", Status: 200},
			{Actor: store.SharedSecretActor, Source: "10.0.0.2", Action: "kill", Machine: "m1", Target: "t1", Status: 200},
			{TokenID: "d1", Actor: "laptop", Source: "10.0.0.1", Action: "token-revoke", Target: "c1", Status: 204},
			{TokenID: "d2", Source: "10.0.0.3", Action: "start", Machine: "m2", Target: "t9", Status: 502},
		}
		var ids []int64
		for _, e := range entries {
			clk.Add(time.Minute)
			id, err := s.AppendAudit(ctx, e)
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		}
		for i := 1; i < len(ids); i++ {
			if ids[i] <= ids[i-1] {
				t.Fatalf("audit ids do not increase: %v", ids)
			}
		}
		p, err := s.ListAudit(ctx, store.AuditQuery{})
		if err != nil || p.Total != 4 || len(p.Entries) != 4 {
			t.Fatalf("ListAudit = %+v, %v", p, err)
		}
		want := entries[3]
		want.ID, want.Time = ids[3], clk.Now()
		if !reflect.DeepEqual(p.Entries[0], want) {
			t.Fatalf("newest entry = %+v, want %+v", p.Entries[0], want)
		}
		action := func(p store.AuditPage) []string {
			var out []string
			for _, e := range p.Entries {
				out = append(out, e.Action+"@"+e.Machine)
			}
			return out
		}
		start := newClock().Now()
		cases := []struct {
			name  string
			q     store.AuditQuery
			want  []string
			total int
		}{
			{"action", store.AuditQuery{Action: "start"}, []string{"start@m2", "start@m1"}, 2},
			{"machine", store.AuditQuery{Machine: "m1"}, []string{"kill@m1", "start@m1"}, 2},
			{"token", store.AuditQuery{TokenID: "d2"}, []string{"start@m2"}, 1},
			{"since", store.AuditQuery{Since: start.Add(3 * time.Minute)}, []string{"start@m2", "token-revoke@"}, 2},
			{"until", store.AuditQuery{Until: start.Add(2 * time.Minute)}, []string{"start@m1"}, 1},
			{"page", store.AuditQuery{Limit: 1, Offset: 1}, []string{"token-revoke@"}, 4},
		}
		for _, c := range cases {
			p, err := s.ListAudit(ctx, c.q)
			if err != nil {
				t.Errorf("%s: %v", c.name, err)
				continue
			}
			if got := action(p); !reflect.DeepEqual(got, c.want) || p.Total != c.total {
				t.Errorf("%s: got %v (total %d), want %v (total %d)", c.name, got, p.Total, c.want, c.total)
			}
		}
		at := time.Date(2020, 1, 2, 3, 4, 5, 6000, time.FixedZone("X", 3600))
		id, err := s.AppendAudit(ctx, store.AuditEntry{Time: at, Action: "gc"})
		if err != nil {
			t.Fatal(err)
		}
		p, err = s.ListAudit(ctx, store.AuditQuery{Action: "gc"})
		if err != nil || len(p.Entries) != 1 || p.Entries[0].ID != id || !p.Entries[0].Time.Equal(at) || p.Entries[0].Time.Location() != time.UTC {
			t.Fatalf("an entry's own time came back as %+v, %v", p.Entries, err)
		}

		jwt := "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJl"
		for _, bad := range []store.AuditEntry{
			{Action: "login", Actor: jwt},
			{Action: "login", Target: "Bearer " + jwt},
			{Action: ""},
		} {
			if _, err := s.AppendAudit(ctx, bad); err == nil {
				t.Errorf("AppendAudit(%+v) succeeded", bad)
			}
		}
	})
}

func TestPrune(t *testing.T) {
	each(t, func(t *testing.T, cfg store.Config, clk *clock) {
		ctx := context.Background()
		s := open(t, cfg)
		old := clk.Now()
		if err := s.SyncThreads(ctx, "gone", []store.Thread{thread("1", old)}); err != nil {
			t.Fatal(err)
		}
		if err := s.SyncThreads(ctx, "kept", []store.Thread{thread("1", old), thread("2", old.Add(2*time.Hour))}); err != nil {
			t.Fatal(err)
		}
		for _, a := range []string{"start", "kill"} {
			if _, err := s.AppendAudit(ctx, store.AuditEntry{Action: a}); err != nil {
				t.Fatal(err)
			}
		}
		clk.Add(2 * time.Hour)
		if _, err := s.AppendAudit(ctx, store.AuditEntry{Action: "gc"}); err != nil {
			t.Fatal(err)
		}
		// "kept" is seen again; "gone" is not.
		if _, err := s.TouchMachine(ctx, "kept"); err != nil {
			t.Fatal(err)
		}
		res, err := s.Prune(ctx, old.Add(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		if res != (store.PruneResult{Threads: 2, Machines: 1, Audit: 2}) {
			t.Fatalf("Prune = %+v", res)
		}
		if _, err := s.GetThread(ctx, "kept", "2"); err != nil {
			t.Fatalf("a recent thread was pruned: %v", err)
		}
		if _, err := s.GetThread(ctx, "kept", "1"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("an old thread was kept: %v", err)
		}
		ms, err := s.ListMachines(ctx)
		if err != nil || len(ms) != 1 || ms[0].Name != "kept" {
			t.Fatalf("machines after prune = %+v, %v", ms, err)
		}
		if p, err := s.ListAudit(ctx, store.AuditQuery{}); err != nil || p.Total != 1 || p.Entries[0].Action != "gc" {
			t.Fatalf("audit after prune = %+v, %v", p, err)
		}
	})
}

// setSchemaVersion records version as applied, as a newer gateway's
// migration would have.
func setSchemaVersion(t *testing.T, cfg store.Config, version int64) {
	t.Helper()
	ctx := context.Background()
	if cfg.DatabaseURL != "" {
		c, err := pgx.Connect(ctx, cfg.DatabaseURL)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = c.Close(ctx) }() // a test's side connection
		if _, err := c.Exec(ctx, `INSERT INTO goose_db_version (version_id, is_applied) VALUES ($1, true)`, version); err != nil {
			t.Fatal(err)
		}
		return
	}
	db, err := sql.Open("sqlite", "file:"+filepath.Join(cfg.DataDir, store.SQLiteFile)+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = db.Close() }() // a test's side connection
	if _, err := db.ExecContext(ctx, `INSERT INTO goose_db_version (version_id, is_applied) VALUES (?, 1)`, version); err != nil {
		t.Fatal(err)
	}
}

func TestMigrations(t *testing.T) {
	each(t, func(t *testing.T, cfg store.Config, clk *clock) {
		ctx := context.Background()
		s, err := store.Open(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		v, err := s.SchemaVersion(ctx)
		if err != nil || v < 1 {
			t.Fatalf("fresh database at version %d, %v", v, err)
		}
		if err := s.CreateToken(ctx, store.Token{ID: "keep", Kind: store.KindConnector, Name: "m", CreatedAt: clk.Now()}); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}

		// Reopening migrates nothing and keeps the data.
		s, err = store.Open(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if v2, err := s.SchemaVersion(ctx); err != nil || v2 != v {
			t.Fatalf("reopened at version %d, %v; want %d", v2, err, v)
		}
		if _, err := s.GetToken(ctx, "keep"); err != nil {
			t.Fatalf("data lost on reopen: %v", err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}

		// A newer gateway migrated the database: this one must refuse it.
		newer := v + 100
		setSchemaVersion(t, cfg, newer)
		_, err = store.Open(ctx, cfg)
		if err == nil {
			t.Fatal("Open of a newer schema succeeded")
		}
		for _, want := range []string{fmt.Sprint(newer), fmt.Sprintf("version %d", v), "upgrade the gateway"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not say %q", err, want)
			}
		}
	})
}

func TestOpenErrors(t *testing.T) {
	ctx := context.Background()
	if _, err := store.Open(ctx, store.Config{}); err == nil {
		t.Error("Open with neither a data directory nor a URL succeeded")
	}
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Open(ctx, store.Config{DataDir: file}); err == nil {
		t.Error("Open with a file as data directory succeeded")
	}
	if _, err := store.Open(ctx, store.Config{DataDir: filepath.Join(t.TempDir(), "a?b")}); err == nil {
		t.Error("Open with a ? in the data directory succeeded")
	}
	_, err := store.Open(ctx, store.Config{DatabaseURL: "postgres://user:s3cret@host:notaport/db"})
	if err == nil || !strings.Contains(err.Error(), "database URL") || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("bad URL: %v; want an error about the URL, without the password", err)
	}
	// A port nothing listens on: connecting is refused at once.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	_, err = store.Open(ctx, store.Config{DatabaseURL: "postgres://u:s3cret@" + addr + "/db?sslmode=disable"})
	if err == nil || !strings.Contains(err.Error(), "connect to PostgreSQL at "+addr) || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("unreachable database: %v; want an error naming %s, without the password", err, addr)
	}
}

// recv waits for the next change; the bound only turns a change that
// never comes into a failure.
func recv(t *testing.T, ch <-chan store.Change) store.Change {
	t.Helper()
	select {
	case c, ok := <-ch:
		if !ok {
			t.Fatal("subscription closed")
		}
		return c
	case <-time.After(testkit.WaitBound):
		t.Fatal("no change delivered")
	}
	return store.Change{}
}

func TestSubscribe(t *testing.T) {
	each(t, func(t *testing.T, cfg store.Config, clk *clock) {
		ctx := context.Background()
		s := open(t, cfg)
		sctx, cancel := context.WithCancel(ctx)
		ch, err := s.Subscribe(sctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{"a", "b", "c"} {
			if err := s.CreateToken(ctx, store.Token{ID: id, Kind: store.KindConnector, Name: "m", CreatedAt: clk.Now()}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.RevokeToken(ctx, "a"); err != nil {
			t.Fatal(err)
		}
		if c := recv(t, ch); c.Kind != store.ChangeRevocation || !reflect.DeepEqual(c.IDs, []string{"a"}) {
			t.Fatalf("change = %+v, want revocation of a", c)
		}
		// Revoking nothing new sends nothing: the next change is the put.
		if _, err := s.RevokeToken(ctx, "a"); err != nil {
			t.Fatal(err)
		}
		if err := s.PutRegistration(ctx, store.Registration{Name: "r", URL: "http://r", RegisteredAt: clk.Now(), LastHeartbeat: clk.Now()}); err != nil {
			t.Fatal(err)
		}
		if c := recv(t, ch); c.Kind != store.ChangeRegistration || !reflect.DeepEqual(c.IDs, []string{"r"}) {
			t.Fatalf("change = %+v, want registration r", c)
		}
		if err := s.TouchRegistration(ctx, "r", clk.Now()); err != nil {
			t.Fatal(err)
		}
		if err := s.DeleteRegistration(ctx, "r"); err != nil {
			t.Fatal(err)
		}
		if c := recv(t, ch); c.Kind != store.ChangeRegistration || !reflect.DeepEqual(c.IDs, []string{"r"}) {
			t.Fatalf("change = %+v, want registration r (deleted; a heartbeat sends nothing)", c)
		}
		rs, err := s.RevokeConnectorTokens(ctx, "m")
		if err != nil || len(rs) != 2 {
			t.Fatalf("RevokeConnectorTokens = %v, %v", rs, err)
		}
		if c := recv(t, ch); c.Kind != store.ChangeRevocation || len(c.IDs) != 2 || !contains(c.IDs, "b") || !contains(c.IDs, "c") {
			t.Fatalf("change = %+v, want revocation of b and c", c)
		}
		// A failed write sends nothing.
		if err := s.DeleteRegistration(ctx, "r"); !errors.Is(err, store.ErrNotFound) {
			t.Fatal(err)
		}
		cancel()
		for c := range ch {
			t.Fatalf("change after a failed write or cancel: %+v", c)
		}

		// Close ends subscriptions.
		s2 := open(t, cfg)
		ch2, err := s2.Subscribe(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := s2.Close(); err != nil {
			t.Fatal(err)
		}
		for c := range ch2 {
			t.Fatalf("change after Close: %+v", c)
		}
	})
}

// TestAnnounce: what a process announces reaches every subscriber of the
// database, its own and another process's, whole however many ids it
// names (PostgreSQL splits a long list over notifications), and writes
// nothing.
func TestAnnounce(t *testing.T) {
	each(t, func(t *testing.T, cfg store.Config, _ *clock) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		a := open(t, cfg)
		subs := []<-chan store.Change{}
		for _, s := range []store.Store{a, open(t, cfg)} {
			ch, err := s.Subscribe(ctx)
			if err != nil {
				t.Fatal(err)
			}
			subs = append(subs, ch)
		}
		if cfg.DatabaseURL == "" {
			subs = subs[:1] // two SQLite stores in one process do not hear each other
		}
		var names []string
		for i := range 2000 {
			names = append(names, fmt.Sprintf("machine-%04d", i))
		}
		if err := a.Announce(ctx, store.Change{Kind: store.ChangeThreads, IDs: names}); err != nil {
			t.Fatal(err)
		}
		for i, ch := range subs {
			var got []string
			for len(got) < len(names) {
				c := recv(t, ch)
				if c.Kind != store.ChangeThreads {
					t.Fatalf("subscriber %d: %+v", i, c)
				}
				got = append(got, c.IDs...)
			}
			if !reflect.DeepEqual(got, names) {
				t.Fatalf("subscriber %d heard %d ids, not the %d announced in order", i, len(got), len(names))
			}
		}
		if ms, err := a.ListMachines(ctx); err != nil || len(ms) != 0 {
			t.Fatalf("announcing wrote machines: %v %v", ms, err)
		}
	})
}

// TestNotifyAcrossStores is PostgreSQL's case: two gateway processes on one
// database, where a revocation in one must reach the other.
func TestNotifyAcrossStores(t *testing.T) {
	ctx := context.Background()
	url := pgtest.URL(t)
	a := open(t, store.Config{DatabaseURL: url})
	b := open(t, store.Config{DatabaseURL: url})
	ch, err := b.Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.CreateToken(ctx, store.Token{ID: "one", Kind: store.KindDashboard, Name: "ann", CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.RevokeToken(ctx, "one"); err != nil {
		t.Fatal(err)
	}
	if c := recv(t, ch); c.Kind != store.ChangeRevocation || !reflect.DeepEqual(c.IDs, []string{"one"}) {
		t.Fatalf("b saw %+v, want the revocation of one", c)
	}
	if ids, err := b.RevokedTokenIDs(ctx); err != nil || !reflect.DeepEqual(ids, []string{"one"}) {
		t.Fatalf("b's revoked ids = %v, %v", ids, err)
	}

	// More ids than one notification can carry arrive over several.
	want := map[string]bool{}
	for i := range 600 {
		id := fmt.Sprintf("01JTOKEN%020d", i)
		want[id] = true
		if err := a.CreateToken(ctx, store.Token{ID: id, Kind: store.KindConnector, Name: "m", CreatedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	rs, err := a.RevokeKind(ctx, store.KindConnector)
	if err != nil || len(rs) != 600 {
		t.Fatalf("RevokeKind = %d tokens, %v", len(rs), err)
	}
	notes := 0
	for len(want) > 0 {
		c := recv(t, ch)
		if c.Kind != store.ChangeRevocation {
			t.Fatalf("b saw %+v", c)
		}
		notes++
		for _, id := range c.IDs {
			delete(want, id)
		}
	}
	if notes < 2 {
		t.Fatalf("600 ids came in %d notification(s); the payload limit should have split them", notes)
	}

	if err := a.PutRegistration(ctx, store.Registration{Name: "r", URL: "http://r", TokenSealed: []byte{1}, RegisteredAt: time.Now(), LastHeartbeat: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if c := recv(t, ch); c.Kind != store.ChangeRegistration || !reflect.DeepEqual(c.IDs, []string{"r"}) {
		t.Fatalf("b saw %+v, want registration r", c)
	}
}

// TestListenerReconnects cuts the LISTEN connection: the subscriber is told
// to reload (it may have missed changes) and later changes arrive again.
func TestListenerReconnects(t *testing.T) {
	ctx := context.Background()
	url := pgtest.URL(t)
	a := open(t, store.Config{DatabaseURL: url})
	b := open(t, store.Config{DatabaseURL: url})
	ch, err := b.Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close(ctx) }() // a test's side connection
	var killed int
	if err := c.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
WHERE application_name = 'uncaged-gateway-listen' AND datname = current_database()`).Scan(&killed); err != nil {
		t.Fatal(err)
	}
	if killed != 1 {
		t.Fatalf("terminated %d LISTEN connections, want 1", killed)
	}
	if got := recv(t, ch); got.Kind != store.ChangeReload {
		t.Fatalf("after losing LISTEN, b saw %+v, want reload", got)
	}
	if err := a.CreateToken(ctx, store.Token{ID: "x", Kind: store.KindDashboard, Name: "ann", CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.RevokeToken(ctx, "x"); err != nil {
		t.Fatal(err)
	}
	if got := recv(t, ch); got.Kind != store.ChangeRevocation || !reflect.DeepEqual(got.IDs, []string{"x"}) {
		t.Fatalf("after reconnecting, b saw %+v, want revocation of x", got)
	}
}

// TestConcurrentWriters runs writers side by side: SQLite's one writer
// must queue them, not fail with "database is locked".
func TestConcurrentWriters(t *testing.T) {
	each(t, func(t *testing.T, cfg store.Config, clk *clock) {
		ctx := context.Background()
		s := open(t, cfg)
		var wg sync.WaitGroup
		errs := make(chan error, 40)
		for i := range 20 {
			wg.Add(2)
			go func() {
				defer wg.Done()
				m := fmt.Sprintf("m%d", i)
				errs <- s.SyncThreads(ctx, m, []store.Thread{thread("1", clk.Now()), thread("2", clk.Now())})
			}()
			go func() {
				defer wg.Done()
				_, err := s.AppendAudit(ctx, store.AuditEntry{Action: "start"})
				if err == nil {
					_, err = s.SearchThreads(ctx, store.ThreadQuery{Q: "prompt"})
				}
				errs <- err
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		if p, err := s.SearchThreads(ctx, store.ThreadQuery{}); err != nil || p.Total != 40 {
			t.Fatalf("after concurrent syncs: %d threads, %v", p.Total, err)
		}
	})
}

// TestConcurrentOpen starts several gateways at once on a fresh
// PostgreSQL database: the migration lock makes them take turns, and all
// open.
func TestConcurrentOpen(t *testing.T) {
	url := pgtest.URL(t)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Go(func() {
			s, err := store.Open(context.Background(), store.Config{DatabaseURL: url})
			if err == nil {
				err = s.Close()
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestSQLiteSharedFile opens one data directory twice, as a running
// gateway and the token commands do: both work, and a change committed
// through one reaches the other's subscribers (as a reload: SQLite does
// not say what another process changed), so a revocation made beside a
// running gateway takes effect there.
func TestSQLiteSharedFile(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg := store.Config{DataDir: t.TempDir()}
	gw := open(t, cfg)
	ch, err := gw.Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cli := open(t, cfg)
	if err := cli.CreateToken(ctx, store.Token{ID: "t1", Kind: store.KindConnector, Name: "m", CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if c := recv(t, ch); c.Kind != store.ChangeReload {
		t.Fatalf("after another store's write: %+v, want a reload", c)
	}
	if _, err := cli.RevokeToken(ctx, "t1"); err != nil {
		t.Fatal(err)
	}
	// The next reload may be the revocation's or still the creation's
	// (both can fall between two polls): read until the revocation shows.
	for {
		ids, err := gw.RevokedTokenIDs(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if reflect.DeepEqual(ids, []string{"t1"}) {
			break
		}
		if c := recv(t, ch); c.Kind != store.ChangeReload {
			t.Fatalf("after another store's revocation: %+v, want a reload", c)
		}
	}
	// The store's own writes are still told as they are, not as reloads.
	if err := gw.CreateToken(ctx, store.Token{ID: "t2", Kind: store.KindDashboard, Name: "ann", CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if _, err := gw.RevokeToken(ctx, "t2"); err != nil {
		t.Fatal(err)
	}
	for {
		c := recv(t, ch)
		if c.Kind == store.ChangeRevocation {
			if !reflect.DeepEqual(c.IDs, []string{"t2"}) {
				t.Fatalf("own revocation: %+v", c)
			}
			break
		}
		if c.Kind != store.ChangeReload {
			t.Fatalf("unexpected change %+v", c)
		}
	}
	if tok, err := cli.GetToken(ctx, "t2"); err != nil || tok.RevokedAt == nil {
		t.Fatalf("the other store reads t2 as %+v, %v; want it revoked", tok, err)
	}
}

// TestSearchTotalCapped fills one more thread than a search counts: the
// total stops at Config.MaxTotal and says it is a lower bound.
func TestSearchTotalCapped(t *testing.T) {
	each(t, func(t *testing.T, cfg store.Config, clk *clock) {
		ctx := context.Background()
		cfg.MaxTotal = 20
		s := open(t, cfg)
		ts := make([]store.Thread, cfg.MaxTotal+1)
		for i := range ts {
			ts[i] = thread(fmt.Sprint(i), clk.Now().Add(time.Duration(i)*time.Second))
		}
		if err := s.SyncThreads(ctx, "m", ts); err != nil {
			t.Fatal(err)
		}
		p, err := s.SearchThreads(ctx, store.ThreadQuery{Limit: 1})
		if err != nil || p.Total != cfg.MaxTotal || !p.TotalCapped || len(p.Threads) != 1 || p.Threads[0].ID != fmt.Sprint(cfg.MaxTotal) {
			t.Fatalf("search of %d threads: total %d, capped %v, page %d, %v", len(ts), p.Total, p.TotalCapped, len(p.Threads), err)
		}
		p, err = s.SearchThreads(ctx, store.ThreadQuery{Q: "prompt", Until: clk.Now().Add(10 * time.Second)})
		if err != nil || p.Total != 10 || p.TotalCapped {
			t.Fatalf("a narrow search: total %d, capped %v, %v", p.Total, p.TotalCapped, err)
		}
	})
}
