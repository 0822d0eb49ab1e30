package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/uncaged/workflow/gateway/store"
	"github.com/uncaged/workflow/shared/fleet"
	"github.com/uncaged/workflow/shared/testkit"
)

// fakeConnector serves GET /api/events as shared/fleet says, from a list
// of threads (the i-th change is threads[i-1]), and any other path as
// echoAPI does. It records the Last-Event-ID of every stream request.
type fakeConnector struct {
	mu       sync.Mutex
	instance string
	threads  []fleet.Thread
	lastIDs  []string
	changed  chan struct{} // closed at every change
	cut      chan struct{} // closed to end the streams open now
}

// newFakeConnector has threads as its first changes.
func newFakeConnector(threads ...fleet.Thread) *fakeConnector {
	return &fakeConnector{instance: fleet.NewInstance(), threads: threads, changed: make(chan struct{}), cut: make(chan struct{})}
}

// add appends changes and wakes the streams.
func (fc *fakeConnector) add(threads ...fleet.Thread) {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	fc.threads = append(fc.threads, threads...)
	close(fc.changed)
	fc.changed = make(chan struct{})
}

// breakStreams ends the streams open now, as a network hiccup would.
func (fc *fakeConnector) breakStreams() {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	close(fc.cut)
	fc.cut = make(chan struct{})
}

// restart makes it a new process: a new instance.
func (fc *fakeConnector) restart() {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	fc.instance = fleet.NewInstance()
}

func (fc *fakeConnector) requests() []string {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	return append([]string(nil), fc.lastIDs...)
}

// ServeHTTP ignores write errors: a stream whose reader left ends at its
// next wait, and the reader retries.
func (fc *fakeConnector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != fleet.EventsPath {
		echoAPI("fake").ServeHTTP(w, r)
		return
	}
	last := r.Header.Get("Last-Event-ID")
	fc.mu.Lock()
	fc.lastIDs = append(fc.lastIDs, last)
	inst, cut := fc.instance, fc.cut
	fc.mu.Unlock()
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	if hs, ok := ctx.Value(http.ServerContextKey).(*http.Server); ok {
		hs.RegisterOnShutdown(cancel) // as the real one: a stopping connector does not wait for it
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	var next uint64 // changes sent
	if i, seq, err := fleet.ParseEventID(last); err == nil && i == inst {
		next = seq
	} else {
		_, _ = w.Write(fleet.AppendEvent(nil, fleet.Event{ID: fleet.FormatEventID(inst, 0), Name: fleet.EventReset, Data: []byte(`{}`)}))
	}
	synced := false
	for {
		fc.mu.Lock()
		threads, changed := fc.threads, fc.changed
		fc.mu.Unlock()
		for ; next < uint64(len(threads)); next++ {
			data, _ := json.Marshal(threads[next])
			_, _ = w.Write(fleet.AppendEvent(nil, fleet.Event{ID: fleet.FormatEventID(inst, next+1), Name: fleet.EventThread, Data: data}))
		}
		if !synced {
			synced = true
			_, _ = w.Write(fleet.AppendEvent(nil, fleet.Event{ID: fleet.FormatEventID(inst, next), Name: fleet.EventSynced, Data: []byte(`{}`)}))
		}
		w.(http.Flusher).Flush()
		select {
		case <-changed:
		case <-cut:
			return
		case <-ctx.Done():
			return
		}
	}
}

// fleetThread is a finished thread of the fake connector.
func fakeThread(id, workflow, status, prompt, summary string, updated time.Time) fleet.Thread {
	rc := 0
	if status != "completed" {
		rc = 1
	}
	return fleet.Thread{
		ID: id, Workflow: workflow, Status: status, Prompt: prompt, Summary: summary,
		StartedAt: updated.Add(-time.Minute), UpdatedAt: updated, DurationMs: 60000, Steps: 3, ReturnCode: &rc,
	}
}

// newFleetFixture is a gateway keeping its fleet's memory in a SQLite
// store of its own.
func newFleetFixture(t *testing.T) (*fixture, store.Store) {
	t.Helper()
	st, err := store.Open(context.Background(), store.Config{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() }) // after the gateway's own cleanup
	return newFixture(t, time.Hour, func(o *Options) { o.Store = st }), st
}

// fleetReaderDone is closed when the fleet's reader of name has ended
// and written the machine's last seen.
func (f *fixture) fleetReaderDone(name string) <-chan struct{} {
	f.t.Helper()
	fl := f.gw.fleet
	var done chan struct{}
	testkit.WaitUntil(f.t, "the fleet to read "+name, func() bool {
		fl.mu.Lock()
		defer fl.mu.Unlock()
		if r := fl.readers[name]; r != nil {
			done = r.done
		}
		return done != nil
	})
	return done
}

// searchResult is GET /api/gateway/threads.
type searchResult struct {
	Threads    []FleetThread `json:"threads"`
	Total      int           `json:"total"`
	NextCursor string        `json:"nextCursor"`
}

func (f *fixture) search(query string) searchResult {
	f.t.Helper()
	resp, body := f.do("GET", "/api/gateway/threads?"+query, f.dash, nil)
	var out searchResult
	if resp.StatusCode != 200 || json.Unmarshal([]byte(body), &out) != nil {
		f.t.Fatalf("search %s: %d %s", query, resp.StatusCode, body)
	}
	return out
}

func (f *fixture) waitSearch(query string, total int) searchResult {
	f.t.Helper()
	var out searchResult
	testkit.WaitUntil(f.t, fmt.Sprintf("search %q to find %d", query, total), func() bool {
		out = f.search(query)
		return out.Total == total
	})
	return out
}

func ids(ts []FleetThread) string {
	var out []string
	for _, t := range ts {
		out = append(out, t.Machine+"/"+t.ThreadID)
	}
	return strings.Join(out, ",")
}

// The gateway reads a connector's change stream into the store, and the
// search finds its threads by words, workflow, status, machine and time.
func TestFleetRemembersAndSearches(t *testing.T) {
	t.Parallel()
	f, _ := newFleetFixture(t)
	base := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	laptop := newFakeConnector(
		fakeThread("t1", "hello", "completed", "greet the world", "said hello", base),
		fakeThread("t2", "hello", "failed", "greet the moon", "the moon did not answer", base.Add(time.Hour)),
		fakeThread("t3", "review", "completed", "review the pull request", "approved", base.Add(2*time.Hour)),
	)
	ci := newFakeConnector(fakeThread("c1", "hello", "completed", "greet the builders", "said hello", base.Add(3*time.Hour)))
	f.connector("laptop", laptop)
	f.connector("ci-box", ci)

	all := f.waitSearch("", 4)
	if got := ids(all.Threads); got != "ci-box/c1,laptop/t3,laptop/t2,laptop/t1" {
		t.Fatalf("newest first: %s", got)
	}
	t2 := all.Threads[2]
	if t2.Workflow == nil || *t2.Workflow != "hello" || t2.Status != "failed" || t2.Prompt != "greet the moon" ||
		t2.Summary != "the moon did not answer" || t2.Steps != 3 || t2.DurationMs != 60000 || t2.ReturnCode == nil || *t2.ReturnCode != 1 ||
		t2.StartedAt == nil || *t2.StartedAt != "2026-11-01T12:59:00.000Z" || t2.UpdatedAt != "2026-11-01T13:00:00.000Z" ||
		!t2.Online || t2.LastSeen == nil {
		t.Fatalf("thread: %+v", t2)
	}
	for query, want := range map[string]string{
		"q=greet":                         "ci-box/c1,laptop/t2,laptop/t1",
		"q=moon":                          "laptop/t2",
		"q=hello":                         "ci-box/c1,laptop/t1", // the summary
		"q=greet+world":                   "laptop/t1",
		"workflow=review":                 "laptop/t3",
		"machine=laptop&status=completed": "laptop/t3,laptop/t1",
		"status=failed":                   "laptop/t2",
		"since=2026-11-01T13:00:00Z":      "ci-box/c1,laptop/t3,laptop/t2",
		"until=2026-11-01T13:00:00Z":      "laptop/t1",
		fmt.Sprintf("since=%d&until=%d", base.Add(time.Hour).UnixMilli(), base.Add(3*time.Hour).UnixMilli()): "laptop/t3,laptop/t2",
		"limit=2&offset=1":    "laptop/t3,laptop/t2",
		"q=nothing-like-this": "",
	} {
		if got := ids(f.search(query).Threads); got != want {
			t.Errorf("%s: %s, want %s", query, got, want)
		}
	}
}

// Bad parameters are refused with a message naming the parameter, and
// only a dashboard credential may search.
func TestFleetSearchRefusesBadParameters(t *testing.T) {
	t.Parallel()
	f, _ := newFleetFixture(t)
	for query, param := range map[string]string{
		"since=yesterday":                   "since",
		"until=2026-13-45":                  "until",
		"limit=-1":                          "limit",
		"limit=5000":                        "limit",
		"limit=ten":                         "limit",
		"offset=-3":                         "offset",
		"status=sleeping":                   "status",
		"since=2026-11-02&until=2026-11-01": "until",
		"after=not-a-cursor":                "after",
		"after=eyJ0IjoxfQ":                  "after", // {"t":1}: no thread
	} {
		resp, body := f.do("GET", "/api/gateway/threads?"+query, f.dash, nil)
		var e struct{ Error string }
		if resp.StatusCode != 400 || json.Unmarshal([]byte(body), &e) != nil || !strings.HasPrefix(e.Error, param) {
			t.Errorf("%s: %d %s, want 400 naming %s", query, resp.StatusCode, body, param)
		}
	}
	for _, path := range []string{"/api/gateway/threads", "/api/gateway/machines", "/api/gateway/stats"} {
		if resp, body := f.do("GET", path, "", nil); resp.StatusCode != 401 {
			t.Errorf("%s without credentials: %d %s", path, resp.StatusCode, body)
		}
	}
}

// A machine that went offline keeps its threads: listed (marked offline,
// with its last-seen time) and searchable; actions on it are refused with
// a reason. A machine the gateway never saw gets today's answer.
func TestFleetOfflineMachine(t *testing.T) {
	t.Parallel()
	f, _ := newFleetFixture(t)
	base := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	fc := newFakeConnector(
		fakeThread("t1", "hello", "completed", "greet the world", "said hello", base),
		fakeThread("t2", "hello", "failed", "greet the moon", "no answer", base.Add(time.Hour)),
	)
	disconnect := f.connector("laptop", fc)
	f.waitSearch("machine=laptop", 2)
	// Online: the list is the connector's own.
	if _, body := f.do("GET", "/api/clients/laptop/threads", f.dash, nil); !strings.Contains(body, `"machine":"fake"`) {
		t.Fatalf("online list: %s", body)
	}
	lastTouch := f.fleetReaderDone("laptop")
	disconnect()
	f.waitStatus("laptop", "offline")
	// The machine's last seen is written as its reader ends, a moment
	// after it goes offline; the answers below must agree on it.
	testkit.WaitUntil(t, "laptop's last touch", func() bool {
		select {
		case <-lastTouch:
			return true
		default:
			return false
		}
	})

	var machines struct {
		Machines []FleetMachine `json:"machines"`
	}
	var list struct {
		Threads []struct {
			ThreadID, Status, Source, UpdatedAt string
			Workflow                            *string
		} `json:"threads"`
		Total    int    `json:"total"`
		Offline  bool   `json:"offline"`
		LastSeen string `json:"lastSeen"`
	}
	var resp *http.Response
	var body string
	// The last touch goes to the store through its queue: the two answers
	// agree once it is written.
	testkit.WaitFor(t, "the machines and the offline list to agree on laptop's last seen", func() error {
		resp, body = f.do("GET", "/api/gateway/machines", f.dash, nil)
		if resp.StatusCode != 200 || json.Unmarshal([]byte(body), &machines) != nil || len(machines.Machines) != 1 ||
			machines.Machines[0].Name != "laptop" || machines.Machines[0].Online || machines.Machines[0].LastSeen == nil || machines.Machines[0].FirstSeen == nil {
			t.Fatalf("machines: %d %s", resp.StatusCode, body)
		}
		resp, body = f.do("GET", "/api/clients/laptop/threads?status=failed&limit=10", f.dash, nil)
		if resp.StatusCode != 200 || json.Unmarshal([]byte(body), &list) != nil {
			t.Fatalf("offline list: %d %s", resp.StatusCode, body)
		}
		if list.LastSeen != *machines.Machines[0].LastSeen {
			return fmt.Errorf("machines say %s, the list %s", *machines.Machines[0].LastSeen, list.LastSeen)
		}
		return nil
	})
	if !list.Offline ||
		list.Total != 1 || list.Threads[0].ThreadID != "t2" || list.Threads[0].Source != "history" || *list.Threads[0].Workflow != "hello" {
		t.Fatalf("offline list: %d %s", resp.StatusCode, body)
	}
	if found := f.search("q=moon"); ids(found.Threads) != "laptop/t2" || found.Threads[0].Online {
		t.Fatalf("search while offline: %+v", found)
	}
	for _, req := range [][2]string{{"POST", "/api/clients/laptop/threads/t2/kill"}, {"POST", "/api/clients/laptop/threads"}, {"DELETE", "/api/clients/laptop/cas/x"}} {
		resp, body := f.do(req[0], req[1], f.dash, strings.NewReader(`{}`))
		var e struct{ Error, Reason string }
		if resp.StatusCode != 503 || json.Unmarshal([]byte(body), &e) != nil || e.Reason != "offline" ||
			!strings.HasPrefix(e.Error, "machine laptop is offline (last seen 20") || !strings.HasSuffix(e.Error, "): actions need it online") {
			t.Errorf("%s %s: %d %s", req[0], req[1], resp.StatusCode, body)
		}
	}
	if resp, body := f.do("GET", "/api/clients/laptop/threads?status=asleep", f.dash, nil); resp.StatusCode != 400 || !strings.Contains(body, "status") {
		t.Errorf("bad status while offline: %d %s", resp.StatusCode, body)
	}
	// Never seen: 404 as before.
	if resp, body := f.do("GET", "/api/clients/nobody/threads", f.dash, nil); resp.StatusCode != 404 || !strings.Contains(body, "connector not found: nobody") {
		t.Errorf("unknown machine: %d %s", resp.StatusCode, body)
	}
}

// After a break the gateway comes back with the last id it stored and gets
// only what changed; a connector that restarted (another instance) sends a
// reset and everything, and nothing is duplicated.
func TestFleetResumesAfterBreak(t *testing.T) {
	t.Parallel()
	f, _ := newFleetFixture(t)
	base := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	fc := newFakeConnector(fakeThread("t1", "hello", "completed", "one", "", base))
	disconnect := f.connector("laptop", fc)
	f.waitSearch("", 1)
	fc.add(fakeThread("t2", "hello", "running", "two", "", base.Add(time.Minute)))
	f.waitSearch("", 2)
	inst := fc.instance

	fc.breakStreams()
	fc.add(fakeThread("t2", "hello", "completed", "two", "done", base.Add(2*time.Minute)))
	f.waitSearch("status=completed", 2)
	reqs := fc.requests()
	if len(reqs) != 2 || reqs[0] != "" || reqs[1] != inst+"-2" {
		t.Fatalf("Last-Event-IDs: %q, want none then %s-2", reqs, inst)
	}

	// The tunnel breaks and comes back: the new connection resumes too.
	disconnect()
	f.waitStatus("laptop", "offline")
	fc.add(fakeThread("t1", "hello", "completed", "one", "renamed", base.Add(150*time.Second)))
	f.connector("laptop", fc)
	f.waitSearch("q=renamed", 1)
	if reqs := fc.requests(); len(reqs) != 3 || reqs[2] != inst+"-3" {
		t.Fatalf("Last-Event-IDs after a reconnect: %q, want %s-3 last", reqs, inst)
	}

	fc.restart()
	fc.breakStreams()
	fc.add(fakeThread("t3", "hello", "completed", "three", "", base.Add(3*time.Minute)))
	f.waitSearch("", 3)
	if reqs := fc.requests(); len(reqs) != 4 || reqs[3] != inst+"-4" {
		t.Fatalf("Last-Event-IDs after the connector restarted: %q", reqs)
	}
	if got := ids(f.search("").Threads); got != "laptop/t3,laptop/t1,laptop/t2" {
		t.Fatalf("after the resync: %s", got)
	}
}

// A gateway without a store says it keeps no history.
func TestFleetWithoutStore(t *testing.T) {
	t.Parallel()
	f := newFixture(t, time.Hour)
	for _, path := range []string{"/api/gateway/threads", "/api/gateway/machines", "/api/gateway/stats"} {
		if resp, body := f.do("GET", path, f.dash, nil); resp.StatusCode != 404 || !strings.Contains(body, "keeps no history") {
			t.Errorf("%s: %d %s", path, resp.StatusCode, body)
		}
	}
	f.connector("laptop", newFakeConnector())
	if resp, body := f.do("POST", "/api/clients/laptop/threads/x/kill", f.dash, nil); resp.StatusCode != 200 {
		t.Errorf("proxied: %d %s", resp.StatusCode, body)
	}
}

// Keyset paging: each page's nextCursor, passed as after, gives the next
// page of the same search; the last page has none. Threads of the same
// instant are ordered by machine and id across page boundaries.
func TestFleetKeysetPaging(t *testing.T) {
	t.Parallel()
	f, _ := newFleetFixture(t)
	base := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	var threads []fleet.Thread
	for i := range 7 {
		threads = append(threads, fakeThread(fmt.Sprintf("t%d", i), "hello", "completed", "greet them", "ok", base.Add(time.Duration(i/2)*time.Hour)))
	}
	f.connector("laptop", newFakeConnector(threads...))
	all := f.waitSearch("", 7)
	for _, query := range []string{"limit=2", "limit=3&q=greet", "limit=1&workflow=hello"} {
		var got []FleetThread
		page := f.search(query)
		for pages := 1; ; pages++ {
			got = append(got, page.Threads...)
			if page.NextCursor == "" {
				break
			}
			if pages > 7 {
				t.Fatalf("%s: paging does not end", query)
			}
			page = f.search(query + "&after=" + url.QueryEscape(page.NextCursor))
			if page.Total != 7 {
				t.Fatalf("%s: a later page counts %d", query, page.Total)
			}
		}
		if ids(got) != ids(all.Threads) {
			t.Errorf("%s, page by page: %s, want %s", query, ids(got), ids(all.Threads))
		}
	}
}

// A machine whose first threads are stored after the machines were read
// (the endpoints list reads them too, for the names it remembers) is not
// shown as never seen: a search re-reads the machines it lacks instead of
// serving the last second's answer.
func TestASearchNeverShowsAMachineItJustStoredAsNeverSeen(t *testing.T) {
	t.Parallel()
	f, _ := newFleetFixture(t)
	// The cache of the machines' last-seen times, read before any machine.
	if resp, body := f.do("GET", "/api/gateway/endpoints", f.dash, nil); resp.StatusCode != 200 {
		t.Fatalf("endpoints: %d %s", resp.StatusCode, body)
	}
	f.connector("laptop", newFakeConnector(fakeThread("t1", "hello", "completed", "greet", "said hello", time.Now())))
	found := f.waitSearch("", 1)
	if th := found.Threads[0]; th.LastSeen == nil {
		t.Fatalf("the machine of a thread just stored is shown as never seen: %+v", th)
	}
}
