package server

import (
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/uncaged/workflow/shared/fleet"
	"github.com/uncaged/workflow/shared/testkit"
)

// statsResult is GET /api/gateway/stats.
type statsResult struct {
	By     string            `json:"by"`
	Since  string            `json:"since"`
	Until  string            `json:"until"`
	Groups []FleetGroupStats `json:"groups"`
}

func (f *fixture) stats(query string) statsResult {
	f.t.Helper()
	resp, body := f.do("GET", "/api/gateway/stats?"+query, f.dash, nil)
	var out statsResult
	if resp.StatusCode != 200 || json.Unmarshal([]byte(body), &out) != nil {
		f.t.Fatalf("stats %s: %d %s", query, resp.StatusCode, body)
	}
	return out
}

// The fleet at a glance: per machine and per workflow, threads per day by
// status, success rate, median duration, tokens and cost, from what the
// connectors reported (tokens and cost included).
func TestFleetStats(t *testing.T) {
	t.Parallel()
	f, _ := newFleetFixture(t)
	base := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	withUsage := func(th fleet.Thread, ms int64, tokens int64, cost float64) fleet.Thread {
		th.DurationMs, th.Tokens, th.Cost = ms, tokens, cost
		return th
	}
	f.connector("laptop", newFakeConnector(
		withUsage(fakeThread("t1", "hello", "completed", "a", "", base), 1000, 100, 0.5),
		withUsage(fakeThread("t2", "hello", "failed", "b", "", base.Add(time.Hour)), 3000, 200, 0.25),
		withUsage(fakeThread("t3", "review", "completed", "c", "", base.Add(24*time.Hour)), 2000, 0, 0),
		withUsage(fakeThread("t4", "review", "running", "d", "", base.Add(25*time.Hour)), 9000, 5, 0),
		withUsage(fakeThread("bad", "review", "completed", "e", "", base.Add(26*time.Hour)), 500, -7, -1), // clamped to 0
	))
	f.connector("ci-box", newFakeConnector(withUsage(fakeThread("c1", "hello", "killed", "f", "", base.Add(2*time.Hour)), 4000, 10, 0.125)))
	f.waitSearch("", 6)
	// The ci box's stream may still be arriving after the laptop's.
	var byMachine statsResult
	testkit.WaitUntil(t, "stats of both machines", func() bool {
		byMachine = f.stats("by=machine&since=2026-11-01&until=2026-11-03")
		return len(byMachine.Groups) == 2
	})
	if byMachine.By != "machine" || byMachine.Since != "2026-11-01T00:00:00.000Z" || byMachine.Until != "2026-11-03T00:00:00.000Z" {
		t.Fatalf("range: %+v", byMachine)
	}
	ci, laptop := byMachine.Groups[0], byMachine.Groups[1]
	if ci.Key != "ci-box" || ci.Threads != 1 || ci.Ended != 1 || ci.Completed != 0 || ci.SuccessRate == nil || *ci.SuccessRate != 0 ||
		ci.MedianDurationMs == nil || *ci.MedianDurationMs != 4000 || ci.Tokens != 10 || ci.Cost != 0.125 {
		t.Errorf("ci-box: %+v", ci)
	}
	days, _ := json.Marshal(laptop.Days)
	if laptop.Key != "laptop" || laptop.Threads != 5 || laptop.Ended != 4 || laptop.Completed != 3 || laptop.SuccessRate == nil || *laptop.SuccessRate != 0.75 ||
		laptop.MedianDurationMs == nil || *laptop.MedianDurationMs != 1000 || laptop.Tokens != 305 || laptop.Cost != 0.75 ||
		string(days) != `[{"day":"2026-11-01","threads":{"completed":1,"failed":1}},{"day":"2026-11-02","threads":{"completed":2,"running":1}}]` {
		t.Errorf("laptop: %+v, days %s", laptop, days)
	}
	if c1 := f.search("machine=ci-box").Threads; len(c1) != 1 || c1[0].Tokens != 10 || c1[0].Cost != 0.125 {
		t.Errorf("the search's thread: %+v", c1)
	}
	byWorkflow := f.stats("by=workflow&since=2026-11-02&until=2026-11-03")
	if len(byWorkflow.Groups) != 1 || byWorkflow.Groups[0].Key != "review" || byWorkflow.Groups[0].Threads != 3 {
		t.Errorf("by workflow on the second day: %+v", byWorkflow.Groups)
	}
	// Without a range: the two weeks before now (the fixture's clock).
	if d := f.stats(""); d.By != "machine" {
		t.Errorf("default grouping: %+v", d)
	}
}

// Bad parameters are refused with a message naming what is wrong.
func TestFleetStatsRefusesBadParameters(t *testing.T) {
	t.Parallel()
	f, _ := newFleetFixture(t)
	for query, want := range map[string]string{
		"by=status":                         "by",
		"since=yesterday":                   "since",
		"until=2026-13-45":                  "until",
		"since=2026-11-02&until=2026-11-01": "until",
		"since=2024-01-01&until=2026-01-01": "the range",
	} {
		resp, body := f.do("GET", "/api/gateway/stats?"+query, f.dash, nil)
		var e struct{ Error string }
		if resp.StatusCode != 400 || json.Unmarshal([]byte(body), &e) != nil || !strings.HasPrefix(e.Error, want) {
			t.Errorf("%s: %d %s, want 400 starting %q", query, resp.StatusCode, body, want)
		}
	}
}

// The same question within statsCacheFor gets the cached answer; after
// it, a fresh one.
func TestFleetStatsCached(t *testing.T) {
	t.Parallel()
	f, _ := newFleetFixture(t)
	var elapsed atomic.Int64 // ns since the start; handlers read it
	start := time.Now()
	f.gw.now = func() time.Time { return start.Add(time.Duration(elapsed.Load())) }
	base := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	laptop := newFakeConnector(fakeThread("t1", "hello", "completed", "a", "", base))
	f.connector("laptop", laptop)
	f.waitSearch("", 1)
	const query = "by=machine&since=2026-11-01&until=2026-11-03"
	if g := f.stats(query).Groups; len(g) != 1 || g[0].Threads != 1 {
		t.Fatalf("first: %+v", g)
	}
	laptop.add(fakeThread("t2", "hello", "completed", "b", "", base.Add(time.Hour)))
	f.waitSearch("", 2)
	if g := f.stats(query).Groups; g[0].Threads != 1 {
		t.Fatalf("within %s: %+v, want the cached answer", statsCacheFor, g)
	}
	if g := f.stats("by=workflow&since=2026-11-01&until=2026-11-03").Groups; len(g) != 1 || g[0].Threads != 2 {
		t.Fatalf("another question: %+v", g)
	}
	elapsed.Store(int64(statsCacheFor))
	if g := f.stats(query).Groups; g[0].Threads != 2 {
		t.Fatalf("after %s: %+v, want a fresh answer", statsCacheFor, g)
	}
}
