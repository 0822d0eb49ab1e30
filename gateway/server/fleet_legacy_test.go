package server

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/uncaged/workflow/shared/fleet"
	"github.com/uncaged/workflow/shared/testkit"
)

// originalThreads answers an original client's thread list and details
// (its shapes: startedAt is the last activity, status running, active,
// completed or failed), from threads the test changes, for the client
// token only; it counts the requests of each.
type originalThreads struct {
	token string

	mu      sync.Mutex
	list    []string          // list items, JSON
	details map[string]string // by thread id, JSON

	lists, detailsRead atomic.Int32
}

func (o *originalThreads) set(id, item, detail string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for i, it := range o.list {
		if strings.Contains(it, `"threadId":"`+id+`"`) {
			o.list = append(o.list[:i], o.list[i+1:]...)
			break
		}
	}
	o.list = append(o.list, item)
	o.details[id] = detail
}

func (o *originalThreads) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	if r.Header.Get("X-Client-Token") != o.token {
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprint(w, `{"error":"Unauthorized"}`)
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if r.URL.Path == "/api/threads" {
		o.lists.Add(1)
		fmt.Fprintf(w, `{"threads":[%s]}`, strings.Join(o.list, ","))
		return
	}
	id, ok := strings.CutPrefix(r.URL.Path, "/api/threads/")
	if d, known := o.details[id]; ok && known {
		o.detailsRead.Add(1)
		fmt.Fprint(w, d)
		return
	}
	w.WriteHeader(http.StatusNotFound)
	fmt.Fprintf(w, `{"error":"thread not found: %s"}`, id)
}

// The threads of an original client, which has no change stream, are in
// the fleet's memory too: read from its thread list and details, mapped to
// the fleet's words, found by the search, and read again only when they
// change.
func TestFleetRemembersAnOriginalClientsThreads(t *testing.T) {
	t.Parallel()
	f, _ := newFleetFixture(t)
	f.gw.fleet.mu.Lock()
	f.gw.fleet.legacyEvery = 20 * time.Millisecond
	f.gw.fleet.mu.Unlock()
	long := strings.Repeat("fix the bug ", 100)
	o := &originalThreads{token: "tok-old", details: map[string]string{}}
	o.set("06EZJ3QM9Q4S5XWA0R1C7D8E2G",
		`{"threadId":"06EZJ3QM9Q4S5XWA0R1C7D8E2G","workflow":"solve","hash":"HEXEJQQQ6EVYJ","startedAt":"2026-11-02T10:00:00.000Z","status":"active"}`,
		`{"threadId":"06EZJ3QM9Q4S5XWA0R1C7D8E2G","records":[`+
			`{"type":"thread-start","workflow":"solve","prompt":"`+long+`","threadId":"06EZJ3QM9Q4S5XWA0R1C7D8E2G","status":"active","timestamp":null},`+
			`{"type":"role","role":"planner","contentHash":"AB2BP0Y50PSY6","content":"plan","meta":{},"timestamp":1793613600000}]}`)
	o.set("06E0000000000000000000000C",
		`{"threadId":"06E0000000000000000000000C","workflow":null,"hash":"HEXEJQQQ6EVYJ","startedAt":"2026-11-01T09:00:00.000Z","status":"failed"}`,
		`{"threadId":"06E0000000000000000000000C","records":[`+
			`{"type":"thread-start","workflow":"unknown","prompt":null,"threadId":"06E0000000000000000000000C","status":"failed","timestamp":null},`+
			`{"type":"workflow-result","returnCode":1,"content":"the moon did not answer","timestamp":1793523600000}]}`)
	// Connected before it registers its token: its first readings are
	// refused, and retried.
	f.legacyConnector("old", o)
	f.registerLegacy("old", "tok-old")

	all := f.waitSearch("machine=old", 2)
	if got := ids(all.Threads); got != "old/06EZJ3QM9Q4S5XWA0R1C7D8E2G,old/06E0000000000000000000000C" {
		t.Fatalf("newest first: %s", got)
	}
	active, failed := all.Threads[0], all.Threads[1]
	if active.Workflow == nil || *active.Workflow != "solve" || active.Status != "paused" || active.Prompt != fleet.TruncatePrompt(long) ||
		active.Steps != 1 || active.ReturnCode != nil || active.UpdatedAt != "2026-11-02T10:00:00.000Z" || !active.Online {
		t.Fatalf("the original's active thread: %+v", active)
	}
	if failed.Workflow != nil || failed.Status != "failed" || failed.Prompt != "" || failed.Steps != 0 ||
		failed.ReturnCode == nil || *failed.ReturnCode != 1 || failed.Summary != "the moon did not answer" {
		t.Fatalf("the original's failed thread: %+v", failed)
	}
	if got := ids(f.search("status=paused").Threads); got != "old/06EZJ3QM9Q4S5XWA0R1C7D8E2G" {
		t.Fatalf("status=paused: %s", got)
	}

	// Unchanged threads are not read again; a change is.
	read, lists := o.detailsRead.Load(), o.lists.Load()
	testkit.WaitUntil(t, "more readings of the list", func() bool { return o.lists.Load() >= lists+3 })
	if n := o.detailsRead.Load(); n != read {
		t.Fatalf("unchanged threads were read again: %d detail requests, then %d", read, n)
	}
	o.set("06EZJ3QM9Q4S5XWA0R1C7D8E2G",
		`{"threadId":"06EZJ3QM9Q4S5XWA0R1C7D8E2G","workflow":"solve","hash":"HEXEJQQQ6EVYJ","startedAt":"2026-11-02T11:00:00.000Z","status":"completed"}`,
		`{"threadId":"06EZJ3QM9Q4S5XWA0R1C7D8E2G","records":[`+
			`{"type":"thread-start","workflow":"solve","prompt":"fix it","threadId":"06EZJ3QM9Q4S5XWA0R1C7D8E2G","status":"completed","timestamp":null},`+
			`{"type":"role","role":"planner","contentHash":"AB2BP0Y50PSY6","content":"plan","meta":{},"timestamp":1793613600000},`+
			`{"type":"role","role":"coder","contentHash":"AB2BP0Y50PSY6","content":"code","meta":{},"timestamp":1793617000000},`+
			`{"type":"workflow-result","returnCode":0,"content":"fixed","timestamp":1793617200000}]}`)
	done := f.waitSearch("machine=old&status=completed", 1).Threads[0]
	if done.Steps != 2 || done.ReturnCode == nil || *done.ReturnCode != 0 || done.Summary != "fixed" || done.UpdatedAt != "2026-11-02T11:00:00.000Z" {
		t.Fatalf("the thread once completed: %+v", done)
	}
}
