package server

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/uncaged/workflow/gateway/auth"
	"github.com/uncaged/workflow/shared/fleet"
	"github.com/uncaged/workflow/shared/testkit"
)

// waitingThread is a thread of the fake connector waiting for assignee
// since since.
func waitingThread(id, assignee string, since time.Time, deadline *time.Time) fleet.Thread {
	return fleet.Thread{ID: id, Workflow: "review", Status: "waiting", Prompt: "review " + id, StartedAt: since.Add(-time.Minute), UpdatedAt: since,
		Waiting: &fleet.Waiting{Role: "approver", Question: "Ship " + id + "?", Assignee: assignee, Since: since, Deadline: deadline}}
}

// inboxAnswer is GET /api/gateway/inbox's answer.
type inboxAnswer struct {
	Threads []InboxThread `json:"threads"`
	Total   int           `json:"total"`
}

func (f *fixture) inbox(query string) (inboxAnswer, string) {
	f.t.Helper()
	resp, body := f.do("GET", "/api/gateway/inbox?"+query, f.dash, nil)
	var out inboxAnswer
	if resp.StatusCode != 200 || json.Unmarshal([]byte(body), &out) != nil || out.Threads == nil {
		f.t.Fatalf("inbox?%s: %d %s", query, resp.StatusCode, body)
	}
	return out, body
}

// inboxIDs are the answer's threads as machine/id, in order.
func inboxIDs(a inboxAnswer) string {
	var out []string
	for _, t := range a.Threads {
		out = append(out, t.Machine+"/"+t.ThreadID)
	}
	return strings.Join(out, ",")
}

// The inbox lists the fleet's waiting threads, oldest wait first, in the
// contract's shape; it is filtered by assignee and paged; a machine that
// went offline keeps its waiting threads there (online:false); a thread
// that stops waiting leaves it. The fleet's search shows what a thread
// waits for too.
func TestInboxRoute(t *testing.T) {
	t.Parallel()
	f, _ := newFleetFixture(t)
	base := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	deadline := base.Add(24 * time.Hour)
	laptop := newFakeConnector(
		waitingThread("t1", "ann", base.Add(time.Hour), &deadline),
		fakeThread("t2", "hello", "completed", "greet", "said hello", base),
		waitingThread("t3", "", base.Add(2*time.Hour), nil),
	)
	ci := newFakeConnector(waitingThread("c1", "bob", base, nil))
	f.connector("laptop", laptop)
	disconnect := f.connector("ci-box", ci)

	var all inboxAnswer
	var body string
	testkit.WaitUntil(t, "three waiting threads in the inbox", func() bool { all, body = f.inbox(""); return all.Total == 3 })
	if got := inboxIDs(all); got != "ci-box/c1,laptop/t1,laptop/t3" {
		t.Fatalf("oldest wait first: %s", got)
	}
	want := InboxThread{Machine: "laptop", Online: true, ThreadID: "t1", Workflow: "review", Role: "approver", Question: "Ship t1?",
		Assignee: "ann", Since: "2026-11-01T13:00:00.000Z", Deadline: ptrTo("2026-11-02T12:00:00.000Z")}
	got := all.Threads[1]
	if got.Deadline == nil || *got.Deadline != *want.Deadline {
		t.Fatalf("t1's deadline: %v, want %s", got.Deadline, *want.Deadline)
	}
	got.Deadline, want.Deadline = nil, nil
	if got != want {
		t.Fatalf("t1: %+v, want %+v", got, want)
	}
	// Every field is there, a deadline that is none as null.
	var raw struct{ Threads []map[string]any }
	if err := json.Unmarshal([]byte(body), &raw); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"machine", "online", "threadId", "workflow", "role", "question", "assignee", "since", "deadline"} {
		if _, ok := raw.Threads[2][k]; !ok {
			t.Errorf("a thread of the inbox lacks %q: %v", k, raw.Threads[2])
		}
	}
	if raw.Threads[2]["deadline"] != nil || raw.Threads[2]["assignee"] != "" {
		t.Errorf("t3: %v", raw.Threads[2])
	}

	for query, want := range map[string]string{
		"assignee=ann":        "laptop/t1",
		"assignee=bob":        "ci-box/c1",
		"assignee=Ann":        "",
		"assignee=":           "ci-box/c1,laptop/t1,laptop/t3",
		"limit=1":             "ci-box/c1",
		"limit=2&offset=1":    "laptop/t1,laptop/t3",
		"offset=5":            "",
		"assignee=ann&offset": "laptop/t1",
	} {
		a, _ := f.inbox(query)
		if got := inboxIDs(a); got != want {
			t.Errorf("%s: %s, want %s", query, got, want)
		}
	}
	// The search shows what a thread waits for, and filters on waiting.
	found := f.search("status=waiting&machine=laptop")
	if ids(found.Threads) != "laptop/t3,laptop/t1" || found.Threads[1].Waiting == nil || found.Threads[1].Waiting.Question != "Ship t1?" ||
		found.Threads[1].Waiting.Deadline == nil || found.Threads[0].Waiting.Deadline != nil {
		t.Fatalf("search for waiting threads: %+v", found.Threads)
	}

	// ci-box goes offline: its thread still waits, in the inbox.
	disconnect()
	f.waitStatus("ci-box", "offline")
	if a, _ := f.inbox("assignee=bob"); len(a.Threads) != 1 || a.Threads[0].Online || a.Threads[0].ThreadID != "c1" {
		t.Fatalf("offline machine's waiting thread: %+v", a.Threads)
	}
	// t1 is answered and completes; t3 runs again: both leave.
	done := fakeThread("t1", "review", "completed", "review t1", "shipped", base.Add(3*time.Hour))
	running := fleet.Thread{ID: "t3", Workflow: "review", Status: "running", UpdatedAt: base.Add(3 * time.Hour)}
	laptop.add(done, running)
	testkit.WaitUntil(t, "t1 and t3 to leave the inbox", func() bool { a, _ := f.inbox(""); return inboxIDs(a) == "ci-box/c1" })
	if found := f.search("machine=laptop&status=completed"); !strings.Contains(ids(found.Threads), "laptop/t1") || found.Threads[0].Waiting != nil {
		t.Fatalf("t1 after it completed: %+v", found.Threads)
	}
}

func ptrTo[T any](v T) *T { return &v }

// The inbox needs a dashboard credential, and refuses a bad parameter
// with 400 naming it; a gateway that keeps nothing has none.
func TestInboxRefusals(t *testing.T) {
	t.Parallel()
	f, _ := newFleetFixture(t)
	if resp, body := f.do("GET", "/api/gateway/inbox", "", nil); resp.StatusCode != 401 {
		t.Errorf("no credential: %d %s", resp.StatusCode, body)
	}
	connectorTok, _ := f.auth.Issue(auth.RoleConnector, "laptop", time.Hour)
	if resp, body := f.do("GET", "/api/gateway/inbox", connectorTok, nil); resp.StatusCode != 403 && resp.StatusCode != 401 {
		t.Errorf("a connector's token: %d %s", resp.StatusCode, body)
	}
	for query, param := range map[string]string{
		"limit=0":                              "limit",
		"limit=1001":                           "limit",
		"limit=ten":                            "limit",
		"offset=-1":                            "offset",
		"offset=x":                             "offset",
		"assignee=%FF":                         "assignee",
		"assignee=a%00b":                       "assignee",
		"assignee=" + strings.Repeat("x", 257): "assignee",
		"assignee=a&assignee=b":                "assignee",
		"status=waiting":                       "unknown parameter",
	} {
		resp, body := f.do("GET", "/api/gateway/inbox?"+query, f.dash, nil)
		var e struct{ Error string }
		if resp.StatusCode != 400 || json.Unmarshal([]byte(body), &e) != nil || !strings.HasPrefix(e.Error, param) {
			t.Errorf("%s: %d %s, want 400 naming %s", query, resp.StatusCode, body, param)
		}
	}
	bare := newFixture(t, time.Hour)
	if resp, body := bare.do("GET", "/api/gateway/inbox", bare.dash, nil); resp.StatusCode != 404 || !strings.Contains(body, "keeps no history") {
		t.Errorf("without a store: %d %s", resp.StatusCode, body)
	}
}
