package store_test

import (
	"context"
	"errors"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/uncaged/workflow/gateway/store"
)

// TestThreadStats sums threads per machine and per workflow over a range:
// days by status, success rate's parts, the median duration of ended
// threads only, tokens and cost; threads outside the range do not count.
func TestThreadStats(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, cfg store.Config, clk *clock) {
		ctx := context.Background()
		s := open(t, cfg)
		day1 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
		day2 := day1.Add(24 * time.Hour)
		th := func(id, wf, status string, at time.Time, dur time.Duration, tokens int64, cost float64) store.Thread {
			return store.Thread{ID: id, Workflow: wf, Status: status, UpdatedAt: at, Duration: dur, Tokens: tokens, Cost: cost}
		}
		if err := s.SyncThreads(ctx, "m1", []store.Thread{
			th("a", "build", "completed", day1.Add(time.Hour), 10*time.Second, 100, 0.5),
			th("b", "build", "failed", day1.Add(2*time.Hour), 30*time.Second, 50, 0.25),
			th("c", "fix", "completed", day2.Add(time.Hour), 20*time.Second, 10, 0.125),
			th("d", "fix", "running", day2.Add(2*time.Hour), time.Hour, 1, 0),
			th("old", "build", "completed", day1.Add(-time.Hour), time.Second, 1000, 9),
		}); err != nil {
			t.Fatal(err)
		}
		if err := s.SyncThreads(ctx, "m2", []store.Thread{
			th("e", "build", "killed", day2.Add(3*time.Hour), 40*time.Second, 7, 0),
		}); err != nil {
			t.Fatal(err)
		}
		got, err := s.ThreadStats(ctx, store.StatsQuery{By: store.StatsByMachine, Since: day1, Until: day2.Add(24 * time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		want := []store.GroupStats{
			{Key: "m1", Days: []store.DayCount{
				{Day: day1, ByStatus: map[string]int{"completed": 1, "failed": 1}},
				{Day: day2, ByStatus: map[string]int{"completed": 1, "running": 1}},
			}, Threads: 4, Ended: 3, Completed: 2, MedianDuration: 20 * time.Second, Tokens: 161, Cost: 0.875},
			{Key: "m2", Days: []store.DayCount{{Day: day2, ByStatus: map[string]int{"killed": 1}}},
				Threads: 1, Ended: 1, MedianDuration: 40 * time.Second, Tokens: 7},
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("by machine:\n got %+v\nwant %+v", got, want)
		}
		got, err = s.ThreadStats(ctx, store.StatsQuery{By: store.StatsByWorkflow, Since: day2, Until: day2.Add(24 * time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		want = []store.GroupStats{
			{Key: "build", Days: []store.DayCount{{Day: day2, ByStatus: map[string]int{"killed": 1}}},
				Threads: 1, Ended: 1, MedianDuration: 40 * time.Second, Tokens: 7},
			{Key: "fix", Days: []store.DayCount{{Day: day2, ByStatus: map[string]int{"completed": 1, "running": 1}}},
				Threads: 2, Ended: 1, Completed: 1, MedianDuration: 20 * time.Second, Tokens: 11, Cost: 0.125},
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("by workflow on day 2:\n got %+v\nwant %+v", got, want)
		}
		if got, err := s.ThreadStats(ctx, store.StatsQuery{By: store.StatsByMachine, Since: day1.Add(-48 * time.Hour), Until: day1.Add(-24 * time.Hour)}); err != nil || len(got) != 0 {
			t.Fatalf("an empty range: %+v, %v", got, err)
		}
		// A thread read back keeps its tokens and cost.
		if a, err := s.GetThread(ctx, "m1", "a"); err != nil || a.Tokens != 100 || a.Cost != 0.5 {
			t.Fatalf("thread a: %+v, %v", a, err)
		}
	})
}

// TestThreadStatsRefusesBadQueries: a grouping it does not know, a
// missing or reversed range, and one too long.
func TestThreadStatsRefusesBadQueries(t *testing.T) {
	t.Parallel()
	s := open(t, store.Config{DataDir: t.TempDir()})
	now := time.Now()
	for name, q := range map[string]store.StatsQuery{
		"grouping":  {By: "status", Since: now.Add(-time.Hour), Until: now},
		"no since":  {By: store.StatsByMachine, Until: now},
		"no until":  {By: store.StatsByMachine, Since: now},
		"reversed":  {By: store.StatsByMachine, Since: now, Until: now.Add(-time.Hour)},
		"too long":  {By: store.StatsByMachine, Since: now.Add(-store.MaxStatsRange - time.Hour), Until: now},
		"empty set": {By: store.StatsByWorkflow, Since: now, Until: now},
	} {
		if _, err := s.ThreadStats(context.Background(), q); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// TestSyncCorrectsBadTokens: negative, non-finite or absurd tokens and
// cost are stored as unknown (0) and counted, and the rest of the batch
// is stored: one connector's nonsense must not hold its other threads
// back.
func TestSyncCorrectsBadTokens(t *testing.T) {
	t.Parallel()
	s := open(t, store.Config{DataDir: t.TempDir()})
	ctx := context.Background()
	for name, bad := range map[string]store.Thread{
		"negative tokens": {ID: "x", Tokens: -1, Cost: 1},
		"too many tokens": {ID: "x", Tokens: store.MaxTokens + 1, Cost: 1},
		"negative cost":   {ID: "x", Tokens: 1, Cost: -0.5},
		"NaN cost":        {ID: "x", Tokens: 1, Cost: math.NaN()},
		"infinite cost":   {ID: "x", Tokens: 1, Cost: math.Inf(1)},
		"absurd cost":     {ID: "x", Tokens: 1, Cost: store.MaxCost * 2},
	} {
		res, err := s.SyncThreadsResult(ctx, "m", []store.Thread{{ID: "ok", Tokens: 5}, bad})
		if err != nil || res.Cut[store.FieldTokens]+res.Cut[store.FieldCost] != 1 {
			t.Errorf("%s: %+v, %v", name, res, err)
		}
		got, err := s.GetThread(ctx, "m", "x")
		if err != nil || (got.Tokens != 0 && got.Cost != 0) || (got.Tokens != 1 && got.Cost != 1) {
			t.Errorf("%s: stored %+v, %v", name, got, err)
		}
		if ok, err := s.GetThread(ctx, "m", "ok"); err != nil || ok.Tokens != 5 {
			t.Fatalf("%s: the rest of the batch: %+v, %v", name, ok, err)
		}
	}
}

// TestParseThreadCursor reads back what String writes and refuses
// anything else with ErrBadCursor.
func TestParseThreadCursor(t *testing.T) {
	t.Parallel()
	c := store.ThreadCursor{UpdatedAt: time.Date(2026, 3, 1, 12, 0, 0, 123456000, time.UTC), Machine: "m-1", ID: "t/2"}
	got, err := store.ParseThreadCursor(c.String())
	if err != nil || got != c {
		t.Fatalf("round trip: %+v, %v; want %+v", got, err, c)
	}
	for name, bad := range map[string]string{
		"empty":         "",
		"not base64":    "!!!",
		"not JSON":      "bm90IGpzb24",
		"unknown field": "eyJ0IjoxLCJtIjoibSIsImkiOiJpIiwieCI6MX0", // {"t":1,"m":"m","i":"i","x":1}
		"no machine":    "eyJ0IjoxLCJpIjoiaSJ9",                    // {"t":1,"i":"i"}
		"no id":         "eyJ0IjoxLCJtIjoibSJ9",                    // {"t":1,"m":"m"}
		"wrong types":   "eyJ0IjoiMSIsIm0iOiJtIiwiaSI6ImkifQ",      // {"t":"1","m":"m","i":"i"}
	} {
		if _, err := store.ParseThreadCursor(bad); !errors.Is(err, store.ErrBadCursor) {
			t.Errorf("%s: err = %v", name, err)
		}
	}
}
