package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/uncaged/workflow/gateway/store"
	"github.com/uncaged/workflow/gateway/trigger"
	"github.com/uncaged/workflow/shared/testkit"
)

// startingConnector is a connector's thread API as the triggers use it:
// POST /api/threads starts a thread, once per Idempotency-Key, as the
// real connector does; fail makes the next answers fail after starting
// (a lost answer).
type startingConnector struct {
	mu       sync.Mutex
	started  []startRequest    // every thread started, in order
	byKey    map[string]string // key → thread id
	calls    int
	failNext atomic.Int32
}

type startRequest struct {
	Workflow, Prompt, Key, Thread string
}

func newStartingConnector() *startingConnector {
	return &startingConnector{byKey: map[string]string{}}
}

func (sc *startingConnector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/api/threads" {
		http.NotFound(w, r)
		return
	}
	var body struct{ Workflow, Prompt string }
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		http.Error(w, `{"error":"bad body"}`, http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if body.Workflow == "missing" {
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, `{"error":"workflow not found: missing"}`)
		return
	}
	key := r.Header.Get("Idempotency-Key")
	sc.mu.Lock()
	sc.calls++
	id, seen := sc.byKey[key]
	if !seen || key == "" {
		id = fmt.Sprintf("thread-%d", len(sc.started)+1)
		sc.started = append(sc.started, startRequest{body.Workflow, body.Prompt, key, id})
		if key != "" {
			sc.byKey[key] = id
		}
	}
	sc.mu.Unlock()
	if sc.failNext.Add(-1) >= 0 { // started, but the answer is lost
		w.WriteHeader(http.StatusBadGateway)
		fmt.Fprint(w, `{"error":"the answer was lost"}`)
		return
	}
	fmt.Fprintf(w, `{"threadId":%q}`, id)
}

func (sc *startingConnector) threads() []startRequest {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	return append([]startRequest(nil), sc.started...)
}

// triggerFixture is a gateway with a store and a clock the test moves.
type triggerFixture struct {
	*fixture
	st    store.Store
	clock *movingClock
}

// movingClock is a clock a test sets; safe for the gateway's loops.
type movingClock struct{ ns atomic.Int64 }

func (c *movingClock) now() time.Time      { return time.Unix(0, c.ns.Load()).UTC() }
func (c *movingClock) set(t time.Time)     { c.ns.Store(t.UnixNano()) }
func (c *movingClock) add(d time.Duration) { c.ns.Add(int64(d)) }

func newTriggerFixture(t *testing.T, st store.Store, clock *movingClock) *triggerFixture {
	t.Helper()
	if st == nil {
		var err error
		st, err = store.Open(context.Background(), store.Config{DataDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
	}
	if clock == nil {
		clock = &movingClock{}
		clock.set(time.Now())
	}
	f := newFixture(t, time.Hour, func(o *Options) { o.Store = st; o.triggerClock = clock.now })
	return &triggerFixture{fixture: f, st: st, clock: clock}
}

// create makes a trigger through the API and returns the answer.
func (f *triggerFixture) create(body string) (id, url, secret string) {
	f.t.Helper()
	resp, out := f.do("POST", "/api/gateway/triggers", f.dash, strings.NewReader(body))
	var got struct {
		Trigger TriggerJSON
		URL     string
		Secret  string
	}
	if resp.StatusCode != http.StatusCreated || json.Unmarshal([]byte(out), &got) != nil || got.Trigger.ID == "" {
		f.t.Fatalf("create %s: %d %s", body, resp.StatusCode, out)
	}
	return got.Trigger.ID, got.URL, got.Secret
}

// deliver posts body to the webhook with headers.
func (f *triggerFixture) deliver(id, body string, headers map[string]string) (int, map[string]any) {
	f.t.Helper()
	req, _ := http.NewRequest("POST", f.srv.URL+"/hooks/"+id, strings.NewReader(body))
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

func (f *triggerFixture) runs(id string) []RunJSON {
	f.t.Helper()
	runs, err := f.tryRuns(id)
	if err != nil {
		f.t.Fatal(err)
	}
	return runs
}

// tryRuns is runs for a wait: an answer that is not the list (the store
// busy for a moment) is an error to wait past, not a failure.
func (f *triggerFixture) tryRuns(id string) ([]RunJSON, error) {
	resp, out := f.do("GET", "/api/gateway/triggers/"+id+"/runs", f.dash, nil)
	var got struct{ Runs []RunJSON }
	if resp.StatusCode != 200 || json.Unmarshal([]byte(out), &got) != nil {
		return nil, fmt.Errorf("runs of %s: %d %s", id, resp.StatusCode, out)
	}
	return got.Runs, nil
}

// waitRuns waits until id's runs, oldest first, are in the states given.
func (f *triggerFixture) waitRuns(id string, states ...store.RunState) []RunJSON {
	f.t.Helper()
	var runs []RunJSON
	testkit.WaitFor(f.t, fmt.Sprintf("trigger %s's runs to be %v", id, states), func() error {
		f.gw.triggers.wakeSender()
		var err error
		if runs, err = f.tryRuns(id); err != nil {
			return err
		}
		got := make([]string, len(runs))
		for i, r := range runs {
			got[len(runs)-1-i] = r.State
		}
		if fmt.Sprint(got) != fmt.Sprint(states) {
			return fmt.Errorf("runs %v", got)
		}
		return nil
	})
	for i, j := 0, len(runs)-1; i < j; i, j = i+1, j-1 {
		runs[i], runs[j] = runs[j], runs[i]
	}
	return runs
}

func signed(secret, body, delivery string) map[string]string {
	h := map[string]string{trigger.GitHubSignatureHeader: trigger.Sign(secret, []byte(body)), "Content-Type": "application/json"}
	if delivery != "" {
		h[trigger.GitHubDeliveryHeader] = delivery
	}
	return h
}

// A webhook signed as GitHub signs starts one thread on its machine, with
// the prompt its template makes of the body; the same delivery again
// starts nothing more; every kind of bad delivery is refused and starts
// nothing; the changes are audited.
func TestWebhookStartsAThreadOnce(t *testing.T) {
	t.Parallel()
	f := newTriggerFixture(t, nil, nil)
	sc := newStartingConnector()
	f.connector("build-box", sc)
	id, url, secret := f.create(`{"machine":"build-box","workflow":"plan-code-review","webhook":true,"prompt":"Fix #{{.issue.number}}: {{.issue.title}}","note":"issues"}`)
	if !strings.HasSuffix(url, "/hooks/"+id) || len(secret) != 64 {
		t.Fatalf("url %q secret %q", url, secret)
	}
	body := `{"action":"labeled","issue":{"number":7,"title":"Crash on start"}}`
	code, out := f.deliver(id, body, signed(secret, body, "d-1"))
	if code != http.StatusAccepted || out["runId"] == "" || out["duplicate"] != false {
		t.Fatalf("delivery: %d %v", code, out)
	}
	runs := f.waitRuns(id, store.RunStarted)
	if runs[0].ID != out["runId"] || runs[0].ThreadID != "thread-1" || runs[0].DeliveryID != "d-1" {
		t.Fatalf("run %+v", runs[0])
	}
	if got := sc.threads(); len(got) != 1 || got[0].Prompt != "Fix #7: Crash on start" || got[0].Workflow != "plan-code-review" || got[0].Key != runs[0].ID {
		t.Fatalf("started %+v", got)
	}
	// Redelivered: the same run, nothing started.
	code, again := f.deliver(id, body, signed(secret, body, "d-1"))
	if code != http.StatusAccepted || again["runId"] != out["runId"] || again["duplicate"] != true {
		t.Fatalf("redelivery: %d %v", code, again)
	}

	other := `{"issue":{"number":8,"title":"x"}}`
	wrongSecret := trigger.NewSecret()
	for _, c := range []struct {
		name    string
		id      string
		body    string
		headers map[string]string
		code    int
	}{
		{"no signature", id, other, map[string]string{trigger.GitHubDeliveryHeader: "d-2"}, http.StatusUnauthorized},
		{"another secret", id, other, signed(wrongSecret, other, "d-3"), http.StatusUnauthorized},
		{"another body", id, other, signed(secret, body, "d-4"), http.StatusUnauthorized},
		{"own header, bad", id, other, map[string]string{trigger.SignatureHeader: "sha256=00"}, http.StatusUnauthorized},
		{"unknown trigger", "trg_nosuchtrigger0000000000000", other, signed(secret, other, "d-5"), http.StatusNotFound},
		{"a key the template needs is missing", id, `{"issue":{"title":"x"}}`, signed(secret, `{"issue":{"title":"x"}}`, "d-6"), http.StatusUnprocessableEntity},
		{"not JSON", id, "hello", signed(secret, "hello", "d-7"), http.StatusUnprocessableEntity},
		{"too large", id, strings.Repeat("x", hookMaxBody+1), signed(secret, strings.Repeat("x", hookMaxBody+1), "d-8"), http.StatusRequestEntityTooLarge},
		{"bad delivery id", id, other, signed(secret, other, "has space"), http.StatusBadRequest},
	} {
		if code, out := f.deliver(c.id, c.body, c.headers); code != c.code {
			t.Errorf("%s: %d %v, want %d", c.name, code, out, c.code)
		}
	}
	// Nothing more started, nothing more recorded.
	if got := f.runs(id); len(got) != 1 {
		t.Fatalf("runs after the refusals: %+v", got)
	}
	if got := sc.threads(); len(got) != 1 {
		t.Fatalf("started after the refusals: %+v", got)
	}
	// The secret is never shown again.
	_, list := f.do("GET", "/api/gateway/triggers", f.dash, nil)
	if strings.Contains(list, secret) || !strings.Contains(list, `"url"`) || !strings.Contains(list, "thread-1") {
		t.Fatalf("trigger list: %s", list)
	}
	// Paused: refused, and resumed: taken.
	if resp, out := f.do("POST", "/api/gateway/triggers/"+id+"/pause", f.dash, nil); resp.StatusCode != 200 || !strings.Contains(out, `"paused":true`) {
		t.Fatalf("pause: %d %s", resp.StatusCode, out)
	}
	if code, _ := f.deliver(id, other, signed(secret, other, "d-9")); code != http.StatusConflict {
		t.Fatalf("paused trigger took a delivery: %d", code)
	}
	f.do("POST", "/api/gateway/triggers/"+id+"/resume", f.dash, nil)
	if code, _ := f.deliver(id, other, signed(secret, other, "d-9")); code != http.StatusAccepted {
		t.Fatalf("resumed trigger: %d", code)
	}
	f.waitRuns(id, store.RunStarted, store.RunStarted)
	testkit.WaitFor(t, "the audit of the trigger's life", func() error {
		_, log := f.do("GET", "/api/gateway/audit?limit=100", f.dash, nil)
		for _, action := range []string{ActionTriggerCreate, ActionTriggerPause, ActionTriggerResume, ActionTriggerRun} {
			if !strings.Contains(log, `"action":"`+action+`"`) {
				return fmt.Errorf("no %s in %s", action, log)
			}
		}
		return nil
	})
	if resp, _ := f.do("DELETE", "/api/gateway/triggers/"+id, f.dash, nil); resp.StatusCode != 200 {
		t.Fatalf("delete: %d", resp.StatusCode)
	}
	if code, _ := f.deliver(id, other, signed(secret, other, "d-10")); code != http.StatusNotFound {
		t.Fatalf("a removed trigger's hook: %d", code)
	}
}

// A trigger is created only from a request that says all it needs; a
// bad one is refused with what is wrong and stores nothing.
func TestCreateTriggerRefusesBadRequests(t *testing.T) {
	t.Parallel()
	f := newTriggerFixture(t, nil, nil)
	for _, c := range []struct{ body, want string }{
		{`{"machine":"m","workflow":"w"}`, "webhook, or a schedule"},
		{`{"machine":"m","workflow":"w","webhook":true,"schedule":"* * * * *"}`, "not both"},
		{`{"machine":"m","workflow":"w","schedule":"* * * *"}`, "schedule"},
		{`{"machine":"m","workflow":"w","schedule":"* * * * *","timezone":"Nowhere/City"}`, "time zone"},
		{`{"machine":"m","workflow":"w","schedule":"* * * * *","prompt":"{{.issue.title}}"}`, "template"},
		{`{"machine":"m","workflow":"w","webhook":true,"prompt":"{{.a"}`, "template"},
		{`{"machine":"m","workflow":"w","webhook":true,"expire":"soon"}`, "expire"},
		{`{"machine":"m","workflow":"w","webhook":true,"timezone":"UTC"}`, "schedules"},
		{`{"machine":"m","workflow":"w","webhook":true,"surprise":1}`, "unknown field"},
		{`{"machine":"m","workflow":"w","webhook":true} {}`, "more than one"},
		{`not json`, "body"},
		{`{"machine":"","workflow":"w","webhook":true}`, "machine"},
		{`{"machine":"m","workflow":"","webhook":true}`, "workflow"},
	} {
		resp, out := f.do("POST", "/api/gateway/triggers", f.dash, strings.NewReader(c.body))
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(out, c.want) {
			t.Errorf("%s: %d %s, want 400 with %q", c.body, resp.StatusCode, out, c.want)
		}
	}
	if list, err := f.st.ListTriggers(context.Background()); err != nil || len(list) != 0 {
		t.Fatalf("stored after refusals: %v %v", list, err)
	}
	if resp, _ := f.do("POST", "/api/gateway/triggers", "", strings.NewReader(`{"machine":"m","workflow":"w","webhook":true}`)); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("no credential: %d", resp.StatusCode)
	}
}

// Runs for a machine that is away wait in the store, in order, and start
// when it connects; a run whose answer was lost is sent again under the
// same key and starts no second thread; a run nobody collects in time
// expires; a refused one fails with the machine's reason.
func TestRunsWaitForTheirMachine(t *testing.T) {
	t.Parallel()
	f := newTriggerFixture(t, nil, nil)
	id, _, secret := f.create(`{"machine":"laptop","workflow":"review","webhook":true,"prompt":"{{.n}}","expire":"1h"}`)
	for i := 1; i <= 3; i++ {
		body := fmt.Sprintf(`{"n":%d}`, i)
		if code, out := f.deliver(id, body, signed(secret, body, fmt.Sprint("d", i))); code != http.StatusAccepted {
			t.Fatalf("delivery %d: %d %v", i, code, out)
		}
	}
	f.waitRuns(id, store.RunQueued, store.RunQueued, store.RunQueued)

	sc := newStartingConnector()
	sc.failNext.Store(1) // the first start's answer is lost
	f.connector("laptop", sc)
	runs := f.waitRuns(id, store.RunStarted, store.RunStarted, store.RunStarted)
	got := sc.threads()
	if len(got) != 3 || got[0].Prompt != "1" || got[1].Prompt != "2" || got[2].Prompt != "3" {
		t.Fatalf("started %+v: want 1, 2, 3 in order, once each", got)
	}
	if runs[0].ThreadID != "thread-1" || runs[0].Attempts < 2 {
		t.Fatalf("the lost answer's run: %+v", runs[0])
	}

	// Refused by the machine: failed, with its reason.
	refused, _, refusedSecret := f.create(`{"machine":"laptop","workflow":"missing","webhook":true}`)
	f.deliver(refused, "{}", signed(refusedSecret, "{}", ""))
	if r := f.waitRuns(refused, store.RunFailed); !strings.Contains(r[0].Error, "workflow not found") {
		t.Fatalf("refused run: %+v", r[0])
	}

	// Away too long: expired.
	away, _, awaySecret := f.create(`{"machine":"gone","workflow":"review","webhook":true,"expire":"2h"}`)
	f.deliver(away, "{}", signed(awaySecret, "{}", ""))
	f.waitRuns(away, store.RunQueued)
	f.clock.add(2*time.Hour + time.Second)
	if r := f.waitRuns(away, store.RunExpired); !strings.Contains(r[0].Error, "expired") {
		t.Fatalf("expired run: %+v", r[0])
	}
}

// A schedule of every minute fires once a minute across two gateways
// sharing one store, not twice; a time missed while no gateway ran is run
// once (run-once) or not at all (skip).
func TestScheduleFiresOnceAcrossGateways(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	open := func() store.Store {
		st, err := store.Open(context.Background(), store.Config{DataDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		return st
	}
	clock := &movingClock{}
	clock.set(time.Date(2026, 12, 1, 9, 0, 10, 0, time.UTC))
	a := newTriggerFixture(t, open(), clock)
	b := newTriggerFixture(t, open(), clock)
	sc := newStartingConnector()
	a.connector("nightly-box", sc)
	id, _, _ := a.create(`{"machine":"nightly-box","workflow":"deps","schedule":"* * * * *","prompt":"review {{.scheduledFor}}"}`)
	skipped, _, _ := a.create(`{"machine":"nightly-box","workflow":"deps","schedule":"* * * * *","missed":"skip"}`)
	tick := func() {
		a.gw.triggers.wakeScheduler()
		b.gw.triggers.wakeScheduler()
	}
	for minute := 1; minute <= 3; minute++ {
		clock.set(time.Date(2026, 12, 1, 9, minute, 1, 0, time.UTC))
		testkit.WaitFor(t, fmt.Sprintf("minute %d's run", minute), func() error {
			tick()
			runs, err := a.tryRuns(id)
			if err != nil {
				return err
			}
			if len(runs) != minute || runs[0].State != string(store.RunStarted) {
				return fmt.Errorf("runs %+v", runs)
			}
			return nil
		})
	}
	// Both gateways woke for every minute; each minute ran once.
	for _, r := range a.runs(id) {
		if r.ScheduledFor == nil || !strings.HasSuffix(*r.ScheduledFor, ":00.000Z") {
			t.Fatalf("run %+v", r)
		}
	}
	var prompts []string
	for _, s := range sc.threads() {
		if s.Prompt != "" && strings.HasPrefix(s.Prompt, "review ") {
			prompts = append(prompts, s.Prompt)
		}
	}
	if strings.Join(prompts, "|") != "review 2026-12-01T09:01:00Z|review 2026-12-01T09:02:00Z|review 2026-12-01T09:03:00Z" {
		t.Fatalf("prompts %q", prompts)
	}

	// Ten minutes with no gateway looking: run-once runs the latest, once;
	// skip runs none of them.
	clock.set(time.Date(2026, 12, 1, 9, 13, 45, 0, time.UTC))
	testkit.WaitFor(t, "the missed minutes' one run", func() error {
		tick()
		runs, err := a.tryRuns(id)
		if err != nil {
			return err
		}
		if len(runs) != 4 || runs[0].ScheduledFor == nil || *runs[0].ScheduledFor != "2026-12-01T09:13:00.000Z" {
			return fmt.Errorf("runs %+v", runs)
		}
		return nil
	})
	skips := a.runs(skipped)
	if len(skips) != 3 {
		t.Fatalf("skip ran missed minutes: %+v", skips)
	}
}

// Only what a sender proves spends what others need: bad signatures to
// one webhook, from one address, hold back that address's deliveries to
// that webhook only, and never the webhook's own rate; guessed ids are
// counted apart.
func TestBadDeliveriesHoldBackOnlyTheirSender(t *testing.T) {
	t.Parallel()
	f := newTriggerFixture(t, nil, nil)
	f.connector("build-box", newStartingConnector())
	a, _, _ := f.create(`{"machine":"build-box","workflow":"w","webhook":true}`)
	b, _, secretB := f.create(`{"machine":"build-box","workflow":"w","webhook":true}`)
	body := `{"n":1}`
	codes := map[int]int{}
	for i := 0; i < badSignatureBurst+5; i++ {
		code, _ := f.deliver(a, body, map[string]string{trigger.SignatureHeader: "sha256=" + strings.Repeat("0", 64)})
		codes[code]++
	}
	if codes[http.StatusUnauthorized] != badSignatureBurst || codes[http.StatusTooManyRequests] != 5 {
		t.Fatalf("bad signatures to one webhook: %v, want %d × 401 then 429", codes, badSignatureBurst)
	}
	if ok, _ := f.gw.triggers.perTrigger.peek(a); !ok {
		t.Fatal("unsigned deliveries spent the webhook's own rate")
	}
	// The same address, another webhook, signed: taken.
	if code, out := f.deliver(b, body, signed(secretB, body, "")); code != http.StatusAccepted {
		t.Fatalf("another webhook from the same address: %d %v", code, out)
	}
	// Guesses at ids are counted on their own.
	for i := 0; i < badSignatureBurst; i++ {
		if code, _ := f.deliver(fmt.Sprintf("trg_guess%021d", i), body, nil); code != http.StatusNotFound {
			t.Fatalf("guess %d: %d", i, code)
		}
	}
	if code, _ := f.deliver("trg_guessone", body, nil); code != http.StatusTooManyRequests {
		t.Fatalf("past the guesses' burst: %d", code)
	}
	if code, out := f.deliver(b, body, signed(secretB, body, "")); code != http.StatusAccepted {
		t.Fatalf("a signed delivery after the guesses: %d %v", code, out)
	}
}

// A webhook's secret is replaced through the API and shown once; the old
// one keeps being accepted until the time the rotation chose (a day by
// default), so deliveries go on while the sender is given the new one,
// and not a moment after; a rotation for a leaked secret ends the old one
// at once. What cannot be rotated is refused and changes nothing.
func TestRotateAWebhooksSecret(t *testing.T) {
	t.Parallel()
	f := newTriggerFixture(t, nil, nil)
	f.connector("build-box", newStartingConnector())
	id, _, first := f.create(`{"machine":"build-box","workflow":"deploy","webhook":true}`)
	sched, _, _ := f.create(`{"machine":"build-box","workflow":"nightly","schedule":"0 3 * * *"}`)
	delivery := 0
	deliver := func(secret string) int {
		t.Helper()
		delivery++
		body := fmt.Sprintf(`{"n":%d}`, delivery)
		code, _ := f.deliver(id, body, signed(secret, body, fmt.Sprintf("d-%d", delivery)))
		return code
	}
	rotate := func(body string) (int, TriggerJSON, string) {
		t.Helper()
		var r io.Reader
		if body != "" {
			r = strings.NewReader(body)
		}
		resp, out := f.do("POST", "/api/gateway/triggers/"+id+"/secret", f.dash, r)
		var got struct {
			Trigger TriggerJSON
			Secret  string
		}
		_ = json.Unmarshal([]byte(out), &got)
		return resp.StatusCode, got.Trigger, got.Secret
	}
	listed := func() TriggerJSON {
		t.Helper()
		resp, out := f.do("GET", "/api/gateway/triggers", f.dash, nil)
		var got struct{ Triggers []TriggerJSON }
		if resp.StatusCode != 200 || json.Unmarshal([]byte(out), &got) != nil {
			t.Fatalf("list: %d %s", resp.StatusCode, out)
		}
		for _, tr := range got.Triggers {
			if tr.ID == id {
				return tr
			}
		}
		t.Fatalf("webhook %s not listed: %s", id, out)
		return TriggerJSON{}
	}

	code, tr, second := rotate("")
	until := f.clock.now().Add(trigger.DefaultKeepPrevious)
	if code != 200 || len(second) != 64 || second == first || tr.PreviousSecretUntil == nil || *tr.PreviousSecretUntil != isoTime(until) {
		t.Fatalf("rotation: %d %+v %q", code, tr, second)
	}
	if l := listed(); l.PreviousSecretUntil == nil || *l.PreviousSecretUntil != isoTime(until) {
		t.Fatalf("listed: %+v", l)
	}
	if a, b := deliver(first), deliver(second); a != http.StatusAccepted || b != http.StatusAccepted {
		t.Fatalf("during the day after: old secret %d, new %d; want both accepted", a, b)
	}
	f.clock.set(until)
	if a, b := deliver(first), deliver(second); a != http.StatusUnauthorized || b != http.StatusAccepted {
		t.Fatalf("once the day is over: old secret %d, new %d; want only the new accepted", a, b)
	}
	if l := listed(); l.PreviousSecretUntil != nil {
		t.Fatalf("listed after the previous secret ended: %+v", l)
	}

	// A leak: the old one ends at once.
	code, tr, third := rotate(`{"keepPrevious":"0s"}`)
	if code != 200 || len(third) != 64 || tr.PreviousSecretUntil != nil {
		t.Fatalf("rotation ending the old secret: %d %+v", code, tr)
	}
	if a, b := deliver(second), deliver(third); a != http.StatusUnauthorized || b != http.StatusAccepted {
		t.Fatalf("after a rotation for a leak: old secret %d, new %d", a, b)
	}

	for _, bad := range []struct {
		path, body string
		code       int
	}{
		{id, `{"keepPrevious":"-1s"}`, 400},
		{id, `{"keepPrevious":"721h"}`, 400},
		{id, `{"keepPrevious":"a day"}`, 400},
		{id, `{"keepPrevious":24}`, 400},
		{id, `{"keep":"1h"}`, 400},
		{id, `{"keepPrevious":"1h"} {}`, 400},
		{sched, ``, 400},
		{"trg_aaaaaaaaaaaaaaaaaaaaaaaaaa", ``, 404},
	} {
		var r io.Reader
		if bad.body != "" {
			r = strings.NewReader(bad.body)
		}
		if resp, out := f.do("POST", "/api/gateway/triggers/"+bad.path+"/secret", f.dash, r); resp.StatusCode != bad.code || strings.Contains(out, `"secret"`) {
			t.Errorf("rotate %s with %s: %d %s, want %d", bad.path, bad.body, resp.StatusCode, out, bad.code)
		}
	}
	if b := deliver(third); b != http.StatusAccepted {
		t.Fatalf("refused rotations changed the secret: %d", b)
	}
	// Written behind the answers: waited for.
	testkit.WaitFor(t, "the audit of the two rotations", func() error {
		resp, out := f.do("GET", "/api/gateway/audit?action=trigger-rotate-secret", f.dash, nil)
		if resp.StatusCode != 200 || strings.Count(out, `"trigger-rotate-secret"`) != 2 {
			return fmt.Errorf("audit: %d %s", resp.StatusCode, out)
		}
		return nil
	})
}
