package server

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/uncaged/workflow/gateway/store"
)

// statsCacheFor is how long an answer of GET /api/gateway/stats is
// reused for the same question; statsCacheMax bounds how many are kept.
const (
	statsCacheFor = 15 * time.Second
	statsCacheMax = 64
)

// statsKey is a question to GET /api/gateway/stats.
type statsKey struct {
	by           store.StatsBy
	since, until time.Time
}

// statsAnswer is a cached answer and when it was made.
type statsAnswer struct {
	at     time.Time
	groups []FleetGroupStats
}

// cachedStats answers q from the cache while its answer is fresh, else
// from the store.
func (fl *fleetMemory) cachedStats(ctx context.Context, q store.StatsQuery) ([]FleetGroupStats, error) {
	key := statsKey{q.By, q.Since.UTC(), q.Until.UTC()}
	now := fl.g.now()
	fl.statsMu.Lock()
	a, ok := fl.statsCache[key]
	fl.statsMu.Unlock()
	if ok && now.Sub(a.at) < statsCacheFor {
		return a.groups, nil
	}
	groups, err := fl.st.ThreadStats(ctx, q)
	if err != nil {
		return nil, err
	}
	out := make([]FleetGroupStats, 0, len(groups))
	for _, g := range groups {
		fg := FleetGroupStats{Key: g.Key, Days: make([]FleetDay, 0, len(g.Days)), Threads: g.Threads, Ended: g.Ended,
			Completed: g.Completed, Tokens: g.Tokens, Cost: g.Cost}
		for _, d := range g.Days {
			fg.Days = append(fg.Days, FleetDay{Day: d.Day.Format("2006-01-02"), Threads: d.ByStatus})
		}
		if g.Ended > 0 {
			rate := float64(g.Completed) / float64(g.Ended)
			ms := g.MedianDuration.Milliseconds()
			fg.SuccessRate, fg.MedianDurationMs = &rate, &ms
		}
		out = append(out, fg)
	}
	fl.statsMu.Lock()
	if fl.statsCache == nil || len(fl.statsCache) >= statsCacheMax {
		fl.statsCache = map[statsKey]statsAnswer{} // stale or many: start again
	}
	fl.statsCache[key] = statsAnswer{at: now, groups: out}
	fl.statsMu.Unlock()
	return out, nil
}

// defaultStatsRange is the range GET /api/gateway/stats covers when since
// is not given: two weeks, enough to see a trend at a glance.
const defaultStatsRange = 14 * 24 * time.Hour

// FleetDay is one day of a group in GET /api/gateway/stats.
type FleetDay struct {
	// Day is the UTC day, yyyy-mm-dd.
	Day string `json:"day"`
	// Threads counts the day's threads per status (those updated that day).
	Threads map[string]int `json:"threads"`
}

// FleetGroupStats is one machine's or workflow's summary in
// GET /api/gateway/stats.
type FleetGroupStats struct {
	Key string `json:"key"`
	// Days are the days with threads, oldest first.
	Days    []FleetDay `json:"days"`
	Threads int        `json:"threads"`
	// Ended counts the threads that are over (completed, failed or
	// killed); Completed those that succeeded.
	Ended     int `json:"ended"`
	Completed int `json:"completed"`
	// SuccessRate is Completed / Ended, null when nothing ended.
	SuccessRate *float64 `json:"successRate"`
	// MedianDurationMs is the ended threads' median duration, null when
	// nothing ended.
	MedianDurationMs *int64  `json:"medianDurationMs"`
	Tokens           int64   `json:"tokens"`
	Cost             float64 `json:"cost"`
}

// stats is GET /api/gateway/stats?by=machine|workflow&since=&until=: the
// fleet at a glance, from the store. until defaults to now, since to
// two weeks before until. The same question within statsCacheFor gets
// the same answer (the dashboard asks for whole days, so its polls and
// every open dashboard share one).
func (fl *fleetMemory) stats(c echo.Context) error {
	if fl == nil {
		return errNoHistory
	}
	by := store.StatsBy(c.QueryParam("by"))
	switch by {
	case "":
		by = store.StatsByMachine
	case store.StatsByMachine, store.StatsByWorkflow:
	default:
		return echo.NewHTTPError(http.StatusBadRequest, fmt.Sprintf("by must be machine or workflow; got %q", by))
	}
	since, err := parseTimeParam(c, "since")
	if err != nil {
		return err
	}
	until, err := parseTimeParam(c, "until")
	if err != nil {
		return err
	}
	if until.IsZero() {
		until = fl.g.now()
	}
	if since.IsZero() {
		since = until.Add(-defaultStatsRange)
	}
	if !since.Before(until) {
		return echo.NewHTTPError(http.StatusBadRequest, "until must be after since")
	}
	if until.Sub(since) > store.MaxStatsRange {
		return echo.NewHTTPError(http.StatusBadRequest, fmt.Sprintf("the range from since to until must be at most %d days", int(store.MaxStatsRange/(24*time.Hour))))
	}
	out, err := fl.cachedStats(c.Request().Context(), store.StatsQuery{By: by, Since: since, Until: until})
	if err != nil {
		return fl.g.storeUnavailable("summarising the fleet's history", err)
	}
	return c.JSON(http.StatusOK, map[string]any{"by": by, "since": isoTime(since), "until": isoTime(until), "groups": out})
}
