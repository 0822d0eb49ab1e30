package store_test

import (
	"context"
	"fmt"
	"math/rand"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/uncaged/workflow/gateway/store"
)

// searchVocabulary is skewed like real text: the first words are in most
// threads, the last in a few, so searches take both the common and the
// rare paths.
var searchVocabulary = []string{"deploy", "the", "service", "review", "cache", "payments", "timeout", "flaky", "marmalade", "quux", "zanzibar"}

// bruteForce is SearchThreads written the obvious way: filter every
// thread in memory, sort, count, slice.
func bruteForce(all []store.Thread, q store.ThreadQuery, maxTotal int) ([]string, int, bool) {
	words := strings.Fields(strings.ToLower(q.Q))
	var hits []store.Thread
	for _, t := range all {
		if q.Machine != "" && t.Machine != q.Machine || q.Workflow != "" && t.Workflow != q.Workflow || q.Status != "" && t.Status != q.Status {
			continue
		}
		if !q.Since.IsZero() && t.UpdatedAt.Before(q.Since) || !q.Until.IsZero() && !t.UpdatedAt.Before(q.Until) {
			continue
		}
		text := strings.Fields(strings.ToLower(t.Prompt + " " + t.Summary))
		every := true
		for _, w := range words {
			every = every && slices.Contains(text, w)
		}
		if every {
			hits = append(hits, t)
		}
	}
	slices.SortFunc(hits, func(a, b store.Thread) int {
		if c := b.UpdatedAt.Compare(a.UpdatedAt); c != 0 {
			return c
		}
		if c := strings.Compare(a.Machine, b.Machine); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	limit := q.Limit
	if limit == 0 {
		limit = store.DefaultLimit
	}
	var keys []string
	for i := q.Offset; i < len(hits) && i < q.Offset+limit; i++ {
		keys = append(keys, hits[i].Machine+"/"+hits[i].ID)
	}
	if len(hits) > maxTotal {
		return keys, maxTotal, true
	}
	return keys, len(hits), false
}

// walkPages reads every page of q by keyset paging (each page after the
// previous one's Next) and compares them, end to end, with bruteForce's
// whole list; only the last page may lack a Next.
func walkPages(t *testing.T, s store.Store, all []store.Thread, q store.ThreadQuery, what string) {
	t.Helper()
	everything := q
	everything.Offset, everything.Limit = 0, 1<<30
	want, _, _ := bruteForce(all, everything, 1<<30)
	q.Offset, q.After = 0, nil
	var got []string
	for pages := 0; ; pages++ {
		if pages > len(want)+1 {
			t.Fatalf("%s: keyset paging does not end (%d pages)", what, pages)
		}
		p, err := s.SearchThreads(context.Background(), q)
		if err != nil {
			t.Fatalf("%s, page %d after %v: %v", what, pages, q.After, err)
		}
		for _, th := range p.Threads {
			got = append(got, th.Machine+"/"+th.ID)
		}
		if p.Next == nil {
			break
		}
		if len(p.Threads) == 0 {
			t.Fatalf("%s: page %d is empty but has a next", what, pages)
		}
		c, err := store.ParseThreadCursor(p.Next.String())
		if err != nil || !c.UpdatedAt.Equal(p.Next.UpdatedAt) || c.Machine != p.Next.Machine || c.ID != p.Next.ID {
			t.Fatalf("%s: cursor %+v read back as %+v, %v", what, *p.Next, c, err)
		}
		q.After = &c
	}
	if !slices.Equal(got, want) {
		t.Fatalf("%s %+v, page by page:\n got %v\nwant %v", what, q, got, want)
	}
}

// TestSearchAgainstBruteForce compares searches of random threads with
// bruteForce: words common and rare, with and without filters and time
// bounds, pages at every offset, many threads updated at the same instant
// (whose order is by machine and id), after updates that move threads in
// time and change their text and status, and after a prune.
func TestSearchAgainstBruteForce(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, cfg store.Config, clk *clock) {
		ctx := context.Background()
		cfg.MaxTotal = 60
		s := open(t, cfg)
		rng := rand.New(rand.NewSource(1))
		base := clk.Now()
		// 25 instants for 400 threads: ties everywhere.
		instant := func() time.Time { return base.Add(time.Duration(rng.Intn(25)) * time.Second) }
		word := func() string {
			return searchVocabulary[min(int(rng.ExpFloat64()*2.5), len(searchVocabulary)-1)]
		}
		text := func(n int) string {
			var ws []string
			for range 1 + rng.Intn(n) {
				w := word()
				if rng.Intn(5) == 0 {
					w = strings.ToUpper(w[:1]) + w[1:]
				}
				ws = append(ws, w)
			}
			return strings.Join(ws, " ")
		}
		machines := []string{"m1", "m2", "laptop-7"}
		workflows := []string{"build", "fix", "review"}
		statuses := []string{"completed", "failed", "running"}
		threads := map[string]store.Thread{}
		put := func(m string, ts []store.Thread) {
			t.Helper()
			if err := s.SyncThreads(ctx, m, ts); err != nil {
				t.Fatal(err)
			}
			for _, th := range ts {
				th.Machine = m
				threads[m+"/"+th.ID] = th
			}
		}
		for _, m := range machines {
			var ts []store.Thread
			for i := range 130 {
				ts = append(ts, store.Thread{ID: fmt.Sprintf("t%03d", rng.Intn(1000)*1000+i), Workflow: workflows[rng.Intn(3)],
					Status: statuses[rng.Intn(3)], Prompt: text(8), Summary: text(3), UpdatedAt: instant()})
			}
			put(m, ts)
		}
		list := func() []store.Thread {
			var out []store.Thread
			for _, th := range threads {
				out = append(out, th)
			}
			return out
		}
		check := func(stage string, n int) {
			t.Helper()
			all := list()
			for i := range n {
				q := store.ThreadQuery{Limit: 1 + rng.Intn(30)}
				if rng.Intn(8) > 0 {
					q.Q = word()
					if rng.Intn(3) == 0 {
						q.Q += " " + strings.ToUpper(word())
					}
				}
				if rng.Intn(3) == 0 {
					q.Machine = machines[rng.Intn(3)]
				}
				if rng.Intn(4) == 0 {
					q.Workflow = workflows[rng.Intn(3)]
				}
				if rng.Intn(4) == 0 {
					q.Status = statuses[rng.Intn(3)]
				}
				if rng.Intn(4) == 0 {
					q.Since = instant()
				}
				if rng.Intn(4) == 0 {
					q.Until = instant().Add(time.Second)
				}
				if rng.Intn(2) == 0 {
					q.Offset = rng.Intn(80)
				}
				wantKeys, wantTotal, wantCapped := bruteForce(all, q, cfg.MaxTotal)
				p, err := s.SearchThreads(ctx, q)
				if err != nil {
					t.Fatalf("%s, query %d %+v: %v", stage, i, q, err)
				}
				var got []string
				for _, th := range p.Threads {
					got = append(got, th.Machine+"/"+th.ID)
					if want := threads[th.Machine+"/"+th.ID]; th.Prompt != want.Prompt || !th.UpdatedAt.Equal(want.UpdatedAt) {
						t.Fatalf("%s, query %d: %s read back as %+v, want %+v", stage, i, th.Machine+"/"+th.ID, th, want)
					}
				}
				if !slices.Equal(got, wantKeys) || p.Total != wantTotal || p.TotalCapped != wantCapped {
					t.Fatalf("%s, query %d %+v:\n got %v (total %d, capped %v)\nwant %v (total %d, capped %v)",
						stage, i, q, got, p.Total, p.TotalCapped, wantKeys, wantTotal, wantCapped)
				}
				if i%4 == 0 {
					walkPages(t, s, all, q, fmt.Sprintf("%s, query %d", stage, i))
				}
			}
		}
		check("first sync", 300)

		// Updates: some threads move in time (to instants others hold),
		// some change words, workflow or status, some change nothing.
		for _, m := range machines {
			var ts []store.Thread
			for _, th := range threads {
				if th.Machine != m || rng.Intn(2) == 0 {
					continue
				}
				switch rng.Intn(4) {
				case 0:
					th.UpdatedAt = instant()
				case 1:
					th.Prompt, th.UpdatedAt = text(8), instant()
				case 2:
					th.Status, th.Workflow = statuses[rng.Intn(3)], workflows[rng.Intn(3)]
				}
				th.Machine = ""
				ts = append(ts, th)
			}
			put(m, ts)
		}
		check("after updates", 300)

		// A prune forgets the oldest threads, and their index entries.
		cut := base.Add(5 * time.Second)
		if _, err := s.Prune(ctx, cut); err != nil {
			t.Fatal(err)
		}
		for k, th := range threads {
			if th.UpdatedAt.Before(cut) {
				delete(threads, k)
			}
		}
		check("after a prune", 200)
	})
}

// TestSearchFoldsAccents: words match whatever their accents, on both
// backends, in the text and in the query.
func TestSearchFoldsAccents(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, cfg store.Config, clk *clock) {
		ctx := context.Background()
		s := open(t, cfg)
		if cfg.DatabaseURL != "" && !unaccentInstalled(t, cfg.DatabaseURL) {
			t.Skip("this PostgreSQL has no unaccent extension: its searches match accents exactly (docs/operations.md)")
		}
		err := s.SyncThreads(ctx, "m", []store.Thread{
			{ID: "fr", Prompt: "Réécrire le café crème", Summary: "déjà fait à Zürich", UpdatedAt: clk.Now()},
			{ID: "es", Prompt: "pregunta al señor", Summary: "Ångström naïve", UpdatedAt: clk.Now().Add(time.Second)},
			{ID: "plain", Prompt: "cafe creme", Summary: "senor", UpdatedAt: clk.Now().Add(2 * time.Second)},
		})
		if err != nil {
			t.Fatal(err)
		}
		for q, want := range map[string][]string{
			"cafe":           {"m/plain", "m/fr"},
			"CAFÉ":           {"m/plain", "m/fr"},
			"crème":          {"m/plain", "m/fr"},
			"reecrire":       {"m/fr"},
			"zurich deja":    {"m/fr"},
			"señor":          {"m/plain", "m/es"},
			"angstrom naive": {"m/es"},
			"ANGSTRÖM":       {"m/es"},
		} {
			p, err := s.SearchThreads(ctx, store.ThreadQuery{Q: q})
			if err != nil {
				t.Fatalf("%q: %v", q, err)
			}
			var got []string
			for _, th := range p.Threads {
				got = append(got, th.Machine+"/"+th.ID)
			}
			if !slices.Equal(got, want) {
				t.Errorf("%q finds %v, want %v", q, got, want)
			}
		}
	})
}

// unaccentInstalled reports whether the database's migration could create
// the unaccent extension.
func unaccentInstalled(t *testing.T, url string) bool {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close(ctx) }() // a test's side connection
	var ok bool
	if err := c.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'unaccent')`).Scan(&ok); err != nil {
		t.Fatal(err)
	}
	return ok
}

// A batch may carry a thread twice (a resync and the events after it):
// only its last version is found, and the index stays sound for the next
// change.
func TestSyncOneThreadTwiceInABatch(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, cfg store.Config, clk *clock) {
		ctx := context.Background()
		s := open(t, cfg)
		t0 := clk.Now()
		batch := []store.Thread{
			{ID: "a", Prompt: "alpha", Status: "running", UpdatedAt: t0},
			{ID: "b", Prompt: "other", Status: "running", UpdatedAt: t0.Add(time.Millisecond)},
			{ID: "a", Prompt: "beta", Status: "completed", UpdatedAt: t0.Add(time.Second)},
		}
		if err := s.SyncThreads(ctx, "m", batch); err != nil {
			t.Fatal(err)
		}
		find := func(q string, status string) []string {
			t.Helper()
			p, err := s.SearchThreads(ctx, store.ThreadQuery{Q: q, Status: status})
			if err != nil {
				t.Fatalf("%q: %v", q, err)
			}
			var got []string
			for _, th := range p.Threads {
				got = append(got, th.ID+":"+th.Status)
			}
			return got
		}
		for _, c := range []struct {
			q, status string
			want      []string
		}{
			{"alpha", "", nil},
			{"beta", "", []string{"a:completed"}},
			{"", "running", []string{"b:running"}},
			{"", "completed", []string{"a:completed"}},
		} {
			if got := find(c.q, c.status); !slices.Equal(got, c.want) {
				t.Errorf("after the batch, %q status %q finds %v, want %v", c.q, c.status, got, c.want)
			}
		}
		if err := s.SyncThreads(ctx, "m", []store.Thread{{ID: "a", Prompt: "gamma", Status: "failed", UpdatedAt: t0.Add(2 * time.Second)}}); err != nil {
			t.Fatal(err)
		}
		for q, want := range map[string][]string{"beta": nil, "gamma": {"a:failed"}, "other": {"b:running"}} {
			if got := find(q, ""); !slices.Equal(got, want) {
				t.Errorf("after the next change, %q finds %v, want %v", q, got, want)
			}
		}
	})
}
