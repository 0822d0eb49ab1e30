package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/uncaged/workflow/gateway/presence"
	"github.com/uncaged/workflow/gateway/store"
)

// The fleet's memory over HTTP:
//
//	GET /api/gateway/threads?machine=&workflow=&status=&q=&since=&until=&limit=&offset=&after=
//	    {"threads":[FleetThread],"total":N[,"totalCapped":true][,"nextCursor":"…"]}, newest first;
//	    the next page is the same query with after=<nextCursor> (keyset
//	    paging: as fast at the 100,000th thread as at the first, where
//	    offset= reads every thread it skips)
//	GET /api/gateway/machines
//	    {"machines":[{"name","online","firstSeen","lastSeen"}][,"degraded":"…"]}
//	GET /api/gateway/stats?by=machine|workflow&since=&until=
//	    {"by","since","until","groups":[FleetGroupStats]}: per machine or
//	    workflow, threads per day by status, success rate, median
//	    duration, tokens and cost (stats.go)
//
// and, for a machine that is offline but remembered, the answers of its
// proxied routes (offlineMachine): its thread list from the store, marked
// "offline":true with "lastSeen", and 503 {"reason":"offline"} for what
// needs the machine itself.

// fleetStatuses are the thread statuses a search may filter on.
var fleetStatuses = []string{"running", store.WaitingStatus, "pausing", "paused", "completed", "failed", "killed", "interrupted", "damaged"}

// FleetThread is one thread in GET /api/gateway/threads.
type FleetThread struct {
	Machine    string          `json:"machine"`
	ThreadID   string          `json:"threadId"`
	Workflow   *string         `json:"workflow"`
	Status     string          `json:"status"`
	Prompt     string          `json:"prompt"`
	StartedAt  *string         `json:"startedAt"`
	UpdatedAt  string          `json:"updatedAt"`
	DurationMs int64           `json:"durationMs"`
	Steps      int             `json:"steps"`
	ReturnCode *int            `json:"returnCode"`
	Summary    string          `json:"summary"`
	Usage      json.RawMessage `json:"usage,omitempty"`
	// Tokens and Cost (US dollars) are the thread's LLM usage; 0 when
	// its connector does not report them.
	Tokens int64   `json:"tokens"`
	Cost   float64 `json:"cost"`
	// Online says whether the machine is connected (to any replica) now.
	Online bool `json:"online"`
	// LastSeen is when the gateway last heard from the machine.
	LastSeen *string `json:"lastSeen"`
	// Waiting is what the thread asks a person while its status is
	// waiting; absent otherwise.
	Waiting *FleetWaiting `json:"waiting,omitempty"`
}

// FleetWaiting is what a waiting thread asks, in FleetThread.
type FleetWaiting struct {
	Role     string  `json:"role"`
	Question string  `json:"question"`
	Assignee string  `json:"assignee"`
	Since    string  `json:"since"`
	Deadline *string `json:"deadline"`
}

// fleetWaiting is w in the API's shape; nil for nil.
func fleetWaiting(w *store.Waiting) *FleetWaiting {
	if w == nil {
		return nil
	}
	out := &FleetWaiting{Role: w.Role, Question: w.Question, Assignee: w.Assignee, Since: isoTime(w.Since)}
	if w.Deadline != nil {
		out.Deadline = isoTimePtr(*w.Deadline)
	}
	return out
}

// FleetMachine is one machine in GET /api/gateway/machines.
type FleetMachine struct {
	Name      string  `json:"name"`
	Online    bool    `json:"online"`
	FirstSeen *string `json:"firstSeen"`
	LastSeen  *string `json:"lastSeen"`
	// Credential is as in the endpoints list: "token" for a name bound to
	// a connector token (known.go), else the live connection's.
	Credential string `json:"credential,omitempty"`
}

// isoTime formats t as the connector's API does (JavaScript's
// Date#toISOString).
func isoTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

func isoTimePtr(t time.Time) *string {
	if t.IsZero() {
		return nil
	}
	s := isoTime(t)
	return &s
}

// errNoHistory answers the fleet's routes on a gateway that keeps nothing.
var errNoHistory = echo.NewHTTPError(http.StatusNotFound, "this gateway keeps no history: start it with --data-dir or --database-url")

// online says whether name is connected to this replica or, in cluster
// mode, to another.
func (fl *fleetMemory) online(name string) bool {
	if _, online, _ := fl.g.presence.Get(name); online {
		return true
	}
	if cl := fl.g.opts.Cluster; cl != nil {
		if route, known := cl.Lookup(name); known && route.Online {
			return true
		}
	}
	return false
}

// onlineOnce is online asked once per machine: a page of threads names
// the same machines again and again.
func (fl *fleetMemory) onlineOnce() func(name string) bool {
	seen := map[string]bool{}
	return func(name string) bool {
		on, ok := seen[name]
		if !ok {
			on = fl.online(name)
			seen[name] = on
		}
		return on
	}
}

// parseTimeParam reads since/until: RFC 3339 (with or without fractions),
// a date (UTC midnight), or milliseconds since the epoch.
func parseTimeParam(c echo.Context, name string) (time.Time, error) {
	v := strings.TrimSpace(c.QueryParam(name))
	if v == "" {
		return time.Time{}, nil
	}
	if ms, err := strconv.ParseInt(v, 10, 64); err == nil && ms >= 0 {
		return time.UnixMilli(ms).UTC(), nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02"} {
		if t, err := time.Parse(layout, v); err == nil {
			return t, nil
		}
	}
	return time.Time{}, echo.NewHTTPError(http.StatusBadRequest,
		fmt.Sprintf("%s must be a time: RFC 3339 (2006-01-02T15:04:05Z), a date (2006-01-02) or milliseconds since the epoch; got %q", name, v))
}

// parseIntParam reads a non-negative integer parameter, at most max.
func parseIntParam(c echo.Context, name string, maxValue int) (int, error) {
	v := strings.TrimSpace(c.QueryParam(name))
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || n > maxValue {
		return 0, echo.NewHTTPError(http.StatusBadRequest, fmt.Sprintf("%s must be an integer from 0 to %d; got %q", name, maxValue, v))
	}
	return n, nil
}

// parseThreadQuery validates the search's parameters; the error names the
// parameter at fault.
func parseThreadQuery(c echo.Context) (store.ThreadQuery, error) {
	q := store.ThreadQuery{
		Machine: strings.TrimSpace(c.QueryParam("machine")), Workflow: strings.TrimSpace(c.QueryParam("workflow")),
		Status: strings.TrimSpace(c.QueryParam("status")), Q: c.QueryParam("q"),
	}
	if q.Status != "" && !slices.Contains(fleetStatuses, q.Status) {
		return q, echo.NewHTTPError(http.StatusBadRequest, fmt.Sprintf("status must be one of %s; got %q", strings.Join(fleetStatuses, ", "), q.Status))
	}
	if len(q.Q) > 1000 {
		return q, echo.NewHTTPError(http.StatusBadRequest, "q must be at most 1000 bytes")
	}
	var err error
	if q.Since, err = parseTimeParam(c, "since"); err != nil {
		return q, err
	}
	if q.Until, err = parseTimeParam(c, "until"); err != nil {
		return q, err
	}
	if !q.Since.IsZero() && !q.Until.IsZero() && !q.Since.Before(q.Until) {
		return q, echo.NewHTTPError(http.StatusBadRequest, "until must be after since")
	}
	if q.Limit, err = parseIntParam(c, "limit", store.MaxLimit); err != nil {
		return q, err
	}
	if q.Offset, err = parseIntParam(c, "offset", 1<<30); err != nil {
		return q, err
	}
	if v := c.QueryParam("after"); v != "" {
		cursor, err := store.ParseThreadCursor(v)
		if err != nil {
			return q, echo.NewHTTPError(http.StatusBadRequest, "after must be a nextCursor of an earlier page: "+err.Error())
		}
		q.After = &cursor
	}
	return q, nil
}

// lastSeen maps every remembered machine to when it was last heard from.
func (fl *fleetMemory) lastSeen(ctx context.Context) (map[string]store.Machine, error) {
	ms, err := fl.st.ListMachines(ctx)
	if err != nil {
		return nil, err
	}
	fl.listed(ms)
	out := make(map[string]store.Machine, len(ms))
	for _, m := range ms {
		out[m.Name] = m
	}
	return out, nil
}

// seenCacheFor is how long searches reuse the machines' last-seen times.
const seenCacheFor = time.Second

// cachedLastSeen is lastSeen, reused for seenCacheFor unless it lacks one
// of the names asked for: a machine whose first threads were stored after
// the cache was read (the endpoints list reads it too) must not be shown
// as never seen.
func (fl *fleetMemory) cachedLastSeen(ctx context.Context, names ...string) (map[string]store.Machine, error) {
	fl.seenMu.Lock()
	defer fl.seenMu.Unlock()
	if fl.seen != nil && time.Since(fl.seenAt) < seenCacheFor && hasAll(fl.seen, names) {
		return fl.seen, nil
	}
	m, err := fl.lastSeen(ctx)
	if err != nil {
		return nil, err
	}
	fl.seen, fl.seenAt = m, time.Now()
	return m, nil
}

// hasAll says whether every name is in machines.
func hasAll(machines map[string]store.Machine, names []string) bool {
	for _, n := range names {
		if _, ok := machines[n]; !ok {
			return false
		}
	}
	return true
}

// searchThreads is GET /api/gateway/threads.
func (fl *fleetMemory) searchThreads(c echo.Context) error {
	if fl == nil {
		return errNoHistory
	}
	q, err := parseThreadQuery(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	page, err := fl.st.SearchThreads(ctx, q)
	if err != nil {
		return fl.g.storeUnavailable("searching the fleet's history", err)
	}
	machines := map[string]store.Machine{}
	if len(page.Threads) > 0 {
		names := make([]string, 0, len(page.Threads))
		for _, t := range page.Threads {
			names = append(names, t.Machine)
		}
		if machines, err = fl.cachedLastSeen(ctx, names...); err != nil {
			return fl.g.storeUnavailable("reading the fleet's machines", err)
		}
	}
	out := struct {
		Threads     []FleetThread `json:"threads"`
		Total       int           `json:"total"`
		TotalCapped bool          `json:"totalCapped,omitempty"`
		NextCursor  string        `json:"nextCursor,omitempty"`
	}{Threads: make([]FleetThread, 0, len(page.Threads)), Total: page.Total, TotalCapped: page.TotalCapped}
	if page.Next != nil {
		out.NextCursor = page.Next.String()
	}
	online := fl.onlineOnce()
	for _, t := range page.Threads {
		out.Threads = append(out.Threads, fleetThread(t, online(t.Machine), machines[t.Machine].LastSeen))
	}
	return c.JSON(http.StatusOK, out)
}

func fleetThread(t store.Thread, online bool, lastSeen time.Time) FleetThread {
	out := FleetThread{
		Machine: t.Machine, ThreadID: t.ID, Status: t.Status, Prompt: t.Prompt,
		UpdatedAt: isoTime(t.UpdatedAt), DurationMs: t.Duration.Milliseconds(), Steps: t.Steps,
		ReturnCode: t.ReturnCode, Summary: t.Summary, Usage: json.RawMessage(t.Usage),
		Tokens: t.Tokens, Cost: t.Cost, Online: online, LastSeen: isoTimePtr(lastSeen), Waiting: fleetWaiting(t.Waiting),
	}
	if t.Workflow != "" {
		out.Workflow = &t.Workflow
	}
	if t.StartedAt != nil {
		out.StartedAt = isoTimePtr(*t.StartedAt)
	}
	return out
}

// degradedMachines is the "degraded" of GET /api/gateway/machines while
// the store does not answer.
const degradedMachines = "the gateway's store does not answer: listing the machines online now, and the others as the gateway last read them"

// machines is GET /api/gateway/machines: every machine remembered, and
// every one online now (on any replica), by name. While the store does
// not answer it does not fail: the machines online now are known from
// presence, the others as the store last listed them, and the answer
// says so ("degraded").
func (fl *fleetMemory) machines(c echo.Context) error {
	if fl == nil {
		return errNoHistory
	}
	stored, err := fl.st.ListMachines(c.Request().Context())
	degraded := ""
	switch {
	case errors.Is(err, context.Canceled):
		return err // nobody to answer
	case err != nil:
		fl.g.storeFailed("listing the fleet's machines", err)
		stored, degraded = fl.lastListed(), degradedMachines
	default:
		fl.listed(stored)
	}
	byName := map[string]*FleetMachine{}
	for _, m := range stored {
		byName[m.Name] = &FleetMachine{Name: m.Name, FirstSeen: isoTimePtr(m.FirstSeen), LastSeen: isoTimePtr(m.LastSeen)}
	}
	eps := fl.g.presence.List()
	if cl := fl.g.opts.Cluster; cl != nil {
		eps = eps[:0:0]
		for _, e := range cl.Endpoints(fl.g.presence.List()) {
			eps = append(eps, e.Endpoint)
		}
	}
	now := isoTime(fl.g.now())
	for _, ep := range eps {
		if ep.Status != presence.Online {
			continue
		}
		m := byName[ep.Name]
		if m == nil {
			m = &FleetMachine{Name: ep.Name, FirstSeen: isoTimePtr(time.UnixMilli(ep.ConnectedAt))}
			byName[ep.Name] = m
		}
		m.Online, m.LastSeen, m.Credential = true, &now, ep.Credential
	}
	fl.g.withBindings(byName)
	out := make([]FleetMachine, 0, len(byName))
	for _, m := range byName {
		out = append(out, *m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	body := map[string]any{"machines": out}
	if degraded != "" {
		body["degraded"] = degraded
	}
	return c.JSON(http.StatusOK, body)
}

// listed keeps the machines the store listed last, for an outage.
func (fl *fleetMemory) listed(ms []store.Machine) {
	fl.lastMu.Lock()
	defer fl.lastMu.Unlock()
	fl.lastMachines = ms
}

// lastListed is what the store listed last (nil when it never did).
func (fl *fleetMemory) lastListed() []store.Machine {
	fl.lastMu.Lock()
	defer fl.lastMu.Unlock()
	return fl.lastMachines
}

// offlineMachine is the proxied routes' innermost middleware. When the
// proxy refused a request because its machine is not connected (an error
// it answers before reaching any connector) and the store remembers the
// machine, the answer comes from the store: the thread list with
// "offline":true and "lastSeen", and for anything else, actions above
// all, 503 saying the machine is offline since when. A machine nobody
// remembers keeps the proxy's answer. A request that reached a connector
// never gets here with an error, so the proxied path costs nothing.
func (fl *fleetMemory) offlineMachine(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		err := next(c)
		var he *echo.HTTPError
		if fl == nil || err == nil || c.Response().Committed || !errors.As(err, &he) ||
			(he.Code != http.StatusNotFound && he.Code != http.StatusServiceUnavailable) {
			return err
		}
		name := c.Param("name")
		if fl.online(name) { // busy, or it came back meanwhile
			return err
		}
		ctx := c.Request().Context()
		machines, lerr := fl.lastSeen(ctx)
		if lerr != nil {
			// Whether the store remembers the machine, and what, cannot be
			// told now.
			return fl.g.storeUnavailable("reading what the gateway remembers of machine "+name, lerr)
		}
		m, ok := machines[name]
		if !ok {
			return err
		}
		r := c.Request()
		if (r.Method == http.MethodGet || r.Method == http.MethodHead) && strings.Trim(c.Param("*"), "/") == "threads" {
			c.Response().Header().Del("Retry-After") // an answer, from memory
			return fl.offlineThreads(c, m)
		}
		// Retry-After stays: the machine may be on its way back.
		c.Response().Header().Set("Retry-After", offlineRetryAfter)
		msg := fmt.Sprintf("machine %s is offline (last seen %s)", name, m.LastSeen.UTC().Format(time.RFC3339))
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			msg += ": actions need it online"
		}
		return c.JSON(http.StatusServiceUnavailable, map[string]string{"error": msg, "reason": "offline"})
	}
}

// offlineThreads answers GET /api/clients/:name/threads for a machine that
// is offline, from the store, in the connector's list shape.
func (fl *fleetMemory) offlineThreads(c echo.Context, m store.Machine) error {
	status := strings.TrimSpace(c.QueryParam("status"))
	if status != "" && !slices.Contains(fleetStatuses, status) {
		return echo.NewHTTPError(http.StatusBadRequest, fmt.Sprintf("status must be one of %s while the machine is offline; got %q", strings.Join(fleetStatuses, ", "), status))
	}
	limit, err := parseIntParam(c, "limit", 1<<30)
	if err != nil {
		return err
	}
	offset, err := parseIntParam(c, "offset", 1<<30)
	if err != nil {
		return err
	}
	if limit == 0 || limit > store.MaxLimit { // the connector's 0 is "all"; the store pages
		limit = store.MaxLimit
	}
	page, err := fl.st.SearchThreads(c.Request().Context(), store.ThreadQuery{
		Machine: m.Name, Workflow: c.QueryParam("workflow"), Status: status, Limit: limit, Offset: offset,
	})
	if err != nil {
		return fl.g.storeUnavailable("reading the machine's remembered threads", err)
	}
	type summary struct {
		ThreadID   string  `json:"threadId"`
		Workflow   *string `json:"workflow"`
		Hash       string  `json:"hash"`
		StartedAt  *string `json:"startedAt"`
		UpdatedAt  string  `json:"updatedAt"`
		Status     string  `json:"status"`
		Source     string  `json:"source"`
		Prompt     string  `json:"prompt"`
		DurationMs int64   `json:"durationMs"`
		Steps      int     `json:"steps"`
		ReturnCode *int    `json:"returnCode"`
		Summary    string  `json:"summary"`
	}
	out := struct {
		Threads  []summary `json:"threads"`
		Total    int       `json:"total"`
		Offline  bool      `json:"offline"`
		LastSeen string    `json:"lastSeen"`
	}{Threads: make([]summary, 0, len(page.Threads)), Total: page.Total, Offline: true, LastSeen: isoTime(m.LastSeen)}
	for _, t := range page.Threads {
		ft := fleetThread(t, false, m.LastSeen)
		source := "history"
		if t.Status == "running" || t.Status == store.WaitingStatus || t.Status == "pausing" || t.Status == "paused" || t.Status == "interrupted" {
			source = "active"
		}
		out.Threads = append(out.Threads, summary{
			ThreadID: t.ID, Workflow: ft.Workflow, StartedAt: ft.StartedAt, UpdatedAt: ft.UpdatedAt,
			Status: t.Status, Source: source, Prompt: t.Prompt, DurationMs: ft.DurationMs, Steps: t.Steps,
			ReturnCode: t.ReturnCode, Summary: t.Summary,
		})
	}
	return c.JSON(http.StatusOK, out)
}
