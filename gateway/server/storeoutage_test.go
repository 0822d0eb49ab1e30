package server

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/uncaged/workflow/gateway/auth"
	"github.com/uncaged/workflow/gateway/metrics"
	"github.com/uncaged/workflow/gateway/store"
	"github.com/uncaged/workflow/shared/fleet"
	"github.com/uncaged/workflow/shared/testkit"
	"github.com/uncaged/workflow/shared/testkit/pgtest"
)

// What a PostgreSQL outage does to a gateway, against a real server the
// tests stop and start: nothing the gateway writes behind the requests
// is lost, what needs the store is refused the same way everywhere, and
// the outage is told once when it starts and once when it ends.

// outageFixture is a gateway on a PostgreSQL server of the test's own,
// checking its store every 10 ms, spilling to a directory of its own,
// logging JSON to logs.
type outageFixture struct {
	*fixture
	pg   *pgtest.Server
	st   store.Store
	logs *testkit.Buffer
}

// newOutageFixture starts the server and the gateway; before, when not
// nil, runs on the store before the gateway opens it.
func newOutageFixture(t *testing.T, before func(store.Store)) *outageFixture {
	t.Helper()
	pg := pgtest.NewServer(t)
	st, err := store.Open(context.Background(), store.Config{DatabaseURL: pg.URL(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() }) // after the gateway's own cleanups
	if before != nil {
		before(st)
	}
	logs := &testkit.Buffer{}
	f := newStoreFixture(t, st, testRegistrationKey, func(o *Options) {
		o.Logger, o.storeCheckEvery, o.SpoolDir = slog.New(slog.NewJSONHandler(logs, nil)), 10*time.Millisecond, t.TempDir()
	})
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the gateway's log:\n%s", logs.String())
		}
	})
	return &outageFixture{fixture: f, pg: pg, st: st, logs: logs}
}

// storeStatus is what /readyz says of the store.
func (f *outageFixture) storeStatus() (status string, queued int) {
	r := readyzBody(f.t, f.fixture)
	if r.code != http.StatusOK || r.Store == nil {
		f.t.Fatalf("/readyz: %+v", r)
	}
	return r.Store.Status, r.Store.Queued
}

// lines counts the log's lines with message msg at level.
func (f *outageFixture) lines(level, msg string) int {
	return strings.Count(f.logs.String(), `"level":"`+level+`","msg":"`+msg)
}

// connectorWithAnswers serves a fake connector's change stream from fc
// and answers its other routes as a connector's API does.
func connectorWithAnswers(fc *fakeConnector) http.Handler {
	answers := connectorAnswers()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == fleet.EventsPath {
			fc.ServeHTTP(w, r)
			return
		}
		answers.ServeHTTP(w, r)
	})
}

// The report: PostgreSQL stopped for 30 s under load lost every audit
// entry made meanwhile. Now, with the server stopped, audit-worthy
// changes (proxied actions, a login and logout, a refused request),
// a connector's thread events and its last seen as it leaves all wait in
// the gateway's queue; the gateway stays ready and says the store is
// down; once the server is back every entry is in the store exactly
// once, the threads are as last reported, the machine's last seen is when
// it left, and the log has one ERROR for the outage's start and one for
// its end, with its counts.
func TestAStoreOutageLosesNoRecord(t *testing.T) {
	t.Parallel()
	f := newOutageFixture(t, nil)
	ctx := context.Background()
	t0 := time.Now().UTC().Truncate(time.Millisecond)
	fc := newFakeConnector(fakeThread("T1", "solve", "running", "before the outage", "", t0))
	leave := f.connector("laptop", connectorWithAnswers(fc))
	testkit.WaitUntil(t, "T1 to be stored", func() bool {
		_, err := f.st.GetThread(ctx, "laptop", "T1")
		return err == nil
	})
	if resp, body := f.do("GET", "/api/gateway/machines", f.dash, nil); resp.StatusCode != 200 || strings.Contains(body, "degraded") {
		t.Fatalf("machines with the store up: %d %s", resp.StatusCode, body)
	}
	f.waitAudit(1) // laptop's connect

	f.pg.Stop(t)
	type change struct{ method, path, token, body string }
	for _, c := range []change{
		{"POST", "/api/clients/laptop/threads", f.dash, `{"workflow":"solve"}`},
		{"POST", "/api/clients/laptop/threads/T1/kill", f.dash, ""},
		{"POST", "/api/clients/laptop/threads/T1/pause", f.dash, ""},
		{"POST", "/api/clients/laptop/threads/T1/fork", f.dash, ""},
		{"POST", "/api/gateway/login", "", `{"token":"` + f.dash + `"}`},
		{"POST", "/api/gateway/logout", f.dash, ""},
		{"POST", "/api/clients/laptop/threads/T1/kill", "", ""}, // refused: no credential
	} {
		if resp, body := f.do(c.method, c.path, c.token, strings.NewReader(c.body)); resp.StatusCode >= 500 {
			t.Fatalf("%s %s during the outage: %d %s (proxying and logins need no store)", c.method, c.path, resp.StatusCode, body)
		}
	}
	t1 := t0.Add(time.Minute)
	fc.add(fakeThread("T1", "solve", "completed", "before the outage", "done during it", t1),
		fakeThread("T2", "solve", "failed", "during the outage", "", t1))
	const queuedBeforeLeaving = 7 + 1 // the entries, and at least one batch of threads
	testkit.WaitUntil(t, "the outage to be seen and the changes queued", func() bool {
		status, queued := f.storeStatus()
		return status == "down" && queued >= queuedBeforeLeaving
	})
	left := time.Now()
	leave()
	f.waitStatus("laptop", "offline")
	testkit.WaitUntil(t, "laptop's last touch to be queued", func() bool {
		_, queued := f.storeStatus()
		return queued >= queuedBeforeLeaving+1
	})
	// The machine list answers from presence and what it last read.
	resp, body := f.do("GET", "/api/gateway/machines", f.dash, nil)
	var machines struct {
		Machines []FleetMachine `json:"machines"`
		Degraded string         `json:"degraded"`
	}
	if resp.StatusCode != 200 || json.Unmarshal([]byte(body), &machines) != nil || machines.Degraded == "" ||
		len(machines.Machines) != 1 || machines.Machines[0].Name != "laptop" || machines.Machines[0].Online {
		t.Fatalf("machines during the outage: %d %s", resp.StatusCode, body)
	}
	_, metrics := f.do("GET", "/metrics", "", nil)
	for _, want := range []string{"uncaged_gateway_store_ready 0\n", `uncaged_gateway_store_dropped_total{kind="audit",reason="full"} 0`} {
		if !strings.Contains(metrics, want) {
			t.Fatalf("metrics during the outage lack %q", want)
		}
	}

	back := time.Now()
	f.pg.Start(t)
	testkit.WaitUntil(t, "the outage to be over and its queue written", func() bool {
		status, queued := f.storeStatus()
		return status == "up" && queued == 0 && f.lines("ERROR", "store outage over") == 1
	})

	page, err := f.st.ListAudit(ctx, store.AuditQuery{Limit: store.MaxLimit})
	if err != nil {
		t.Fatal(err)
	}
	byAction, byTarget := map[string]int{}, map[string]int{}
	for _, e := range page.Entries {
		byAction[e.Action]++
		byTarget[e.Action+" "+e.Target]++
	}
	for _, action := range []string{ActionConnect, ActionLogin, ActionLogout, ActionRefused} {
		if byAction[action] != 1 {
			t.Errorf("%d %s entries, want 1: %v", byAction[action], action, byTarget)
		}
	}
	for _, key := range []string{"start T-new", "kill T1", "pause T1", "fork T1 -> T-fork"} {
		if byTarget[key] != 1 {
			t.Errorf("%q is in the audit log %d times, want once: %v", key, byTarget[key], byTarget)
		}
	}
	if page.Total != 8 {
		t.Errorf("%d audit entries, want 8: %v", page.Total, byTarget)
	}
	for id, status := range map[string]string{"T1": "completed", "T2": "failed"} {
		if th, err := f.st.GetThread(ctx, "laptop", id); err != nil || th.Status != status {
			t.Errorf("thread %s after the outage: %+v %v, want %s", id, th, err, status)
		}
	}
	ms, err := f.st.ListMachines(ctx)
	if err != nil || len(ms) != 1 || ms[0].LastSeen.Before(left.Add(-time.Millisecond)) || !ms[0].LastSeen.Before(back) {
		t.Errorf("laptop's last seen %v: want when it left during the outage (%v), not when the store came back (%v); %v", ms, left, back, err)
	}
	if n := f.lines("ERROR", "store outage: the database does not answer"); n != 1 {
		t.Errorf("%d ERROR lines for the outage's start, want 1", n)
	}
	var over struct {
		Queued, Written, Dropped int
		Lasted                   string
	}
	for _, l := range strings.Split(f.logs.String(), "\n") {
		if strings.Contains(l, `"msg":"store outage over`) {
			_ = json.Unmarshal([]byte(l), &over) // checked below
		}
	}
	if over.Queued < queuedBeforeLeaving+1 || over.Written < over.Queued || over.Dropped != 0 || over.Lasted == "" {
		t.Errorf("the outage's end line: %+v", over)
	}
	if n := f.lines("ERROR", "store failed a request"); n != 0 {
		t.Errorf("%d lines for single requests", n)
	}
}

// Every route that needs the store answers alike while it does not
// answer: 503, Retry-After, and {"error": what failed, "reason":
// "store-unavailable"}; the machine list is the one that answers from
// memory instead, saying so. One ERROR line for the outage, none per
// request; each refusal counted.
func TestEveryRouteThatNeedsTheStoreAnswers503WhileItIsDown(t *testing.T) {
	t.Parallel()
	var connectorToken string
	f := newOutageFixture(t, func(st store.Store) {
		a, err := auth.New([]byte(strings.Repeat("k", 32)), "shared-secret") // the fixture's key
		if err != nil {
			t.Fatal(err)
		}
		var rec store.Token
		connectorToken, rec, err = a.Mint(auth.RoleConnector, "newbox", time.Hour, "")
		if err != nil {
			t.Fatal(err)
		}
		if err := st.CreateToken(context.Background(), rec); err != nil {
			t.Fatal(err)
		}
	})
	ctx := context.Background()
	if _, err := f.st.TouchMachine(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	unseen, _, err := f.auth.Mint(auth.RoleDashboard, "", time.Hour, "recorded nowhere yet")
	if err != nil {
		t.Fatal(err)
	}
	f.pg.Stop(t)
	wsHeaders := map[string]string{"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13", "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
		"Sec-WebSocket-Protocol": "uncaged-workflow.h2", "Authorization": "Bearer " + connectorToken}
	for _, r := range []struct {
		name, method, path, token, body string
		headers                         map[string]string
	}{
		{"the fleet's search", "GET", "/api/gateway/threads?q=deploy", f.dash, "", nil},
		{"the fleet's glance", "GET", "/api/gateway/stats?by=workflow", f.dash, "", nil},
		{"the audit log", "GET", "/api/gateway/audit", f.dash, "", nil},
		{"the inbox", "GET", "/api/gateway/inbox?assignee=ann", f.dash, "", nil},
		{"an offline machine's remembered threads", "GET", "/api/clients/gone/threads", f.dash, "", nil},
		{"an action on an offline machine", "POST", "/api/clients/gone/threads/T1/kill", f.dash, "", nil},
		{"a machine nobody may remember", "GET", "/api/clients/nobody/threads", f.dash, "", nil},
		{"a token the gateway has not seen", "GET", "/api/gateway/endpoints", unseen, "", nil},
		{"a login with a token the gateway has not seen", "POST", "/api/gateway/login", "", `{"token":"` + unseen + `"}`, nil},
		{"an original client's registration", "POST", "/api/gateway/register", "", `{"name":"old","url":"http://x","secret":"shared-secret","clientToken":"t"}`, nil},
		{"an original client's unregistration", "DELETE", "/api/gateway/register/old", "shared-secret", "", nil},
		{"a connector token's first connection", "GET", "/ws/connect?name=newbox", "", "", wsHeaders},
	} {
		t.Run(r.name, func(t *testing.T) {
			req, err := http.NewRequest(r.method, f.srv.URL+r.path, strings.NewReader(r.body))
			if err != nil {
				t.Fatal(err)
			}
			if r.token != "" {
				req.Header.Set("Authorization", "Bearer "+r.token)
			}
			for k, v := range r.headers {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var body struct{ Error, Reason string }
			if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
				t.Fatalf("%d, not JSON: %v", resp.StatusCode, err)
			}
			if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != storeRetryAfter ||
				body.Reason != ReasonStoreUnavailable || !strings.Contains(body.Error, "store does not answer") {
				t.Fatalf("%d Retry-After %q %+v", resp.StatusCode, resp.Header.Get("Retry-After"), body)
			}
		})
	}
	resp, body := f.do("GET", "/api/gateway/machines", f.dash, nil)
	if resp.StatusCode != 200 || !strings.Contains(body, `"degraded"`) {
		t.Fatalf("machines while the store is down: %d %s", resp.StatusCode, body)
	}
	// The endpoints list answers from presence, as the dashboard polls it:
	// each listing is no log line of its own.
	for range 5 {
		if resp, body := f.do("GET", "/api/gateway/endpoints", f.dash, nil); resp.StatusCode != 200 {
			t.Fatalf("endpoints while the store is down: %d %s", resp.StatusCode, body)
		}
	}
	if n := f.lines("WARN", ""); n != 0 {
		t.Errorf("%d WARN lines during the outage; it is one ERROR line:\n%s", n, f.logs.String())
	}
	_, metrics := f.do("GET", "/metrics", "", nil)
	if !strings.Contains(metrics, fmt.Sprintf("uncaged_gateway_store_requests_refused_total %d\n", 12)) {
		t.Errorf("refusals not counted:\n%s", metrics)
	}
	if n := f.lines("ERROR", "store outage: the database does not answer"); n != 1 {
		t.Errorf("%d ERROR lines for one outage:\n%s", n, f.logs.String())
	}
	if n := strings.Count(f.logs.String(), `"msg":"store failed a request"`); n != 0 {
		t.Errorf("%d lines for single requests:\n%s", n, f.logs.String())
	}
}

// A record's kind is read from its first bytes, as add encodes it.
func TestRecordKindReadsWhatAddEncodes(t *testing.T) {
	t.Parallel()
	for _, r := range []storeRecord{
		{Kind: metrics.StoreKindAudit, Audit: &store.AuditEntry{Action: ActionKill}},
		{Kind: metrics.StoreKindThreads, Machine: "laptop", Threads: []store.Thread{{ID: "T1"}}},
		{Kind: metrics.StoreKindSeen, Names: []string{"laptop"}},
	} {
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		if got := recordKind(b); got != r.Kind {
			t.Errorf("%s read as %q from %.40s", r.Kind, got, b)
		}
	}
	for _, b := range []string{"", "{}", `{"k":"audit`, "not json"} {
		if got := recordKind([]byte(b)); got != "" {
			t.Errorf("%q read as %q", b, got)
		}
	}
}
