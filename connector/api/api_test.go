package api

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/uncaged/workflow/engine/cas"
	"github.com/uncaged/workflow/engine/ids"
	"github.com/uncaged/workflow/engine/node"
	"github.com/uncaged/workflow/engine/storage"
	"github.com/uncaged/workflow/engine/threads"
	"github.com/uncaged/workflow/shared/testkit"
)

// The original's connect.test.ts, ported (docs/compatibility.md), on a storage
// root that does not exist.
func TestOriginalServeSuite(t *testing.T) {
	t.Parallel()
	root := filepath.Join(t.TempDir(), "missing")
	devServer := "http://localhost:5173"
	f := newFixture(t, func(o *Options) {
		o.Layout = storage.Layout{Root: root}
		o.AllowOrigins, _ = ParseOrigins([]string{devServer}) // as --allow-origin would
	})
	f.e.GET("/boom", func(echo.Context) error { panic("kaboom") })

	t.Run("healthz", func(t *testing.T) {
		for _, p := range []string{"/healthz", "/api/healthz"} {
			var body map[string]bool
			f.want(http.MethodGet, p, "", http.StatusOK, &body)
			if !body["ok"] {
				t.Errorf("%s: %v", p, body)
			}
		}
	})
	t.Run("empty lists for missing storage", func(t *testing.T) {
		var wf struct{ Workflows []WorkflowSummary }
		f.want(http.MethodGet, "/api/workflows", "", http.StatusOK, &wf)
		var th ThreadList
		f.want(http.MethodGet, "/api/threads", "", http.StatusOK, &th)
		var run struct{ Threads []RunningSummary }
		f.want(http.MethodGet, "/api/threads/running", "", http.StatusOK, &run)
		var cas CASList
		f.want(http.MethodGet, "/api/cas", "", http.StatusOK, &cas)
		if wf.Workflows == nil || len(wf.Workflows) != 0 || th.Threads == nil || len(th.Threads) != 0 || th.Total != 0 ||
			run.Threads == nil || len(run.Threads) != 0 || cas.Hashes == nil || len(cas.Hashes) != 0 {
			t.Errorf("want empty (non-null) lists: %+v %+v %+v %+v", wf, th, run, cas)
		}
		for _, p := range []string{"/api/workflows", "/api/threads", "/api/threads/running", "/api/cas"} {
			if body := f.call(http.MethodGet, p, "").Body.String(); strings.Contains(body, "null") {
				t.Errorf("%s: %s", p, body)
			}
		}
	})
	t.Run("404s", func(t *testing.T) {
		f.wantError(http.MethodGet, "/api/threads/nonexistent-id", "", http.StatusNotFound, "thread not found: nonexistent-id")
		f.wantError(http.MethodGet, "/api/cas/SSVQ0RZ55P9Y4", "", http.StatusNotFound, "not found")
		f.wantError(http.MethodGet, "/api/workflows/solve-issue", "", http.StatusNotFound, "workflow not found: solve-issue")
		f.wantError(http.MethodGet, "/api/workflows/solve-issue/history", "", http.StatusNotFound, "workflow not found: solve-issue")
		f.wantError(http.MethodGet, "/api/nothing-here", "", http.StatusNotFound, "not found")
		f.wantError(http.MethodPut, "/api/threads", "", http.StatusMethodNotAllowed, "method not allowed")
	})
	t.Run("error handling", func(t *testing.T) {
		f.wantError(http.MethodPost, "/api/threads", "{not json", http.StatusBadRequest, "invalid JSON body")
		f.wantError(http.MethodPost, "/api/cas", "{not json", http.StatusBadRequest, "invalid JSON body")
		f.wantError(http.MethodPost, "/api/threads", `{"foo":"bar"}`, http.StatusBadRequest, "required")
		var e errorBody
		f.want(http.MethodGet, "/boom", "", http.StatusInternalServerError, &e)
		if e.Error != "Internal server error" {
			t.Errorf("panic: %q", e.Error)
		}
	})
	t.Run("security", func(t *testing.T) {
		rec := f.call(http.MethodGet, "/api/healthz", "", "Origin", devServer)
		if got := rec.Header().Get("Access-Control-Allow-Origin"); got != devServer {
			t.Errorf("origin %s: Allow-Origin %q", devServer, got)
		}
		rec = f.call(http.MethodGet, "/api/healthz", "", "Origin", "http://evil.example")
		if got := rec.Header().Get("Access-Control-Allow-Origin"); got != "" {
			t.Errorf("foreign origin allowed: %q", got)
		}
		pre := f.call(http.MethodOptions, "/api/threads", "", "Origin", "http://localhost:5173", "Access-Control-Request-Method", "POST")
		if pre.Code != http.StatusNoContent || !strings.Contains(pre.Header().Get("Access-Control-Allow-Methods"), "POST") {
			t.Errorf("preflight: %d %v", pre.Code, pre.Header())
		}

		req := httptest.NewRequest(http.MethodPost, "/api/cas", strings.NewReader(`{"content":"x"}`))
		req.ContentLength = 1048577
		req.Header.Set("Origin", "http://localhost:5173")
		rr := httptest.NewRecorder()
		f.e.ServeHTTP(rr, req)
		if rr.Code != http.StatusRequestEntityTooLarge || strings.TrimSpace(rr.Body.String()) != `{"error":"Payload too large"}` {
			t.Errorf("413: %d %s", rr.Code, rr.Body)
		}
		if rr.Header().Get("Access-Control-Allow-Origin") == "" {
			t.Error("413 without CORS headers: the dashboard could not read it")
		}
		if rr.Header().Get(echo.HeaderXRequestID) == "" {
			t.Error("no request id")
		}
	})
	t.Run("CAS round trip", func(t *testing.T) {
		var put struct{ Hash string }
		f.want(http.MethodPost, "/api/cas", `{"content":"hello world"}`, http.StatusCreated, &put)
		want, err := node.NewContent("hello world", nil).Marshal()
		if err != nil {
			t.Fatal(err)
		}
		var got CASEntry
		f.want(http.MethodGet, "/api/cas/"+put.Hash, "", http.StatusOK, &got)
		if got.Hash != put.Hash || got.Content != string(want) {
			t.Errorf("get: %+v, want content %q", got, want)
		}
		var ok map[string]bool
		f.want(http.MethodDelete, "/api/cas/"+put.Hash, "", http.StatusOK, &ok)
		if !ok["ok"] {
			t.Error(ok)
		}
		f.wantError(http.MethodGet, "/api/cas/"+put.Hash, "", http.StatusNotFound, "not found")
		f.wantError(http.MethodDelete, "/api/cas/"+put.Hash, "", http.StatusNotFound, "not found")
	})
	// Reads never create the root; only the CAS put above did.
	if _, err := os.Stat(filepath.Join(root, "bundles")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a read created bundles/: %v", err)
	}
}

func TestBodyLimitWhileReading(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(o *Options) { o.BodyLimit = 64 })
	// A chunked body declares no length; it is stopped as it is read.
	req := httptest.NewRequest(http.MethodPost, "/api/cas", strings.NewReader(`{"content":"`+strings.Repeat("x", 100)+`"}`))
	req.ContentLength = -1
	rec := httptest.NewRecorder()
	f.e.ServeHTTP(rec, req)
	if rec.Code != http.StatusRequestEntityTooLarge || !strings.Contains(rec.Body.String(), "Payload too large") {
		t.Errorf("chunked: %d %s", rec.Code, rec.Body)
	}
	// Over real HTTP too, for every route that reads a body.
	for _, p := range []string{"/api/threads", "/api/cas", "/api/threads/01ARZ3NDEKTSV4RRFFQ69G5FAV/fork"} {
		resp, err := http.Post(f.srv.URL+p, "application/json", strings.NewReader(strings.Repeat(" ", 65)))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Errorf("%s: %d", p, resp.StatusCode)
		}
	}
	if _, err := os.Stat(f.l.CASDir()); !errors.Is(err, os.ErrNotExist) {
		t.Error("an oversized body stored something")
	}
	// Within the limit all is well.
	f.want(http.MethodPost, "/api/cas", `{"content":"hello"}`, http.StatusCreated, nil)
}

func TestCAS(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	var hashes []string
	for _, s := range []string{"a", "b", "c", "hello"} {
		var put struct{ Hash string }
		f.want(http.MethodPost, "/api/cas", `{"content":"`+s+`"}`, http.StatusCreated, &put)
		hashes = append(hashes, put.Hash)
	}
	if hashes[3] != "SSVQ0RZ55P9Y4" {
		t.Errorf("cas put hello = %s, want the original's SSVQ0RZ55P9Y4", hashes[3])
	}
	// An empty string is content too.
	f.want(http.MethodPost, "/api/cas", `{"content":""}`, http.StatusCreated, nil)

	var all CASList
	f.want(http.MethodGet, "/api/cas", "", http.StatusOK, &all)
	if all.Total != 5 || len(all.Hashes) != 5 {
		t.Fatalf("list: %+v", all)
	}
	for i := 1; i < len(all.Hashes); i++ {
		if all.Hashes[i-1] > all.Hashes[i] {
			t.Errorf("not sorted: %v", all.Hashes)
		}
	}
	var page CASList
	f.want(http.MethodGet, "/api/cas?limit=2&offset=1", "", http.StatusOK, &page)
	if page.Total != 5 || strings.Join(page.Hashes, ",") != strings.Join(all.Hashes[1:3], ",") {
		t.Errorf("page: %+v", page)
	}
	f.want(http.MethodGet, "/api/cas?offset=9", "", http.StatusOK, &page)
	if page.Total != 5 || len(page.Hashes) != 0 {
		t.Errorf("past the end: %+v", page)
	}
	// A lower-case hash names the same blob.
	var got CASEntry
	f.want(http.MethodGet, "/api/cas/ssvq0rz55p9y4", "", http.StatusOK, &got)
	if got.Hash != "SSVQ0RZ55P9Y4" {
		t.Errorf("lower-case: %+v", got)
	}
}

func TestCASGC(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.register("linear", "linear.esm.js")
	f.startHost()
	id := f.run("linear", "keep me")
	f.waitStatus(id, "completed")
	var put struct{ Hash string }
	f.want(http.MethodPost, "/api/cas", `{"content":"orphan"}`, http.StatusCreated, &put)

	// While a host runs, young unreachable blobs are spared.
	var res struct {
		ScannedThreads int      `json:"scannedThreads"`
		ActiveRefs     int      `json:"activeRefs"`
		DeletedEntries int      `json:"deletedEntries"`
		DeletedHashes  []string `json:"deletedHashes"`
	}
	f.want(http.MethodPost, "/api/cas/gc", "", http.StatusOK, &res)
	if res.DeletedEntries != 0 || res.DeletedHashes == nil || res.ScannedThreads != 2 {
		t.Errorf("gc with a host: %+v", res)
	}
	f.shutdownHost()
	f.want(http.MethodPost, "/api/cas/gc", "", http.StatusOK, &res)
	if res.DeletedEntries != 1 || len(res.DeletedHashes) != 1 || res.DeletedHashes[0] != put.Hash {
		t.Errorf("gc: %+v, want only %s deleted", res, put.Hash)
	}
	// The thread is intact.
	if d := f.detail(id); d.status() != "completed" || len(d.roles()) != 3 || d.Records[0]["prompt"] != "keep me" ||
		strings.HasPrefix(d.Records[1]["content"].(string), "(content not in CAS") {
		t.Errorf("thread after gc: %+v", d)
	}
}

func TestWorkflows(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	first := f.register("plan-code", "linear.esm.js")
	second := f.register("plan-code", "slow.esm.js") // a new version
	other := f.register("count-slowly", "slow.esm.js")

	var list struct{ Workflows []map[string]any }
	f.want(http.MethodGet, "/api/workflows", "", http.StatusOK, &list)
	if len(list.Workflows) != 2 || list.Workflows[0]["name"] != "count-slowly" || list.Workflows[1]["name"] != "plan-code" ||
		list.Workflows[1]["hash"] != second || list.Workflows[0]["hash"] != other {
		t.Fatalf("list: %+v", list)
	}
	if _, ok := list.Workflows[0]["timestamp"].(float64); !ok {
		t.Errorf("no timestamp: %+v", list.Workflows[0])
	}

	var d struct {
		Name, Hash string
		Timestamp  int64
		History    []struct {
			Hash      string
			Timestamp int64
		}
		Descriptor *struct {
			Description string
			Roles       map[string]struct{ Description string }
			Graph       struct{ Edges []map[string]any }
		}
	}
	f.want(http.MethodGet, "/api/workflows/plan-code", "", http.StatusOK, &d)
	if d.Name != "plan-code" || d.Hash != second || len(d.History) != 1 || d.History[0].Hash != first {
		t.Errorf("detail: %+v", d)
	}
	if d.Descriptor == nil || d.Descriptor.Description != "Five slow steps." || len(d.Descriptor.Roles) != 5 || len(d.Descriptor.Graph.Edges) != 6 {
		t.Errorf("descriptor: %+v", d.Descriptor)
	}

	var h WorkflowHistory
	f.want(http.MethodGet, "/api/workflows/plan-code/history", "", http.StatusOK, &h)
	if h.Name != "plan-code" || len(h.History) != 2 || h.History[0].Hash != second || !h.History[0].Current ||
		h.History[1].Hash != first || h.History[1].Current || h.History[0].Timestamp < h.History[1].Timestamp {
		t.Errorf("history: %+v", h)
	}

	// Each version by hash, the older one with its own descriptor.
	for _, tc := range []struct {
		hash    string
		current bool
	}{{second, true}, {first, false}} {
		var v WorkflowVersion
		f.want(http.MethodGet, "/api/workflows/plan-code/versions/"+tc.hash, "", http.StatusOK, &v)
		if v.Name != "plan-code" || v.Hash != tc.hash || v.Current != tc.current || v.Timestamp == 0 || v.Descriptor == nil {
			t.Errorf("version %s: %+v", tc.hash, v)
		}
	}
	unknown := ids.HashString("never registered")
	f.wantError(http.MethodGet, "/api/workflows/plan-code/versions/"+unknown, "", http.StatusNotFound, "version not found: plan-code has no version "+unknown)
	f.wantError(http.MethodGet, "/api/workflows/plan-code/versions/..%2fx", "", http.StatusBadRequest, "invalid")
	f.wantError(http.MethodGet, "/api/workflows/no-such/versions/"+first, "", http.StatusNotFound, "workflow not found: no-such")

	// A missing or invalid sidecar is a null descriptor, not an error.
	if err := os.WriteFile(f.l.DescriptorFile(other), []byte("description: 5\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	rec := f.call(http.MethodGet, "/api/workflows/count-slowly", "")
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `"descriptor":null`) {
		t.Errorf("invalid sidecar: %d %s", rec.Code, rec.Body)
	}

	f.wantError(http.MethodGet, "/api/workflows/Not%20A%20Name", "", http.StatusBadRequest, "invalid workflow name")
	f.wantError(http.MethodGet, "/api/workflows/no-such", "", http.StatusNotFound, "workflow not found: no-such")
}

func TestRunThreadAndList(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	hash := f.register("linear", "linear.esm.js")
	f.startHost()

	id := f.run("linear", "build a thing")
	d := f.waitStatus(id, "completed")
	if d.ThreadID != id {
		t.Errorf("threadId %q", d.ThreadID)
	}
	start := d.Records[0]
	if start["type"] != RecordThreadStart || start["workflow"] != "linear" || start["prompt"] != "build a thing" ||
		start["threadId"] != id || start["bundleHash"] != hash || start["source"] != "history" {
		t.Errorf("thread-start: %+v", start)
	}
	if got := strings.Join(d.roles(), ","); got != "planner,coder,reviewer" {
		t.Errorf("roles: %s", got)
	}
	planner := d.Records[1]
	if meta, _ := planner["meta"].(map[string]any); meta["task"] != "build a thing" {
		t.Errorf("planner meta: %+v", planner)
	}
	for _, k := range []string{"contentHash", "content", "timestamp", "stateHash", "childThread"} {
		if _, ok := planner[k]; !ok {
			t.Errorf("role record lacks %s: %+v", k, planner)
		}
	}
	if planner["childThread"] != nil {
		t.Errorf("childThread: %v", planner["childThread"])
	}
	res := d.result()
	if res == nil || res["returnCode"] != float64(0) {
		t.Errorf("result: %+v", res)
	}

	var list ThreadList
	f.want(http.MethodGet, "/api/threads", "", http.StatusOK, &list)
	if list.Total != 1 || len(list.Threads) != 1 {
		t.Fatalf("list: %+v", list)
	}
	got := list.Threads[0]
	if got.ThreadID != id || got.Workflow == nil || *got.Workflow != "linear" || got.Hash != hash ||
		got.Status != "completed" || got.Source != "history" {
		t.Errorf("summary: %+v", got)
	}
	// startedAt is the real start (the time in the id), not the completion.
	if got.StartedAt != start["startedAt"] || got.StartedAt > got.UpdatedAt {
		t.Errorf("startedAt %s, updatedAt %s, detail %v", got.StartedAt, got.UpdatedAt, start["startedAt"])
	}
	if first, _ := d.Records[1]["timestamp"].(float64); isoTime(int64(first)) < got.StartedAt {
		t.Errorf("the first step (%s) is before the start (%s)", isoTime(int64(first)), got.StartedAt)
	}
	if last, _ := res["timestamp"].(float64); isoTime(int64(last)) > got.UpdatedAt {
		t.Errorf("updatedAt %s is before the end %s", got.UpdatedAt, isoTime(int64(last)))
	}

	// Unknown workflows are 404s; nothing runs.
	f.wantError(http.MethodPost, "/api/threads", `{"workflow":"no-such","prompt":""}`, http.StatusNotFound, "workflow not found: no-such")
	f.wantError(http.MethodPost, "/api/threads", `{"workflow":"Bad Name","prompt":""}`, http.StatusBadRequest, "invalid workflow name")
	f.want(http.MethodGet, "/api/threads", "", http.StatusOK, &list)
	if list.Total != 1 {
		t.Errorf("a refused run started a thread: %+v", list)
	}
}

func TestThreadListFiltersAndPaging(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.register("linear", "linear.esm.js")
	f.register("slow", "slow.esm.js")
	f.startHost()
	var done []string
	for i := 0; i < 3; i++ {
		id := f.run("linear", "n")
		f.waitStatus(id, "completed")
		done = append(done, id)
	}
	killed := f.run("slow", "k")
	testkit.WaitUntil(t, "a step", func() bool { return len(f.detail(killed).roles()) > 0 })
	f.want(http.MethodPost, "/api/threads/"+killed+"/kill", "", http.StatusOK, nil)
	running := f.run("slow", "r")
	testkit.WaitUntil(t, "a step", func() bool { return len(f.detail(running).roles()) > 0 })
	f.want(http.MethodPost, "/api/threads/"+running+"/pause", "", http.StatusOK, nil)
	f.waitStatus(running, "paused")

	list := func(q string) ThreadList {
		t.Helper()
		var l ThreadList
		f.want(http.MethodGet, "/api/threads"+q, "", http.StatusOK, &l)
		return l
	}
	ids := func(l ThreadList) string {
		var out []string
		for _, th := range l.Threads {
			out = append(out, th.ThreadID)
		}
		return strings.Join(out, ",")
	}
	all := list("")
	// Newest first: ids are time-ordered.
	want := strings.Join([]string{running, killed, done[2], done[1], done[0]}, ",")
	if all.Total != 5 || ids(all) != want {
		t.Fatalf("all: %s, want %s", ids(all), want)
	}
	if l := list("?status=completed"); l.Total != 3 || ids(l) != strings.Join([]string{done[2], done[1], done[0]}, ",") {
		t.Errorf("completed: %+v", l)
	}
	if l := list("?status=killed,paused"); l.Total != 2 || ids(l) != running+","+killed {
		t.Errorf("killed,paused: %+v", l)
	}
	if l := list("?status=running"); l.Total != 0 || l.Threads == nil {
		t.Errorf("running: %+v", l)
	}
	if l := list("?workflow=slow"); l.Total != 2 || ids(l) != running+","+killed {
		t.Errorf("workflow=slow: %+v", l)
	}
	if l := list("?workflow=slow&status=killed"); l.Total != 1 || ids(l) != killed {
		t.Errorf("workflow+status: %+v", l)
	}
	if l := list("?workflow=no-such"); l.Total != 0 || len(l.Threads) != 0 {
		t.Errorf("unknown workflow: %+v", l)
	}
	if l := list("?limit=2"); l.Total != 5 || ids(l) != running+","+killed {
		t.Errorf("limit: %+v", l)
	}
	if l := list("?limit=2&offset=2"); l.Total != 5 || ids(l) != done[2]+","+done[1] {
		t.Errorf("limit+offset: %+v", l)
	}
	if l := list("?status=completed&offset=2&limit=5"); l.Total != 3 || ids(l) != done[0] {
		t.Errorf("status+offset: %+v", l)
	}
	if l := list("?offset=50"); l.Total != 5 || len(l.Threads) != 0 {
		t.Errorf("past the end: %+v", l)
	}
	for _, q := range []string{"?limit=-1", "?limit=x", "?offset=-3", "?offset=1.5", "?limit=99999999999999999999"} {
		f.wantError(http.MethodGet, "/api/threads"+q, "", http.StatusBadRequest, "non-negative integer")
	}
	f.wantError(http.MethodGet, "/api/threads?status=active", "", http.StatusBadRequest, `unknown status "active"`)
	f.wantError(http.MethodGet, "/api/cas?limit=-1", "", http.StatusBadRequest, "non-negative integer")

	var run struct{ Threads []RunningSummary }
	f.want(http.MethodGet, "/api/threads/running", "", http.StatusOK, &run)
	if len(run.Threads) != 1 || run.Threads[0].ThreadID != running || run.Threads[0].Status != "paused" ||
		run.Threads[0].WorkflowName == nil || *run.Threads[0].WorkflowName != "slow" || run.Threads[0].StartedAt != all.Threads[0].StartedAt {
		t.Errorf("running: %+v", run)
	}
	f.want(http.MethodPost, "/api/threads/"+running+"/kill", "", http.StatusOK, nil)
}

func TestPauseResumeKill(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.register("slow", "slow.esm.js")
	f.startHost()

	id := f.run("slow", "p")
	testkit.WaitUntil(t, "a step", func() bool { return len(f.detail(id).roles()) > 0 })
	var ok map[string]bool
	f.want(http.MethodPost, "/api/threads/"+id+"/pause", "", http.StatusOK, &ok)
	if !ok["ok"] {
		t.Error(ok)
	}
	paused := f.waitStatus(id, "paused")
	f.want(http.MethodPost, "/api/threads/"+strings.ToLower(id)+"/resume", "", http.StatusOK, nil) // ids are case-insensitive
	d := f.waitStatus(id, "completed")
	if len(d.roles()) != 5 || len(paused.roles()) >= 5 {
		t.Errorf("roles: paused at %v, ended with %v", paused.roles(), d.roles())
	}
	// Acting on a finished thread is refused with the engine's reason.
	f.wantError(http.MethodPost, "/api/threads/"+id+"/pause", "", http.StatusBadRequest, "not running")
	f.wantError(http.MethodPost, "/api/threads/"+id+"/resume", "", http.StatusBadRequest, "finished")

	k := f.run("slow", "k")
	testkit.WaitUntil(t, "a step", func() bool { return len(f.detail(k).roles()) > 0 })
	f.want(http.MethodPost, "/api/threads/"+k+"/kill", "", http.StatusOK, nil)
	d = f.waitStatus(k, "killed")
	if res := d.result(); res == nil || res["returnCode"] != float64(130) {
		t.Errorf("killed result: %+v", res)
	}

	for _, verb := range []string{"kill", "pause", "resume", "fork"} {
		f.wantError(http.MethodPost, "/api/threads/01ARZ3NDEKTSV4RRFFQ69G5FAV/"+verb, "", http.StatusNotFound, "thread not found: 01ARZ3NDEKTSV4RRFFQ69G5FAV")
		f.wantError(http.MethodPost, "/api/threads/bad.id/"+verb, "", http.StatusBadRequest, "invalid thread id")
	}
}

func TestFork(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.register("linear", "linear.esm.js")
	f.startHost()
	id := f.run("linear", "fork me")
	orig := f.waitStatus(id, "completed")

	var ref struct{ ThreadID string }
	f.want(http.MethodPost, "/api/threads/"+id+"/fork", `{"fromRole":"planner"}`, http.StatusCreated, &ref)
	if ref.ThreadID == "" || ref.ThreadID == id {
		t.Fatalf("fork id %q", ref.ThreadID)
	}
	d := f.waitStatus(ref.ThreadID, "completed")
	if got := strings.Join(d.roles(), ","); got != "planner,coder,reviewer" {
		t.Errorf("fork roles: %s", got)
	}
	if d.Records[0]["start"] != orig.Records[0]["start"] || d.Records[1]["stateHash"] != orig.Records[1]["stateHash"] {
		t.Errorf("the fork does not share the start and the planner step:\n%+v\n%+v", d.Records[:2], orig.Records[:2])
	}
	if d.Records[0]["prompt"] != "fork me" {
		t.Errorf("fork prompt: %v", d.Records[0]["prompt"])
	}

	// No body: retry the last role.
	f.want(http.MethodPost, "/api/threads/"+id+"/fork", "", http.StatusCreated, &ref)
	f.waitStatus(ref.ThreadID, "completed")
	f.want(http.MethodPost, "/api/threads/"+id+"/fork", `{"fromRole":null}`, http.StatusCreated, &ref)
	f.waitStatus(ref.ThreadID, "completed")

	f.wantError(http.MethodPost, "/api/threads/"+id+"/fork", `{"fromRole":"nobody"}`, http.StatusBadRequest, "nobody")
	f.wantError(http.MethodPost, "/api/threads/"+id+"/fork", `{"fromRole":5}`, http.StatusBadRequest, "fromRole must be a string")
	f.wantError(http.MethodPost, "/api/threads/"+id+"/fork", `{"fromRole":"  "}`, http.StatusBadRequest, "fromRole must name a role")
	f.wantError(http.MethodPost, "/api/threads/"+id+"/fork", `{"fromRole":`, http.StatusBadRequest, "invalid JSON body")
	f.wantError(http.MethodPost, "/api/threads/"+id+"/fork", `["planner"]`, http.StatusBadRequest, "JSON object")
	var list ThreadList
	f.want(http.MethodGet, "/api/threads", "", http.StatusOK, &list)
	if list.Total != 4 {
		t.Errorf("threads: %d, want the original and three forks", list.Total)
	}
}

func TestNoEngine(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(o *Options) { o.Engine = nil })
	f.register("linear", "linear.esm.js")
	f.wantError(http.MethodPost, "/api/threads", `{"workflow":"linear","prompt":""}`, http.StatusServiceUnavailable, "no engine host")
	var run struct{ Threads []RunningSummary }
	f.want(http.MethodGet, "/api/threads/running", "", http.StatusOK, &run)
	if run.Threads == nil || len(run.Threads) != 0 {
		t.Errorf("running: %+v", run)
	}
}

// With a HostEngine and no host (and nothing to start one), reads work and
// actions say why they cannot.
func TestNoHost(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.register("linear", "linear.esm.js")
	f.wantError(http.MethodPost, "/api/threads", `{"workflow":"linear","prompt":""}`, http.StatusBadRequest, "no engine host")
	var run struct{ Threads []RunningSummary }
	f.want(http.MethodGet, "/api/threads/running", "", http.StatusOK, &run)
	if len(run.Threads) != 0 {
		t.Errorf("running: %+v", run)
	}
	// A host that starts later is found.
	f.startHost()
	id := f.run("linear", "late")
	f.waitStatus(id, "completed")
	// And one that restarts is found again.
	f.shutdownHost()
	f.startHost()
	id = f.run("linear", "again")
	f.waitStatus(id, "completed")
}

func TestWorkflowRollback(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	first := f.register("plan-code", "linear.esm.js")
	second := f.register("plan-code", "slow.esm.js")
	var got struct{ Name, Hash string }
	f.want(http.MethodPost, "/api/workflows/plan-code/rollback", "", http.StatusOK, &got)
	if got.Name != "plan-code" || got.Hash != first {
		t.Fatalf("rollback to the previous version: %+v", got)
	}
	f.want(http.MethodPost, "/api/workflows/plan-code/rollback", `{"hash":"`+second+`"}`, http.StatusOK, &got)
	if got.Hash != second {
		t.Fatalf("rollback to a given hash: %+v", got)
	}
	f.wantError(http.MethodPost, "/api/workflows/plan-code/rollback", `{"hash":"SSVQ0RZ55P9Y4"}`, http.StatusBadRequest, "hash not found in history: SSVQ0RZ55P9Y4")
	f.wantError(http.MethodPost, "/api/workflows/plan-code/rollback", `{"hash":"../x"}`, http.StatusBadRequest, "invalid hash")
	f.wantError(http.MethodPost, "/api/workflows/plan-code/rollback", `{"hash":5}`, http.StatusBadRequest, "hash must be a string")
	f.wantError(http.MethodPost, "/api/workflows/nope/rollback", "", http.StatusNotFound, "workflow not found: nope")
	if err := os.Remove(filepath.Join(f.l.Root, "bundles", first+".esm.js")); err != nil {
		t.Fatal(err)
	}
	f.wantError(http.MethodPost, "/api/workflows/plan-code/rollback", "", http.StatusBadRequest, "bundle file not found for hash "+first)
}

// Window is the paging of both the REST API and the CLI: an offset past
// the end gives nothing, a limit of 0 gives the rest.
func TestWindow(t *testing.T) {
	t.Parallel()
	items := []int{1, 2, 3, 4, 5}
	for _, tc := range []struct {
		offset, limit int
		want          []int
	}{
		{0, 0, []int{1, 2, 3, 4, 5}},
		{1, 2, []int{2, 3}},
		{3, 9, []int{4, 5}},
		{5, 0, []int{}},
		{9, 1, []int{}},
	} {
		if got := Window(items, tc.offset, tc.limit); !slices.Equal(got, tc.want) {
			t.Errorf("Window(offset %d, limit %d) = %v, want %v", tc.offset, tc.limit, got, tc.want)
		}
	}
}

// CORS admits the origins the API was given and no other: none by
// default, not the dashboard's dev server, not a loopback address for a
// configured name, another port or scheme, "null". A preflight of an
// origin not admitted gets no Access-Control-Allow-Origin either, so the
// browser never sends the request.
func TestCORSAdmitsOnlyTheOriginsItWasGiven(t *testing.T) {
	t.Parallel()
	origins := []string{"http://localhost:5173", "http://127.0.0.1:5173", "http://[::1]:5173", "https://localhost:5173",
		"http://localhost:5174", "http://localhost", "http://localhost:7860", "http://127.0.0.1:7860", "null", "http://evil.example"}
	for _, config := range [][]string{nil, {"http://localhost:5173"}, {"http://127.0.0.1:7860", "http://[::1]:5173"}} {
		allowed, err := ParseOrigins(config)
		if err != nil {
			t.Fatal(err)
		}
		f := newFixture(t, func(o *Options) { o.AllowOrigins = allowed })
		for _, origin := range origins {
			want := ""
			if slices.Contains(config, origin) {
				want = origin
			}
			rec := f.call(http.MethodGet, "/api/healthz", "", "Origin", origin)
			if got := rec.Header().Get("Access-Control-Allow-Origin"); got != want {
				t.Errorf("admitting %v: GET from %s: Allow-Origin %q, want %q", config, origin, got, want)
			}
			pre := f.call(http.MethodOptions, "/api/threads", "", "Origin", origin, "Access-Control-Request-Method", "POST")
			if got := pre.Header().Get("Access-Control-Allow-Origin"); got != want {
				t.Errorf("admitting %v: preflight from %s: Allow-Origin %q, want %q", config, origin, got, want)
			}
		}
	}
}

// DELETE /api/cas/:hash never takes a node a thread reaches (409, the
// node kept), whichever of the thread's nodes it names; a node nothing
// reaches goes.
func TestDeletingACASEntryAThreadReachesIsRefused(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	hash := f.register("linear", "linear.esm.js")
	f.startHost()
	id := f.run("linear", "one")
	f.waitStatus(id, "completed")
	recs, damaged, err := threads.ListBundleTolerant(f.l, hash)
	if err != nil || len(damaged) > 0 || len(recs) != 1 {
		t.Fatalf("threads %+v, damaged %v, %v", recs, damaged, err)
	}
	for _, h := range []string{recs[0].Start, recs[0].Head} {
		f.wantError(http.MethodDelete, "/api/cas/"+h, "", http.StatusConflict, "a thread still needs this cas entry")
		if ok, _ := cas.Open(f.l.CASDir()).Exists(h); !ok {
			t.Fatalf("%s was deleted", h)
		}
	}
	var put struct{ Hash string }
	f.want(http.MethodPost, "/api/cas", `{"content":"nobody's"}`, http.StatusCreated, &put)
	f.shutdownHost() // no grace for what was just stored
	var ok map[string]bool
	f.want(http.MethodDelete, "/api/cas/"+put.Hash, "", http.StatusOK, &ok)
}
