package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/uncaged/workflow/gateway/store"
)

// hostileText is a text of about n bytes that a modified connector might
// send: valid or not, with NULs, multi-byte runes across any boundary.
func hostileText(rng *rand.Rand, n int) string {
	pieces := []string{"a", "é", "日", "😀", "\x00", "\xff", "\xe6\x97", " ", "\n", "…"}
	var b strings.Builder
	for b.Len() < n {
		b.WriteString(pieces[rng.IntN(len(pieces))])
	}
	return b.String()
}

// hostileThread is a thread with each field drawn from what is fine and
// what is not.
func hostileThread(rng *rand.Rand, i int, now time.Time) store.Thread {
	pick := func(n int) int { return rng.IntN(n) }
	sizes := []int{0, 10, 255, 257, 600, 2100, 8 << 10, 9 << 10, 900 << 10}
	t := store.Thread{
		ID:       fmt.Sprintf("t%d", i),
		Workflow: hostileText(rng, sizes[pick(5)]),
		Status:   []string{"running", "completed", "done", "", "RUNNING", "x y", strings.Repeat("a", 40), "fail\x00ed", "9lives", "paused_2"}[pick(10)],
		Prompt:   hostileText(rng, sizes[pick(len(sizes))]),
		Summary:  hostileText(rng, sizes[pick(len(sizes))]),
		Tokens:   []int64{0, 12, -1, store.MaxTokens, store.MaxTokens + 1, math.MaxInt64}[pick(6)],
		Cost:     []float64{0, 0.25, -1, math.NaN(), math.Inf(1), store.MaxCost, 1e300}[pick(7)],
		Steps:    []int{0, 3, -5, math.MaxInt32, math.MaxInt32 + 1, math.MaxInt}[pick(6)],
		Duration: []time.Duration{0, time.Minute, -time.Second, store.MaxDuration + 1, math.MaxInt64}[pick(5)],
	}
	if rc := []int{0, 1, 130, -1, math.MaxInt32 + 1, math.MinInt32 - 1}[pick(7)%6]; pick(4) > 0 {
		t.ReturnCode = &rc
	}
	times := []time.Time{{}, now.Add(-time.Hour), now.Add(store.MaxClockSkew - time.Minute), now.Add(store.MaxClockSkew + time.Hour),
		time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(-5000, 1, 1, 0, 0, 0, 0, time.UTC),
		store.MinThreadTime.Add(-time.Second), time.Unix(0, 0)}
	t.UpdatedAt = times[pick(len(times))]
	if s := times[pick(len(times))]; pick(3) > 0 {
		t.StartedAt = &s
	}
	switch pick(6) {
	case 0:
		t.Usage = json.RawMessage(`{"calls":2,"models":["m"]}`)
	case 1:
		t.Usage = json.RawMessage(`{"calls":` + strings.Repeat(" ", store.MaxUsageBytes) + `1}`)
	case 2:
		t.Usage = json.RawMessage(`{not json`)
	case 3:
		t.Usage = json.RawMessage(`null`)
	case 4:
		t.Usage = json.RawMessage(`["` + strings.Repeat("x", 100<<10) + `"]`)
	}
	return t
}

// Whatever a connector sends, what the store keeps of each thread is
// within every field's bound, valid text, and marked where it was cut;
// the result counts each change; ids that cannot name a thread are
// refused alone. Both backends, many random threads.
func TestEveryFieldAConnectorSendsIsBounded(t *testing.T) {
	each(t, func(t *testing.T, cfg store.Config, clk *clock) {
		ctx := context.Background()
		s := open(t, cfg)
		now := clk.Now()
		rng := rand.New(rand.NewPCG(1, 2))
		sent := map[string]store.Thread{}
		var batch []store.Thread
		for i := range 300 {
			th := hostileThread(rng, i, now)
			sent[th.ID] = th
			batch = append(batch, th)
		}
		badIDs := []string{"", strings.Repeat("x", store.MaxThreadIDBytes+1), "a/b", "a b", "t\x00", "日本", "../etc"}
		for _, id := range badIDs {
			batch = append(batch, store.Thread{ID: id, Summary: strings.Repeat("s", 900<<10)})
		}
		var res store.SyncResult
		for chunk := range slices.Chunk(batch, 97) {
			r, err := s.SyncThreadsResult(ctx, "m", chunk)
			if err != nil {
				t.Fatal(err)
			}
			res.Refused = append(res.Refused, r.Refused...)
			for f, n := range r.Cut {
				if res.Cut == nil {
					res.Cut = map[string]int{}
				}
				res.Cut[f] += n
			}
		}
		if len(res.Refused) != len(badIDs) {
			t.Fatalf("%d threads refused, want the %d with bad ids: %+v", len(res.Refused), len(badIDs), res.Refused)
		}
		cuts := map[string]int{}
		for id, in := range sent {
			got, err := s.GetThread(ctx, "m", id)
			if err != nil {
				t.Fatalf("thread %s: %v", id, err)
			}
			text := func(field, stored, sent string, maxBytes int) {
				if !utf8.ValidString(stored) || strings.Contains(stored, "\x00") {
					t.Fatalf("%s %s stored as invalid text: %q", id, field, stored[:min(len(stored), 40)])
				}
				if len(stored) > maxBytes {
					t.Fatalf("%s %s: %d bytes stored, bound %d", id, field, len(stored), maxBytes)
				}
				if stored != sent {
					cuts[field]++
				}
				if len(sent) > maxBytes && !strings.Contains(stored, store.CutMark) {
					t.Fatalf("%s %s cut from %d bytes without a mark", id, field, len(sent))
				}
			}
			text(store.FieldWorkflow, got.Workflow, in.Workflow, store.MaxWorkflowBytes)
			text(store.FieldPrompt, got.Prompt, in.Prompt, 4*store.PromptMaxRunes)
			text(store.FieldSummary, got.Summary, in.Summary, store.MaxSummaryBytes)
			if utf8.RuneCountInString(got.Prompt) > store.PromptMaxRunes {
				t.Fatalf("%s prompt: %d runes", id, utf8.RuneCountInString(got.Prompt))
			}
			if got.Status != in.Status {
				cuts[store.FieldStatus]++
				if got.Status != store.UnknownStatus {
					t.Fatalf("%s status %q stored as %q", id, in.Status, got.Status)
				}
			}
			if len(got.Usage) > store.MaxUsageBytes || (got.Usage != nil && !json.Valid(got.Usage)) {
				t.Fatalf("%s usage stored: %.80s", id, got.Usage)
			}
			if got.Tokens < 0 || got.Tokens > store.MaxTokens || got.Cost < 0 || got.Cost > store.MaxCost || math.IsNaN(got.Cost) {
				t.Fatalf("%s tokens %d, cost %v stored", id, got.Tokens, got.Cost)
			}
			if got.Steps < 0 || got.Steps > math.MaxInt32 || got.Duration < 0 || got.Duration > store.MaxDuration {
				t.Fatalf("%s steps %d, duration %v stored", id, got.Steps, got.Duration)
			}
			if rc := got.ReturnCode; rc != nil && (*rc > math.MaxInt32 || *rc < math.MinInt32) {
				t.Fatalf("%s return code %d stored", id, *rc)
			}
			latest := now.Add(store.MaxClockSkew)
			if got.UpdatedAt.After(latest) || got.UpdatedAt.Before(store.MinThreadTime) {
				t.Fatalf("%s updated at %v stored (sent %v)", id, got.UpdatedAt, in.UpdatedAt)
			}
			if st := got.StartedAt; st != nil && (st.After(latest) || st.Before(store.MinThreadTime)) {
				t.Fatalf("%s started at %v stored", id, *st)
			}
		}
		for _, f := range []string{store.FieldWorkflow, store.FieldPrompt, store.FieldSummary, store.FieldStatus} {
			if res.Cut[f] != cuts[f] {
				t.Errorf("%s: %d counted as cut, %d stored differently", f, res.Cut[f], cuts[f])
			}
		}
		for _, f := range []string{store.FieldUsage, store.FieldTokens, store.FieldCost, store.FieldSteps, store.FieldDuration,
			store.FieldReturnCode, store.FieldUpdatedAt, store.FieldStartedAt, store.FieldSummary} {
			if res.Cut[f] == 0 {
				t.Errorf("nothing counted for %s: the random threads should have hit it", f)
			}
		}
	})
}

// What a connector sends within every bound is kept as sent and nothing
// is counted as cut: a bound that fires on ordinary threads would warn
// about every connector.
func TestAThreadWithinItsBoundsIsNotCounted(t *testing.T) {
	each(t, func(t *testing.T, cfg store.Config, clk *clock) {
		ctx := context.Background()
		s := open(t, cfg)
		now := clk.Now()
		rc := 0
		started := now.Add(-time.Minute)
		for i, th := range []store.Thread{
			{Status: "running", UpdatedAt: now},
			{Status: "completed", UpdatedAt: now, Usage: json.RawMessage(`null`)},
			{Status: "completed", UpdatedAt: now, Usage: json.RawMessage(` null `), ReturnCode: &rc},
			{Status: "failed", UpdatedAt: now, StartedAt: &started, Usage: json.RawMessage(`{"calls":2,"models":["m"]}`), Tokens: 12, Cost: 0.25, Steps: 3, Duration: time.Minute},
			{Status: "paused", UpdatedAt: now, Workflow: strings.Repeat("w", store.MaxWorkflowBytes), Summary: strings.Repeat("s", store.MaxSummaryBytes), Prompt: strings.Repeat("日", store.PromptMaxRunes)},
		} {
			th.ID = fmt.Sprintf("t%d", i)
			res, err := s.SyncThreadsResult(ctx, "m", []store.Thread{th})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Cut) != 0 || len(res.Refused) != 0 {
				t.Errorf("thread %d within its bounds: cut %v, refused %v", i, res.Cut, res.Refused)
			}
		}
	})
}

// A summary cut to its bound says so, and how much was cut.
func TestACutSummarySaysHowMuchWasCut(t *testing.T) {
	each(t, func(t *testing.T, cfg store.Config, clk *clock) {
		ctx := context.Background()
		s := open(t, cfg)
		sent := strings.Repeat("日", 300<<10) // 900 KiB
		if _, err := s.SyncThreadsResult(ctx, "m", []store.Thread{{ID: "t", Summary: sent, UpdatedAt: clk.Now()}}); err != nil {
			t.Fatal(err)
		}
		got, err := s.GetThread(ctx, "m", "t")
		if err != nil {
			t.Fatal(err)
		}
		want := "bytes cut by the gateway]"
		if len(got.Summary) > store.MaxSummaryBytes || !strings.HasSuffix(got.Summary, want) || !strings.HasPrefix(got.Summary, "日日日") {
			t.Fatalf("summary stored: %d bytes ending %q", len(got.Summary), got.Summary[len(got.Summary)-60:])
		}
	})
}

// A machine's threads stay within its share, in threads and in bytes,
// its newest kept and its oldest forgotten first, whatever order and
// batches they come in; another machine's threads are untouched.
func TestAMachineStaysWithinItsShare(t *testing.T) {
	each(t, func(t *testing.T, cfg store.Config, clk *clock) {
		ctx := context.Background()
		const maxThreads = 40
		const maxBytes = 64 << 10
		cfg.MaxThreadsPerMachine, cfg.MaxBytesPerMachine = maxThreads, maxBytes
		s := open(t, cfg)
		base := clk.Now().Add(-24 * time.Hour)
		if err := s.SyncThreads(ctx, "bystander", []store.Thread{{ID: "b1", UpdatedAt: base}, {ID: "b2", UpdatedAt: base}}); err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(3, 4))
		sent := map[string]store.Thread{} // the latest version of each thread sent
		evicted := 0
		had := map[string]bool{} // the machine's threads after the last round
		for round := range 40 {
			var batch []store.Thread
			for range 1 + rng.IntN(15) {
				id := fmt.Sprintf("t%03d", rng.IntN(150))
				th := store.Thread{ID: id, UpdatedAt: base.Add(time.Duration(rng.IntN(3600)) * time.Second),
					Summary: strings.Repeat("s", []int{0, 100, 2000, 8000}[rng.IntN(4)])}
				batch = append(batch, th)
			}
			res, err := s.SyncThreadsResult(ctx, "m", batch)
			if err != nil {
				t.Fatal(err)
			}
			evicted += res.Evicted
			for _, th := range batch {
				sent[th.ID] = th
			}
			page, err := s.SearchThreads(ctx, store.ThreadQuery{Machine: "m", Limit: store.MaxLimit})
			if err != nil {
				t.Fatal(err)
			}
			var size int
			kept := map[string]bool{}
			for _, th := range page.Threads {
				size += 256 + len(th.ID) + len(th.Summary) + len(th.Workflow) + len(th.Status) + len(th.Prompt)
				kept[th.ID] = true
			}
			if len(page.Threads) > maxThreads || size > maxBytes {
				t.Fatalf("round %d: %d threads, %d bytes kept; share %d, %d", round, len(page.Threads), size, maxThreads, maxBytes)
			}
			// Every thread forgotten now is older than every one kept.
			oldestKept := page.Threads[len(page.Threads)-1]
			for _, th := range batch {
				had[th.ID] = true
			}
			for id := range had {
				th := sent[id]
				if !kept[id] && (th.UpdatedAt.After(oldestKept.UpdatedAt) || (th.UpdatedAt.Equal(oldestKept.UpdatedAt) && id < oldestKept.ID)) {
					t.Fatalf("round %d: %s (%v) forgotten while %s (%v) is kept", round, id, th.UpdatedAt, oldestKept.ID, oldestKept.UpdatedAt)
				}
			}
			had = kept
		}
		if evicted == 0 {
			t.Fatal("nothing was evicted: the test proves nothing")
		}
		for _, id := range []string{"b1", "b2"} {
			if _, err := s.GetThread(ctx, "bystander", id); err != nil {
				t.Fatalf("another machine's thread %s: %v", id, err)
			}
		}
	})
}

// The report: one connector sent thread events with 900 KB summaries and
// filled a 64 MB data directory in 15 s. Now each is cut to its bound and
// the machine's share caps the rest: the data directory stays small.
func TestNineHundredKilobyteSummariesCannotFillTheDisk(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const share = 1 << 20
	s := open(t, store.Config{DataDir: dir, MaxBytesPerMachine: share})
	ctx := context.Background()
	summary := strings.Repeat("x", 900<<10)
	for i := range 200 {
		batch := make([]store.Thread, 5)
		for j := range batch {
			batch[j] = store.Thread{ID: fmt.Sprintf("t%d-%d", i, j), Summary: summary, UpdatedAt: time.Now()}
		}
		if err := s.SyncThreads(ctx, "attacker", batch); err != nil {
			t.Fatal(err)
		}
	}
	var total int64
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		fi, err := os.Stat(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		total += fi.Size()
	}
	// 1000 summaries of 900 KB were 900 MB; the share is 1 MiB, and the
	// database's pages, indexes and log are a few times that at most.
	if total > 24<<20 {
		t.Fatalf("the data directory holds %d bytes after 1000 threads of 900 KB with a share of %d", total, share)
	}
}
