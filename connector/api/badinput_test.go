package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/uncaged/workflow/engine/host"
	"github.com/uncaged/workflow/engine/ids"
)

// Every route refuses bad input with its documented 4xx JSON error and
// leaves the storage root exactly as it was.
func TestBadInputChangesNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.register("linear", "linear.esm.js")
	f.startHost()
	id := f.run("linear", "x")
	f.waitStatus(id, "completed")
	f.want(http.MethodPost, "/api/cas", `{"content":"blob"}`, http.StatusCreated, nil)
	before := snapshot(t, f.l.Root)

	long := strings.Repeat("A", 65)
	cases := []struct {
		method, path, body string
		code               int
		msg                string
	}{
		// POST /api/threads
		{"POST", "/api/threads", "", 400, "invalid JSON body"},
		{"POST", "/api/threads", "{", 400, "invalid JSON body"},
		{"POST", "/api/threads", `{"workflow":"linear","prompt":""} {}`, 400, "invalid JSON body"},
		{"POST", "/api/threads", `{"workflow":"linear","prompt":""}x`, 400, "invalid JSON body"},
		{"POST", "/api/threads", `{}`, 400, "workflow (string) and prompt (string) are required"},
		{"POST", "/api/threads", `[]`, 400, "are required"},
		{"POST", "/api/threads", `null`, 400, "are required"},
		{"POST", "/api/threads", `"linear"`, 400, "are required"},
		{"POST", "/api/threads", `{"workflow":"linear"}`, 400, "are required"},
		{"POST", "/api/threads", `{"workflow":"linear","prompt":5}`, 400, "are required"},
		{"POST", "/api/threads", `{"workflow":["linear"],"prompt":""}`, 400, "are required"},
		{"POST", "/api/threads", `{"workflow":null,"prompt":""}`, 400, "are required"},
		{"POST", "/api/threads", `{"workflow":"","prompt":""}`, 400, "invalid workflow name"},
		{"POST", "/api/threads", `{"workflow":"../linear","prompt":""}`, 400, "invalid workflow name"},
		{"POST", "/api/threads", `{"workflow":"no-such","prompt":""}`, 404, "workflow not found: no-such"},
		// Thread actions
		{"POST", "/api/threads/" + id + "/pause", "", 400, "not running"},
		{"POST", "/api/threads/" + id + "/resume", "", 400, "finished"},
		{"POST", "/api/threads/" + id + "/kill", "", 400, "finished"},
		{"POST", "/api/threads/" + id + "/fork", `{"fromRole":"nobody"}`, 400, "nobody"},
		{"POST", "/api/threads/" + id + "/fork", `{"fromRole":true}`, 400, "fromRole must be a string"},
		{"POST", "/api/threads/" + id + "/fork", `{"fromRole":`, 400, "invalid JSON body"},
		{"POST", "/api/threads/" + id + "/fork", `7`, 400, "JSON object"},
		{"POST", "/api/threads/a.b/kill", "", 400, "invalid thread id"},
		{"POST", "/api/threads/%2e%2e/pause", "", 400, "invalid thread id"},
		{"POST", "/api/threads/" + long + "/resume", "", 400, "invalid thread id"},
		{"POST", "/api/threads/a%2Fb/fork", "", 400, "invalid thread id"},
		{"POST", "/api/threads/a.b/fork", `{"fromRole":5}`, 400, "invalid thread id"},
		{"POST", "/api/threads/01ARZ3NDEKTSV4RRFFQ69G5FAV/kill", "", 404, "thread not found"},
		{"POST", "/api/threads/nonexistent-id/fork", "", 404, "thread not found"},
		// Thread reads
		{"GET", "/api/threads/a.b", "", 400, "invalid thread id"},
		{"GET", "/api/threads/%20", "", 400, "invalid thread id"},
		{"GET", "/api/threads/" + long, "", 400, "invalid thread id"},
		{"GET", "/api/threads/a.b/live", "", 400, "invalid thread id"},
		{"GET", "/api/threads?limit=abc", "", 400, "limit must be a non-negative integer"},
		{"GET", "/api/threads?offset=-1", "", 400, "offset must be a non-negative integer"},
		{"GET", "/api/threads?status=done", "", 400, "unknown status"},
		{"DELETE", "/api/threads/" + id, "", 405, "method not allowed"},
		// CAS
		{"GET", "/api/cas/short", "", 400, "invalid hash"},
		{"GET", "/api/cas/IIIIIIIIIIIII", "", 400, "invalid hash"},
		{"GET", "/api/cas/%2e%2e%2fworkflow", "", 400, "invalid hash"},
		{"DELETE", "/api/cas/SSVQ0RZ55P9Y", "", 400, "invalid hash"},
		{"DELETE", "/api/cas/SSVQ0RZ55P9Y4X", "", 400, "invalid hash"},
		{"DELETE", "/api/cas/SSVQ0RZ55P9Y4", "", 404, "not found"},
		{"POST", "/api/cas", `{"content":5}`, 400, "content field required"},
		{"POST", "/api/cas", `{"content":null}`, 400, "content field required"},
		{"POST", "/api/cas", `{}`, 400, "content field required"},
		{"POST", "/api/cas", `["x"]`, 400, "content field required"},
		{"POST", "/api/cas", `{"content":"x"`, 400, "invalid JSON body"},
		{"POST", "/api/cas", "", 400, "invalid JSON body"},
		{"GET", "/api/cas?offset=x", "", 400, "offset must be a non-negative integer"},
		{"PUT", "/api/cas/SSVQ0RZ55P9Y4", "", 405, "method not allowed"},
		// Workflows
		{"GET", "/api/workflows/Bad_Name", "", 400, "invalid workflow name"},
		{"GET", "/api/workflows/no-such/history", "", 404, "workflow not found: no-such"},
		{"DELETE", "/api/workflows/linear", "", 405, "method not allowed"},
		// Elsewhere
		{"GET", "/api/clients", "", 404, "not found"},
		{"POST", "/healthz", "", 405, "method not allowed"},
	}
	for _, c := range cases {
		rec := f.call(c.method, c.path, c.body)
		var e errorBody
		if rec.Code != c.code || json.Unmarshal(rec.Body.Bytes(), &e) != nil || !strings.Contains(e.Error, c.msg) {
			t.Errorf("%s %s %q: %d %s; want %d with %q", c.method, c.path, c.body, rec.Code, strings.TrimSpace(rec.Body.String()), c.code, c.msg)
		}
	}
	// Oversized bodies on every route that takes one.
	for _, p := range []string{"/api/threads", "/api/cas", "/api/threads/" + id + "/fork", "/api/threads/" + id + "/kill"} {
		req := httptest.NewRequest(http.MethodPost, p, strings.NewReader(`{"workflow":"linear","prompt":"`+strings.Repeat("x", 1<<20)+`"}`))
		rec := httptest.NewRecorder()
		f.e.ServeHTTP(rec, req)
		if rec.Code != http.StatusRequestEntityTooLarge || strings.TrimSpace(rec.Body.String()) != `{"error":"Payload too large"}` {
			t.Errorf("oversized %s: %d %s", p, rec.Code, rec.Body)
		}
	}
	if after := snapshot(t, f.l.Root); !reflect.DeepEqual(before, after) {
		for k, v := range after {
			if before[k] != v {
				t.Errorf("changed: %s", k)
			}
		}
		for k := range before {
			if _, ok := after[k]; !ok {
				t.Errorf("removed: %s", k)
			}
		}
	}
}

// runRecorder is an Engine that starts nothing: Run hands out a fresh
// thread id and remembers what it was asked to run.
type runRecorder struct {
	mu               sync.Mutex
	runs             int
	workflow, prompt string
}

func (r *runRecorder) Run(workflow, prompt string) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.runs++
	r.workflow, r.prompt = workflow, prompt
	return ids.NewThreadID(time.Now()), nil
}

func (r *runRecorder) last() (runs int, workflow, prompt string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.runs, r.workflow, r.prompt
}

var errNotHere = errors.New("not part of this test")

func (r *runRecorder) Kill(string) error                             { return errNotHere }
func (r *runRecorder) Pause(string) error                            { return errNotHere }
func (r *runRecorder) Resume(string) error                           { return errNotHere }
func (r *runRecorder) Fork(string, host.ForkRequest) (string, error) { return "", errNotHere }
func (r *runRecorder) Running() ([]host.RunningThread, error)        { return nil, nil }
func (r *runRecorder) Answer(string, host.AnswerRequest) (host.Answered, error) {
	return host.Answered{}, errNotHere
}

// FuzzThreadRunBody: no body makes POST /api/threads fail with a 5xx, every
// answer is JSON (201 {"threadId"} or 4xx {"error"}), and a body that is
// accepted reaches the engine as exactly the workflow and prompt it holds,
// and one that is refused reaches it not at all.
//
// The engine only records the run. Behind a real engine host every
// accepted body ran a thread to its end (fsynced CAS writes, index
// updates), the threads queued up behind the host's limit, and executions
// per second fell towards none; what the host does with a run is the other
// tests' business, this target is about reading the body.
func FuzzThreadRunBody(f *testing.F) {
	for _, seed := range []string{
		`{"workflow":"linear","prompt":"hi"}`,
		`{"workflow":"linear","prompt":""}`,
		`{"workflow":"linear","prompt":"\u0000\ud800"}`,
		`{"workflow":"no-such","prompt":"x"}`,
		`{"workflow":"Linear","prompt":"x"}`,
		`{"workflow":1,"prompt":2}`,
		`{"foo":"bar"}`,
		`{}`, `[]`, `null`, `true`, `"x"`, `1e999`, ``, `{`, `{"workflow":"linear","prompt":"x"}}`,
		"{\"workflow\":\"linear\",\"prompt\":\"\xff\"}",
		`{"workflow":"linear","workflow":"no-such","prompt":""}`,
		strings.Repeat("[", 100000),
	} {
		f.Add([]byte(seed))
	}
	eng := &runRecorder{}
	fx := newFixture(f, func(o *Options) { o.Engine = eng })
	fx.register("linear", "linear.esm.js")
	f.Fuzz(func(t *testing.T, body []byte) {
		runsBefore, _, _ := eng.last()
		req := httptest.NewRequest(http.MethodPost, "/api/threads", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		fx.e.ServeHTTP(rec, req)
		var out struct {
			ThreadID string `json:"threadId"`
			Error    string `json:"error"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
			t.Fatalf("%d, not JSON: %q", rec.Code, rec.Body)
		}
		runs, workflow, prompt := eng.last()
		switch {
		case rec.Code == http.StatusCreated && out.ThreadID != "":
			var sent map[string]any
			if err := json.Unmarshal(body, &sent); err != nil || runs != runsBefore+1 || sent["workflow"] != workflow || sent["prompt"] != prompt {
				t.Fatalf("body %q was run as workflow %q, prompt %q (%d runs)", body, workflow, prompt, runs-runsBefore)
			}
		case rec.Code >= 400 && rec.Code < 500 && out.Error != "":
			if runs != runsBefore {
				t.Fatalf("refused body %q (%d) was run", body, rec.Code)
			}
		default:
			t.Fatalf("body %q: %d %s", body, rec.Code, rec.Body)
		}
	})
}
