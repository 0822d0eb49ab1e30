package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/uncaged/workflow/gateway/auth"
	"github.com/uncaged/workflow/gateway/legacy"
	"github.com/uncaged/workflow/gateway/metrics"
	"github.com/uncaged/workflow/gateway/store"
	"github.com/uncaged/workflow/shared/testkit"
)

// connectorAnswers answers like a connector's REST API for the routes the
// audit log reads an answer from; resume is refused.
func connectorAnswers() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.Method == "POST" && r.URL.Path == "/api/threads":
			w.WriteHeader(http.StatusCreated)
			fmt.Fprint(w, `{"threadId":"T-new"}`)
		case strings.HasSuffix(r.URL.Path, "/fork"):
			w.WriteHeader(http.StatusCreated)
			fmt.Fprint(w, `{"threadId":"T-fork"}`)
		case strings.HasSuffix(r.URL.Path, "/rollback"):
			fmt.Fprint(w, `{"name":"solve","hash":"h-old","timestamp":1}`)
		case r.Method == "POST" && r.URL.Path == "/api/cas":
			w.WriteHeader(http.StatusCreated)
			fmt.Fprint(w, `{"hash":"h-put"}`)
		case strings.HasSuffix(r.URL.Path, "/resume"):
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"error":"not paused"}`)
		default:
			fmt.Fprint(w, `{"ok":true}`)
		}
	})
}

// auditPage is GET /api/gateway/audit's answer.
type auditPage struct {
	Entries []auditEntryJSON `json:"entries"`
	Total   int              `json:"total"`
}

func (f *fixture) audit(query string) auditPage {
	f.t.Helper()
	resp, body := f.do("GET", "/api/gateway/audit"+query, f.dash, nil)
	var p auditPage
	if resp.StatusCode != 200 || json.Unmarshal([]byte(body), &p) != nil || p.Entries == nil {
		f.t.Fatalf("audit%s: %d %s", query, resp.StatusCode, body)
	}
	return p
}

// waitAudit waits for n entries to be written (they are written behind
// the requests).
func (f *fixture) waitAudit(n int) auditPage {
	f.t.Helper()
	var p auditPage
	testkit.WaitUntil(f.t, fmt.Sprintf("%d audit entries", n), func() bool { p = f.audit("?limit=1000"); return p.Total >= n })
	if p.Total != n {
		f.t.Fatalf("%d audit entries, want %d: %+v", p.Total, n, p.Entries)
	}
	return p
}

func (f *fixture) doFrom(method, path, token, forwardedFor string, body io.Reader) (*http.Response, string) {
	f.t.Helper()
	req, _ := http.NewRequest(method, f.srv.URL+path, body)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("X-Forwarded-For", forwardedFor)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// TestAuditRecordsProxiedChanges: every change proxied to a connector is
// an entry with who, from where, the machine, the target and the status;
// reads are not recorded, and no query string or credential is kept.
func TestAuditRecordsProxiedChanges(t *testing.T) {
	t.Parallel()
	st := openSQLite(t, t.TempDir())
	t.Cleanup(func() { _ = st.Close() })
	f := newStoreFixture(t, st, testRegistrationKey, func(o *Options) { o.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")} })
	f.connector("laptop", connectorAnswers())
	dashP, err := f.auth.Verify(f.dash, auth.RoleDashboard, "")
	if err != nil {
		t.Fatal(err)
	}
	requests := []struct {
		method, path, token string
		action, target      string
		status              int
	}{
		{"POST", "/api/clients/laptop/threads?key=" + url.QueryEscape(f.dash), f.dash, ActionStart, "T-new", 201},
		{"POST", "/api/clients/laptop/threads/T1/kill", "shared-secret", ActionKill, "T1", 200},
		{"POST", "/api/clients/laptop/threads/T1/pause", f.dash, ActionPause, "T1", 200},
		{"POST", "/api/agents/laptop/threads/T1/resume", f.dash, ActionResume, "T1", 400},
		{"POST", "/api/clients/laptop/threads/T1/fork", f.dash, ActionFork, "T1 -> T-fork", 201},
		{"POST", "/api/clients/laptop/workflows/solve/rollback", f.dash, ActionRollback, "solve@h-old", 200},
		{"DELETE", "/api/clients/laptop/cas/h-gone", f.dash, ActionCASDelete, "h-gone", 200},
		{"POST", "/api/clients/laptop/cas/gc", f.dash, ActionGC, "", 200},
		{"POST", "/api/clients/laptop/cas", f.dash, ActionCASPut, "h-put", 201},
		{"PUT", "/api/clients/laptop/something/new?secret=s", f.dash, ActionOther, "PUT /api/something/new", 200},
		// The gateway's own refusals are changes attempted: recorded too.
		{"POST", "/api/clients/nobody/threads/T9/kill", f.dash, ActionKill, "T9", 404},
	}
	for _, r := range requests {
		if resp, body := f.doFrom(r.method, r.path, r.token, "203.0.113.7", strings.NewReader(`{}`)); resp.StatusCode != r.status {
			t.Fatalf("%s %s: %d %s", r.method, r.path, resp.StatusCode, body)
		}
	}
	// Reads are not changes.
	for _, path := range []string{"/api/clients/laptop/threads", "/api/clients/laptop/cas/h1"} {
		if resp, _ := f.do("GET", path, f.dash, nil); resp.StatusCode != 200 {
			t.Fatalf("GET %s: %d", path, resp.StatusCode)
		}
	}
	// And, first, the connector's connection.
	p := f.waitAudit(len(requests) + 1)
	if e := p.Entries[len(requests)]; e.Action != ActionConnect || e.Machine != "laptop" || e.Status != 101 {
		t.Errorf("the connection's entry: %+v", e)
	}
	for i, r := range requests {
		e := p.Entries[len(requests)-1-i] // newest first
		machine := "laptop"
		if strings.Contains(r.path, "nobody") {
			machine = "nobody"
		}
		wantToken, wantActor := dashP.TokenID, dashP.Note
		if r.token == "shared-secret" {
			wantToken, wantActor = "", store.SharedSecretActor
		}
		if e.Action != r.action || e.Target != r.target || e.Status != r.status || e.Machine != machine ||
			e.Source != "203.0.113.7" || e.TokenID != wantToken || e.Actor != wantActor || e.Time.IsZero() || e.ID == 0 {
			t.Errorf("%s %s: entry %+v", r.method, r.path, e)
		}
	}
	raw, _ := json.Marshal(p)
	if strings.Contains(string(raw), f.dash) || strings.Contains(string(raw), "key=") || strings.Contains(string(raw), "secret=") {
		t.Fatalf("a credential or query string in the audit log: %s", raw)
	}
}

// TestAuditRecordsLoginAndLogout: logins (taken or refused) and logouts
// are entries; the token is named by id, never shown.
func TestAuditRecordsLoginAndLogout(t *testing.T) {
	t.Parallel()
	st := openSQLite(t, t.TempDir())
	t.Cleanup(func() { _ = st.Close() })
	f := newStoreFixture(t, st, testRegistrationKey)
	dashP, _ := f.auth.Verify(f.dash, auth.RoleDashboard, "")
	login := func(token string) int {
		req, _ := http.NewRequest("POST", f.srv.URL+"/api/gateway/login", strings.NewReader(`{"token":"`+token+`"}`))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := login(f.dash); code != 200 {
		t.Fatalf("login: %d", code)
	}
	if code := login("not-a-token"); code != 401 {
		t.Fatalf("refused login: %d", code)
	}
	req, _ := http.NewRequest("POST", f.srv.URL+"/api/gateway/logout", nil)
	req.AddCookie(&http.Cookie{Name: auth.CookieName, Value: f.dash})
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("logout: %v %v", resp, err)
	}
	resp.Body.Close()
	p := f.waitAudit(3)
	want := []auditEntryJSON{
		{Action: ActionLogout, Status: 200, TokenID: dashP.TokenID, Actor: dashP.Note},
		{Action: ActionLogin, Status: 401},
		{Action: ActionLogin, Status: 200, TokenID: dashP.TokenID, Actor: dashP.Note},
	}
	for i, w := range want {
		e := p.Entries[i]
		if e.Action != w.Action || e.Status != w.Status || e.TokenID != w.TokenID || e.Actor != w.Actor || e.Source != "127.0.0.1" {
			t.Errorf("entry %d: %+v, want %+v", i, e, w)
		}
	}
}

// TestAuditQuery: filters and paging, and a bad parameter is refused
// naming it.
func TestAuditQuery(t *testing.T) {
	t.Parallel()
	st := openSQLite(t, t.TempDir())
	t.Cleanup(func() { _ = st.Close() })
	f := newStoreFixture(t, st, testRegistrationKey)
	base := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for i, e := range []store.AuditEntry{
		{Action: ActionKill, Machine: "laptop", Target: "T1", TokenID: "tok-a"},
		{Action: ActionKill, Machine: "ci-box", Target: "T2", TokenID: "tok-b"},
		{Action: ActionFork, Machine: "laptop", Target: "T3"},
		{Action: ActionLogin},
	} {
		e.Time, e.Status, e.Source = base.Add(time.Duration(i)*time.Hour), 200, "10.0.0.1"
		if _, err := st.AppendAudit(context.Background(), e); err != nil {
			t.Fatal(err)
		}
	}
	targets := func(p auditPage) string {
		var out []string
		for _, e := range p.Entries {
			out = append(out, e.Target)
		}
		return strings.Join(out, ",")
	}
	for query, want := range map[string]string{
		"":                            "T3,T2,T1|4",
		"?action=kill":                "T2,T1|2",
		"?machine=laptop":             "T3,T1|2",
		"?action=kill&machine=laptop": "T1|1",
		"?token=tok-b":                "T2|1",
		"?token=tok-c":                "|0",
		"?since=2026-03-01T13:00:00Z": "T3,T2|3",
		"?until=2026-03-01T13:00:00Z": "T1|1",
		"?since=2026-03-01T12:30:00%2B00:00&until=2026-03-01T14:00:00Z": "T2|1",
		"?limit=2":          "T3|4",
		"?limit=2&offset=2": "T2,T1|4",
		"?offset=10":        "|4",
	} {
		p := f.audit(query)
		got := targets(p)
		got = strings.TrimPrefix(got, ",") // the login has no target
		if g := fmt.Sprintf("%s|%d", got, p.Total); g != want {
			t.Errorf("%q: %s, want %s", query, g, want)
		}
	}
	for query, names := range map[string]string{
		"?action=explode":     "action",
		"?machine=Not_A_Name": "machine",
		"?since=yesterday":    "since",
		"?until=1700000000":   "until",
		"?since=2026-03-02T00:00:00Z&until=2026-03-01T00:00:00Z": "until",
		"?limit=0":               "limit",
		"?limit=1001":            "limit",
		"?limit=ten":             "limit",
		"?offset=-1":             "offset",
		"?colour=blue":           "colour",
		"?action=kill&action=gc": "action",
		"?token=eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.c2ln": "token",
		"?token=" + strings.Repeat("x", 129):               "token",
	} {
		resp, body := f.do("GET", "/api/gateway/audit"+query, f.dash, nil)
		var e struct{ Error string }
		if resp.StatusCode != 400 || json.Unmarshal([]byte(body), &e) != nil || !strings.Contains(e.Error, names) {
			t.Errorf("%q: %d %s", query, resp.StatusCode, body)
		}
	}
	// The dashboard's credential is required.
	if resp, _ := f.do("GET", "/api/gateway/audit", "", nil); resp.StatusCode != 401 {
		t.Fatalf("without credentials: %d", resp.StatusCode)
	}
}

// TestAuditWithoutAStore: a gateway that keeps nothing says so.
func TestAuditWithoutAStore(t *testing.T) {
	t.Parallel()
	f := newFixture(t, time.Hour)
	if resp, body := f.do("GET", "/api/gateway/audit", f.dash, nil); resp.StatusCode != 503 || !strings.Contains(body, "keeps nothing") {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
}

// blockingStore holds AppendAudit until release is closed.
type blockingStore struct {
	store.Store
	entered chan struct{}
	release chan struct{}
	once    sync.Once
}

func (s *blockingStore) AppendAudit(ctx context.Context, e store.AuditEntry) (int64, error) {
	s.once.Do(func() { close(s.entered) })
	<-s.release
	return s.Store.AppendAudit(ctx, e)
}

// TestAuditQueueNeverBlocks: with the store stuck and no spill file,
// entries past the memory bound are dropped, logged and counted, never
// waited for; closing flushes what was queued, and an entry after the
// close is dropped too.
func TestAuditQueueNeverBlocks(t *testing.T) {
	t.Parallel()
	st := openSQLite(t, t.TempDir())
	t.Cleanup(func() { _ = st.Close() })
	bs := &blockingStore{Store: st, entered: make(chan struct{}), release: make(chan struct{})}
	var logs testkit.Buffer
	at := time.Date(2026, 1, 2, 3, 4, 5, 600000000, time.UTC)
	entry := func(target string) store.AuditEntry {
		return store.AuditEntry{Action: ActionKill, Target: target, Time: at}
	}
	// Each entry's record is the same size: memory holds two and a half.
	probe := entry("first")
	probe.Key = newAuditKey()
	rec, err := json.Marshal(storeRecord{Kind: metrics.StoreKindAudit, Audit: &probe, At: at})
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, time.Hour, func(o *Options) {
		o.Store, o.Logger, o.SpoolMemory = bs, slog.New(slog.NewTextHandler(&logs, nil)), int64(len(rec)*5/2)
	})
	a := f.gw.audit
	a.add(entry("first"))
	<-bs.entered           // the writer holds the first (in memory until written)
	a.add(entry("second")) // queued
	a.add(entry("third"))  // dropped
	if n := counterValue(a.dropped.WithLabelValues(auditDropFull)); n != 1 {
		t.Fatalf("dropped: %v", n)
	}
	if !strings.Contains(logs.String(), `msg="audit entry lost" reason=queue_full action=kill machine="" target=third`) {
		t.Fatalf("logs: %s", logs.String())
	}
	close(bs.release)
	if err := f.gw.closeAudit(context.Background()); err != nil {
		t.Fatal(err)
	}
	a.add(entry("late"))
	if n := counterValue(a.dropped.WithLabelValues(auditDropClosed)); n != 1 {
		t.Fatalf("dropped after close: %v", n)
	}
	page, err := st.ListAudit(context.Background(), store.AuditQuery{})
	if err != nil || page.Total != 2 || page.Entries[0].Target != "second" || page.Entries[1].Target != "first" {
		t.Fatalf("written: %+v %v", page, err)
	}
}

func counterValue(c prometheus.Counter) float64 {
	var m dto.Metric
	_ = c.Write(&m) // a counter always writes
	return m.GetCounter().GetValue()
}

func TestCleanTarget(t *testing.T) {
	t.Parallel()
	jwt := "eyJhbGciOiJIUzI1NiJ9.eyJyb2xlIjoiZGFzaGJvYXJkIn0.c2ln"
	for in, want := range map[string]string{
		"T1":                     "T1",
		jwt:                      "[redacted]",
		"x" + jwt:                "[redacted]",
		strings.Repeat("a", 300): strings.Repeat("a", maxTarget),
	} {
		if got := cleanTarget(in); got != want {
			t.Errorf("cleanTarget(%.20q) = %.20q", in, got)
		}
	}
}

func TestProxiedAction(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ method, path, action, target string }{
		{"GET", "threads", "", ""},
		{"HEAD", "threads", "", ""},
		{"OPTIONS", "threads", "", ""},
		{"POST", "threads", ActionStart, ""},
		{"POST", "threads/T1/kill", ActionKill, "T1"},
		{"POST", "threads/T1/explode", ActionOther, "POST /api/threads/T1/explode"},
		{"DELETE", "threads/T1", ActionOther, "DELETE /api/threads/T1"},
		{"POST", "workflows/w/rollback", ActionRollback, "w"},
		{"DELETE", "cas/h", ActionCASDelete, "h"},
		{"POST", "cas/gc", ActionGC, ""},
	} {
		if a, tg, _ := proxiedAction(c.method, c.path); a != c.action || tg != c.target {
			t.Errorf("%s %s: %q %q", c.method, c.path, a, tg)
		}
	}
	if got := connectorPath("/api/clients/laptop/threads/T1/kill/", "laptop"); got != "threads/T1/kill" {
		t.Errorf("connectorPath: %q", got)
	}
}

// TestRunFlushesTheAuditLog: entries of requests answered just before the
// gateway stops are in the store once Run has returned, and Run keeps the
// registrations in the data directory (sealed with its own key there).
func TestRunFlushesTheAuditLog(t *testing.T) {
	t.Parallel()
	signingKey := []byte(strings.Repeat("k", 32))
	a, err := auth.New(signingKey, "shared-secret")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ran := make(chan error, 1)
	go func() {
		ran <- Run(ctx, Config{Options: Options{Auth: a}, Listener: ln, Store: store.Config{DataDir: dir}, SigningKey: signingKey})
	}()
	base := "http://" + ln.Addr().String()
	testkit.WaitUntil(t, "the gateway to answer", func() bool {
		resp, err := http.Get(base + "/healthz")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil && resp.StatusCode == 200
	})
	resp, err := http.Post(base+"/api/gateway/register", "application/json",
		strings.NewReader(`{"name":"old","url":"http://x","secret":"shared-secret","clientToken":"ct"}`))
	if err != nil || resp.StatusCode != 201 {
		t.Fatalf("register: %v %v", resp, err)
	}
	resp.Body.Close()
	for range 20 {
		resp, err := http.Post(base+"/api/gateway/logout", "application/json", nil)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("logout: %v %v", resp, err)
		}
		resp.Body.Close()
	}
	cancel()
	if err := <-ran; err != nil {
		t.Fatal(err)
	}
	st := openSQLite(t, dir)
	defer func() { _ = st.Close() }()
	page, err := st.ListAudit(context.Background(), store.AuditQuery{Action: ActionLogout})
	if err != nil || page.Total != 20 {
		t.Fatalf("after Run: %d entries, %v", page.Total, err)
	}
	key := RegistrationKeyFrom(signingKey)
	kept, err := st.GetRegistration(context.Background(), "old")
	if err != nil {
		t.Fatal(err)
	}
	if tok, err := legacy.OpenToken(key, "old", kept.TokenSealed); err != nil || tok != "ct" {
		t.Fatalf("kept token: %q %v", tok, err)
	}
}

// A person's answer to a waiting thread is an entry of its own: action
// answer, the machine, the thread, who answered and how it ended; the
// log can be filtered on it.
func TestAuditRecordsAnswer(t *testing.T) {
	t.Parallel()
	f, st := auditedFixture(t)
	f.connector("laptop", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if strings.HasSuffix(r.URL.Path, "/T2/answer") {
			w.WriteHeader(http.StatusConflict)
			fmt.Fprint(w, `{"error":"already answered"}`)
			return
		}
		fmt.Fprint(w, `{"threadId":"T1","answeredBy":"x via gateway","answeredAt":"2026-01-02T03:04:05Z"}`)
	}))
	tok, rec := record(t, f.auth, st, auth.RoleDashboard, "", time.Hour)
	for _, c := range []struct {
		path   string
		status int
	}{{"/api/clients/laptop/threads/T1/answer", 200}, {"/api/agents/laptop/threads/T2/answer", 409}} {
		if resp, body := f.doFrom("POST", c.path, tok, "203.0.113.9", strings.NewReader(`{"answer":{"ok":true}}`)); resp.StatusCode != c.status {
			t.Fatalf("%s: %d %s", c.path, resp.StatusCode, body)
		}
	}
	// Reading the question is no change.
	if resp, _ := f.do("GET", "/api/clients/laptop/threads/T1/question", f.dash, nil); resp.StatusCode != 200 {
		t.Fatalf("question: %d", resp.StatusCode)
	}
	f.waitAudit(3) // and the connection
	p := f.audit("?action=" + ActionAnswer)
	if p.Total != 2 {
		t.Fatalf("answers: %+v", p.Entries)
	}
	for i, want := range []struct {
		target string
		status int
	}{{"T2", 409}, {"T1", 200}} {
		e := p.Entries[i]
		if e.Action != ActionAnswer || e.Machine != "laptop" || e.Target != want.target || e.Status != want.status ||
			e.TokenID != rec.ID || e.Actor != rec.Note || e.Source != "203.0.113.9" {
			t.Errorf("entry %d: %+v", i, e)
		}
	}
	if action, target, _ := proxiedAction("POST", "threads/T9/answer"); action != ActionAnswer || target != "T9" {
		t.Errorf("proxiedAction: %s %s", action, target)
	}
	if action, _, _ := proxiedAction("GET", "threads/T9/question"); action != "" {
		t.Errorf("reading a question is %q", action)
	}
}

// A connection is audited before any request it carries, however soon
// the request comes: the connection's entry is dated before the connector
// is reachable. Here every request is made and audited between the
// connector's attach and its connection's audit — for a first
// connection and for the ones that replace it.
func TestAConnectionIsAuditedBeforeTheRequestsItCarries(t *testing.T) {
	t.Parallel()
	st := openSQLite(t, t.TempDir())
	t.Cleanup(func() { _ = st.Close() })
	f := newStoreFixture(t, st, testRegistrationKey)
	attached, proceed := make(chan struct{}), make(chan struct{})
	hook := func(string) { attached <- struct{}{}; <-proceed }
	f.gw.afterAttach.Store(&hook)
	var want []string
	for i, action := range []string{ActionConnect, ActionReplace, ActionReplace} {
		f.connector("laptop", connectorAnswers())
		<-attached
		if resp, body := f.do("POST", "/api/clients/laptop/threads/T1/kill", f.dash, strings.NewReader(`{}`)); resp.StatusCode != 200 {
			t.Fatalf("a request through the connector just let on: %d %s", resp.StatusCode, body)
		}
		f.waitAudit(len(want) + 1) // the request's entry, queued first
		proceed <- struct{}{}
		want = append(want, action, ActionKill)
		var got []string
		for _, e := range slices.Backward(f.waitAudit(len(want)).Entries) { // oldest first
			got = append(got, e.Action)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("connection %d: the audit log lists %v, oldest first; want %v", i+1, got, want)
		}
	}
}
