package e2e

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/uncaged/workflow/shared/testkit"
)

// webhookReceiver is a local HTTP receiver of the gateway's notifications:
// it checks each one's signature as a receiver would, and, when flaky,
// answers 500 to the first two attempts of every delivery.
type webhookReceiver struct {
	t      *testing.T
	secret string
	flaky  bool

	mu       sync.Mutex
	attempts map[string]int // by X-Uncaged-Delivery
	got      []receivedNotification
}

type receivedNotification struct {
	Delivery string `json:"-"` // X-Uncaged-Delivery
	Attempt  int    `json:"-"`
	Status   string `json:"status"`
	Thread   string `json:"thread"`
	Machine  string `json:"machine"`
	Workflow string `json:"workflow"`
	Question string `json:"question"`
}

func newWebhookReceiver(t *testing.T, secret string, flaky bool) (*webhookReceiver, string) {
	r := &webhookReceiver{t: t, secret: secret, flaky: flaky, attempts: map[string]int{}}
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	return r, srv.URL + "/hook"
}

func (r *webhookReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	mac := hmac.New(sha256.New, []byte(r.secret))
	mac.Write(body)
	want := "sha256=" + hex.EncodeToString(mac.Sum(nil))
	if got := req.Header.Get("X-Uncaged-Signature"); !hmac.Equal([]byte(got), []byte(want)) {
		r.t.Errorf("a notification whose signature does not verify: %q, want %q", got, want)
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	id := req.Header.Get("X-Uncaged-Delivery")
	r.mu.Lock()
	defer r.mu.Unlock()
	r.attempts[id]++
	if r.flaky && r.attempts[id] <= 2 {
		http.Error(w, "try again later", http.StatusInternalServerError)
		return
	}
	n := receivedNotification{Delivery: id, Attempt: r.attempts[id]}
	if err := json.Unmarshal(body, &n); err != nil {
		r.t.Errorf("a notification that is not JSON: %s", body)
	}
	r.got = append(r.got, n)
}

// received returns the notifications taken so far.
func (r *webhookReceiver) received() []receivedNotification {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]receivedNotification(nil), r.got...)
}

// find returns the first notification of thread with status, if any.
func (r *webhookReceiver) find(thread, status string) (receivedNotification, bool) {
	for _, n := range r.received() {
		if n.Thread == thread && n.Status == status {
			return n, true
		}
	}
	return receivedNotification{}, false
}

type inboxLine struct {
	Machine, ThreadID, Workflow, Role, Question, Assignee, Since string
	Online                                                       bool
	Deadline                                                     *string
}

func (g *gatewayEnv) inbox() []inboxLine {
	g.t.Helper()
	resp, body := g.do("GET", "/api/gateway/inbox", "")
	var page struct {
		Threads []inboxLine
		Total   int
	}
	if resp.StatusCode != 200 || json.Unmarshal([]byte(body), &page) != nil {
		g.t.Fatalf("inbox: %d %s", resp.StatusCode, body)
	}
	return page.Threads
}

func (g *gatewayEnv) waitInbox(what string, cond func([]inboxLine) bool) []inboxLine {
	g.t.Helper()
	var lines []inboxLine
	testkit.WaitUntil(g.t, what, func() bool {
		lines = g.inbox()
		return cond(lines)
	})
	return lines
}

// threadStatusVia is a thread's status as the gateway shows the machine's
// thread list.
func (g *gatewayEnv) threadStatusVia(machine, id string) string {
	resp, body := g.do("GET", "/api/clients/"+machine+"/threads/"+id, "")
	var d struct{ Records []map[string]any }
	if resp.StatusCode != 200 || json.Unmarshal([]byte(body), &d) != nil || len(d.Records) == 0 {
		return ""
	}
	s, _ := d.Records[0]["status"].(string)
	return s
}

// TestAPersonInTheLoopThroughTheGateway runs a workflow whose approve role
// a person plays, on a connector behind the gateway, with real binaries:
// the wait shows in the inbox and survives the engine host and the gateway
// stopping; a wrong answer is refused; it is answered from the command
// line once and from the dashboard once; the answerers are recorded; and
// webhooks report the wait and the end, signed, a failing receiver getting
// its notification on the third attempt.
func TestAPersonInTheLoopThroughTheGateway(t *testing.T) {
	t.Parallel()
	exe := chromiumPath(t)
	secret := "s3cret-for-the-receivers"
	secretFile := filepath.Join(t.TempDir(), "notify-secret")
	if err := os.WriteFile(secretFile, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	good, goodURL := newWebhookReceiver(t, secret, false)
	flaky, flakyURL := newWebhookReceiver(t, secret, true)
	g := startGateway(t, "--notify-url", goodURL, "--notify-url", flakyURL, "--notify-secret-file", secretFile, "--notify-on", "waiting,completed")
	_, root := g.connector("laptop", map[string]string{"approval": "approval.esm.js"})

	id := g.startThread("laptop", "approval", "add a greeting")
	lines := g.waitInbox("the thread in the inbox", func(l []inboxLine) bool { return len(l) == 1 && l[0].ThreadID == id })
	if l := lines[0]; l.Machine != "laptop" || !l.Online || l.Workflow != "approval" || l.Role != "approve" ||
		l.Question != "Ship this plan?" || l.Assignee != "reviewers" || l.Deadline == nil {
		t.Fatalf("inbox line %+v", l)
	}
	testkit.WaitUntil(t, "the waiting notification", func() bool {
		n, ok := good.find(id, "waiting")
		return ok && n.Machine == "laptop" && n.Workflow == "approval" && n.Question == "Ship this plan?"
	})

	// A wrong answer is refused field by field; the thread keeps waiting.
	resp, body := g.do("POST", "/api/clients/laptop/threads/"+id+"/answer", `{"answer":{"status":"maybe"}}`)
	if resp.StatusCode != 400 || !strings.Contains(body, `"path":"/status"`) {
		t.Fatalf("a wrong answer: %d %s", resp.StatusCode, body)
	}
	if s := g.threadStatusVia("laptop", id); s != "waiting" {
		t.Fatalf("after a wrong answer the thread is %q", s)
	}

	// The engine host and the gateway stop while it waits: still waiting,
	// still in the inbox.
	if r := run(t, root, "engine", "stop", "--force"); r.code != 0 {
		t.Fatalf("engine stop --force: %+v", r)
	}
	if s := show(t, root, id).Status; s != "waiting" {
		t.Fatalf("with no engine host the thread is %q, want waiting", s)
	}
	g.restart()
	g.waitStatus("laptop", "online")
	g.waitInbox("the thread in the inbox after the restarts", func(l []inboxLine) bool { return len(l) == 1 && l[0].ThreadID == id && l[0].Online })

	// From the command line: rejected, so the planner plans again and the
	// person is asked again.
	r := run(t, root, "thread", "answer", id, "--json", `{"status":"rejected","note":"smaller steps"}`)
	if r.code != 0 || !strings.Contains(r.stdout, "answered thread "+id+" (role approve) as ") {
		t.Fatalf("thread answer: %+v", r)
	}
	testkit.WaitUntil(t, "the second question", func() bool {
		s := show(t, root, id)
		return s.Status == "waiting" && roles(s) == "planner,approve,planner"
	})
	g.waitInbox("the second question in the inbox", func(l []inboxLine) bool { return len(l) == 1 && l[0].ThreadID == id })

	// From the dashboard's inbox.
	b := newBrowser(t, exe)
	b.open(dashboardURL(t, g) + "/#/")
	b.until("the login form", `document.querySelector("#token")`)
	b.do("logging in", typeKeys("#token", g.dash), chromedp.Click(chromedp.CSS(`button[type=submit]`)))
	b.until("one thread waiting, in the header", `(document.querySelector("[data-testid=inbox-count]") || {}).innerText?.startsWith("1")`)
	b.click(`[data-testid=inbox-link]`)
	row := fmt.Sprintf(`tr[data-testid=inbox-row][data-thread=%q]`, id)
	b.until("the thread in the inbox view", fmt.Sprintf(`document.querySelector(%q) && document.querySelector(%q).dataset.online === "true"`, row, row))
	b.shot("inbox")
	b.click(row + ` [data-testid=inbox-expand]`)
	b.click(`[data-testid=answer-form] [data-field=status] [data-testid=answer-choice][data-value=approved]`)
	b.do("typing a note", typeKeys(`[data-testid=answer-form] [data-field=note] [name=note]`, "ship it"))
	b.shot("answer-form")
	b.click(`[data-testid=answer-submit]`)
	b.until("the answer taken", `document.querySelector("[data-testid=answered], [data-testid=inbox-last]")`)

	s := finished(t, root, id)
	if s.Status != "completed" || roles(s) != "planner,approve,planner,approve,ship" {
		t.Fatalf("thread %+v (roles %s)", s, roles(s))
	}
	if s.Steps[1].Content != `{"status":"rejected","note":"smaller steps"}` || s.Steps[3].Content != `{"status":"approved","note":"ship it"}` ||
		!strings.Contains(s.Steps[4].Content, `"shipped":"ship it"`) {
		t.Fatalf("steps %+v", s.Steps)
	}
	// The last answer is the dashboard user's, through the gateway.
	resp, body = g.do("GET", "/api/clients/laptop/threads/"+id+"/question", "")
	var q struct {
		Answered   bool
		AnsweredBy string
	}
	if resp.StatusCode != 200 || json.Unmarshal([]byte(body), &q) != nil || !q.Answered || !strings.HasSuffix(q.AnsweredBy, " via gateway") {
		t.Fatalf("the question after the dashboard's answer: %d %s", resp.StatusCode, body)
	}
	// A second answer is refused, naming who answered.
	resp, body = g.do("POST", "/api/clients/laptop/threads/"+id+"/answer", `{"answer":{"status":"rejected"}}`)
	if resp.StatusCode != 409 || !strings.Contains(body, q.AnsweredBy) {
		t.Fatalf("a second answer: %d %s", resp.StatusCode, body)
	}
	g.waitInbox("the inbox to empty", func(l []inboxLine) bool { return len(l) == 0 })
	// Answers made through the gateway are audited: the wrong one and the
	// dashboard's (the command line's went to the machine directly).
	if _, total := g.audit("?action=answer&machine=laptop"); total < 2 {
		t.Fatalf("%d audit entries for answers through the gateway, want the wrong one and the dashboard's", total)
	}

	testkit.WaitUntil(t, "the completed notification", func() bool { _, ok := good.find(id, "completed"); return ok })
	// The receiver that failed twice gets the first notification on the
	// third attempt (its retries wait 30 s, then a minute).
	testkit.WaitUntil(t, "the failing receiver's third attempt", func() bool {
		n, ok := flaky.find(id, "waiting")
		return ok && n.Attempt == 3
	})
}
