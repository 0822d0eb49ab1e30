package e2e

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/uncaged/workflow/shared/testkit"
)

// madeTrigger is `uncaged-gateway trigger create --json`'s answer.
type madeTrigger struct {
	ID, URL, Secret string
}

func createTrigger(t *testing.T, key string, args ...string) madeTrigger {
	t.Helper()
	out := gwCLI(t, key, append(append([]string{"trigger", "create"}, args...), "--json")...)
	var m madeTrigger
	if err := json.Unmarshal([]byte(out), &m); err != nil || m.ID == "" {
		t.Fatalf("trigger create: %v\n%s", err, out)
	}
	return m
}

// githubSign is what GitHub puts in X-Hub-Signature-256, computed here
// independently of the gateway's code.
func githubSign(secret, body string) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(body))
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

// deliverLikeGitHub posts body to addr's hook as GitHub delivers an issues
// event.
func deliverLikeGitHub(t *testing.T, addr, id, body, signature, delivery string) (int, string) {
	t.Helper()
	req, err := http.NewRequest("POST", "http://"+addr+"/hooks/"+id, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "GitHub-Hookshot/044aadd")
	req.Header.Set("X-GitHub-Event", "issues")
	req.Header.Set("X-GitHub-Delivery", delivery)
	if signature != "" {
		req.Header.Set("X-Hub-Signature-256", signature)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// fleetPrompts are the prompts of machine's threads the gateway knows,
// by thread id; an answer that is not the list is an error to wait past.
func (g *gatewayEnv) fleetPrompts(machine string) (map[string]string, error) {
	resp, body := g.do("GET", "/api/gateway/threads?machine="+machine+"&limit=100", "")
	var page struct {
		Threads []struct{ ThreadID, Prompt string }
	}
	if resp.StatusCode != 200 || json.Unmarshal([]byte(body), &page) != nil {
		return nil, fmt.Errorf("fleet threads of %s: %d %s", machine, resp.StatusCode, body)
	}
	out := map[string]string{}
	for _, th := range page.Threads {
		out[th.ThreadID] = th.Prompt
	}
	return out, nil
}

// threadCount is how many threads machine's root lists.
func threadCount(t *testing.T, root string) int {
	t.Helper()
	r := run(t, root, "thread", "list", "--json")
	var rows []struct{ ThreadID string }
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &rows) != nil {
		t.Fatalf("thread list --json: %+v", r)
	}
	return len(rows)
}

// triggerRun is one run as the API shows it.
type triggerRun struct{ ID, State, ThreadID, Error, ScheduledFor string }

// triggerRuns are a trigger's runs through the API, newest first.
func (g *gatewayEnv) triggerRuns(id string) []triggerRun {
	g.t.Helper()
	runs, err := g.tryTriggerRuns(id)
	if err != nil {
		g.t.Fatal(err)
	}
	return runs
}

// tryTriggerRuns is triggerRuns for a wait: an answer that is not the
// list is an error to wait past.
func (g *gatewayEnv) tryTriggerRuns(id string) ([]triggerRun, error) {
	resp, body := g.do("GET", "/api/gateway/triggers/"+id+"/runs?limit=100", "")
	var page struct{ Runs []triggerRun }
	if resp.StatusCode != 200 || json.Unmarshal([]byte(body), &page) != nil {
		return nil, fmt.Errorf("runs of %s: %d %s", id, resp.StatusCode, body)
	}
	return page.Runs, nil
}

// A webhook signed as GitHub signs starts a thread on a connected machine
// with the prompt its template makes of the issue; a bad signature starts
// nothing; the same delivery again starts nothing more. A trigger for a
// machine that is offline queues its run; the gateway restarts; the
// machine connects and exactly one thread starts.
func TestTriggersStartThreadsThroughTheGateway(t *testing.T) {
	t.Parallel()
	g := startGateway(t)
	_, root := g.connector("build-box", map[string]string{"plan-code-review": "linear.esm.js"})
	hook := createTrigger(t, g.key, "--machine", "build-box", "--workflow", "plan-code-review", "--webhook",
		"--prompt", "Fix #{{.issue.number}}: {{.issue.title}}", "--note", "issues labelled agent")
	if !strings.HasSuffix(hook.URL, "/hooks/"+hook.ID) || len(hook.Secret) != 64 {
		t.Fatalf("trigger %+v", hook)
	}
	issue := `{"action":"labeled","issue":{"number":12,"title":"Greet the world"},"label":{"name":"agent"}}`

	if code, body := deliverLikeGitHub(t, g.addr, hook.ID, issue, githubSign("not the secret", issue), "11111111-aaaa"); code != http.StatusUnauthorized {
		t.Fatalf("a bad signature: %d %s", code, body)
	}
	if code, body := deliverLikeGitHub(t, g.addr, hook.ID, issue, "", "11111111-bbbb"); code != http.StatusUnauthorized {
		t.Fatalf("no signature: %d %s", code, body)
	}
	code, body := deliverLikeGitHub(t, g.addr, hook.ID, issue, githubSign(hook.Secret, issue), "22222222-cccc")
	if code != http.StatusAccepted || !strings.Contains(body, `"runId":"run_`) {
		t.Fatalf("the delivery: %d %s", code, body)
	}
	testkit.WaitFor(t, "the webhook's thread on build-box", func() error {
		prompts, err := g.fleetPrompts("build-box")
		if err != nil {
			return err
		}
		if len(prompts) != 1 {
			return fmt.Errorf("threads %v", prompts)
		}
		for _, p := range prompts {
			if p != "Fix #12: Greet the world" {
				t.Fatalf("the thread's prompt is %q", p)
			}
		}
		return nil
	})
	// GitHub redelivers with the same id: the same run, nothing started.
	if code, body := deliverLikeGitHub(t, g.addr, hook.ID, issue, githubSign(hook.Secret, issue), "22222222-cccc"); code != http.StatusAccepted || !strings.Contains(body, `"duplicate":true`) {
		t.Fatalf("the redelivery: %d %s", code, body)
	}
	// The thread may be in the fleet before the gateway has recorded the
	// machine's answer.
	testkit.WaitFor(t, "the run recorded as started", func() error {
		runs, err := g.tryTriggerRuns(hook.ID)
		if err != nil {
			return err
		}
		if len(runs) != 1 || runs[0].State != "started" || runs[0].ThreadID == "" {
			return fmt.Errorf("runs %+v", runs)
		}
		return nil
	})
	if n := threadCount(t, root); n != 1 {
		t.Fatalf("build-box has %d threads after a bad signature and a redelivery, want 1", n)
	}

	// A machine that has not connected yet: the run waits, across a
	// restart of the gateway, and starts once when the machine comes.
	late := createTrigger(t, g.key, "--machine", "late-box", "--workflow", "nightly", "--webhook")
	ping := `{"zen":"Keep it logically awesome."}`
	if code, body := deliverLikeGitHub(t, g.addr, late.ID, ping, githubSign(late.Secret, ping), "33333333-dddd"); code != http.StatusAccepted {
		t.Fatalf("the delivery for late-box: %d %s", code, body)
	}
	if runs := g.triggerRuns(late.ID); len(runs) != 1 || runs[0].State != "queued" {
		t.Fatalf("late-box's run %+v", runs)
	}
	g.restart()
	_, lateRoot := g.connector("late-box", map[string]string{"nightly": "linear.esm.js"})
	testkit.WaitFor(t, "late-box's queued run to start", func() error {
		runs, err := g.tryTriggerRuns(late.ID)
		if err != nil {
			return err
		}
		if len(runs) != 1 || runs[0].State != "started" {
			return fmt.Errorf("runs %+v", runs)
		}
		return nil
	})
	if n := threadCount(t, lateRoot); n != 1 {
		t.Fatalf("late-box has %d threads, want 1", n)
	}
	if prompts, err := g.fleetPrompts("late-box"); err == nil && len(prompts) > 1 {
		t.Fatalf("late-box threads %v", prompts)
	}
}

// A schedule fires across a two-replica cluster (PostgreSQL and NATS)
// once per time, not once per replica: every run has its own time, two
// seconds apart, and each started exactly one thread.
func TestScheduleFiresOnceAcrossReplicas(t *testing.T) {
	t.Parallel()
	tc := startClusterOf(t, 2)
	roots, _ := connectThrough(t, tc.key, "http://"+tc.replicas[0].addr, []string{"cron-box"})
	g := &gatewayEnv{t: t, front: tc.replicas[1].addr, dash: tc.dash, client: &http.Client{Timeout: time.Minute}}
	g.waitStatus("cron-box", "online")
	every := createTrigger(t, tc.key, "--machine", "cron-box", "--workflow", "wf-cron-box", "--schedule", "@every 2s",
		"--prompt", "scheduled for {{.scheduledFor}}")
	testkit.WaitFor(t, "four scheduled runs started", func() error {
		all, err := g.tryTriggerRuns(every.ID)
		if err != nil {
			return err
		}
		started := 0
		for _, r := range all {
			if r.State == "started" {
				started++
			}
		}
		if started < 4 {
			return fmt.Errorf("%d started", started)
		}
		return nil
	})
	gwCLI(t, tc.key, "trigger", "pause", every.ID)
	// A run being sent at the pause finishes; one queued just before it
	// waits for the trigger to resume.
	var runs []triggerRun
	testkit.WaitFor(t, "no run being sent", func() error {
		all, err := g.tryTriggerRuns(every.ID)
		if err != nil {
			return err
		}
		runs = runs[:0]
		for _, r := range all {
			switch r.State {
			case "sending":
				return fmt.Errorf("run %+v", r)
			case "started":
				runs = append(runs, r)
			case "queued":
			default:
				t.Fatalf("run %+v", r)
			}
		}
		return nil
	})
	times := map[string]bool{}
	threads := map[string]bool{}
	var sorted []time.Time
	for _, r := range runs {
		if times[r.ScheduledFor] || threads[r.ThreadID] {
			t.Fatalf("a time or a thread twice: %+v", runs)
		}
		times[r.ScheduledFor], threads[r.ThreadID] = true, true
		at, err := time.Parse(time.RFC3339, r.ScheduledFor)
		if err != nil {
			t.Fatalf("scheduledFor %q: %v", r.ScheduledFor, err)
		}
		sorted = append(sorted, at)
	}
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Before(sorted[j]) })
	for i := 1; i < len(sorted); i++ {
		if d := sorted[i].Sub(sorted[i-1]); d%(2*time.Second) != 0 {
			t.Fatalf("runs %s apart: the replicas fired different times (%v)", d, sorted)
		}
	}
	if n := threadCount(t, roots["cron-box"]); n != len(runs) {
		t.Fatalf("cron-box has %d threads for %d started runs", n, len(runs))
	}
}

// The dashboard's Triggers view: a webhook made with its form shows its
// URL and secret once; a delivery signed with that secret, as GitHub
// signs it, starts a thread that the trigger's runs link to.
func TestDashboardTriggers(t *testing.T) {
	t.Parallel()
	exe := chromiumPath(t)
	g := startGateway(t)
	_, root := g.connector("build-box", map[string]string{"plan-code-review": "linear.esm.js"})
	base := dashboardURL(t, g)
	b := newBrowser(t, exe)
	b.logInToDashboard(base, g.dash)
	b.open(base + "/#/triggers")
	b.until("the empty triggers view", `document.querySelector("[data-testid=triggers-empty]")`)
	b.click(`[data-testid=new-trigger]`)
	b.typeInto("#trigger-machine", "build-box")
	b.typeInto("#trigger-workflow", "plan-code-review")
	b.typeInto("#trigger-prompt", "Fix #{{.issue.number}}: {{.issue.title}}")
	b.typeInto("#trigger-note", "issues labelled agent")
	b.click(`[data-testid=trigger-submit]`)
	b.until("the new webhook's URL and secret", `document.querySelector("[data-testid=trigger-created] [data-testid=trigger-secret]")`)
	b.shot("trigger-created")
	id := eval[string](b, `document.querySelector("[data-testid=trigger-created]").dataset.trigger`)
	url := eval[string](b, `document.querySelector("[data-testid=trigger-created] [data-testid=trigger-url]").innerText`)
	secret := eval[string](b, `document.querySelector("[data-testid=trigger-created] [data-testid=trigger-secret]").innerText`)
	if !strings.HasSuffix(url, "/hooks/"+id) || len(secret) != 64 {
		t.Fatalf("the form made %s at %q with secret %q", id, url, secret)
	}
	b.click(`[data-testid=trigger-created-done]`)
	if eval[bool](b, fmt.Sprintf(`document.body.innerText.includes(%q)`, secret)) {
		t.Fatal("the secret is still on the page")
	}

	issue := `{"action":"labeled","issue":{"number":3,"title":"Say hello"}}`
	if code, body := deliverLikeGitHub(t, g.addr, id, issue, githubSign(secret, issue), "44444444-eeee"); code != http.StatusAccepted {
		t.Fatalf("the delivery: %d %s", code, body)
	}
	testkit.WaitFor(t, "the run to start", func() error {
		if runs, err := g.tryTriggerRuns(id); err != nil || len(runs) != 1 || runs[0].State != "started" {
			return fmt.Errorf("runs %+v (%v)", runs, err)
		}
		return nil
	})
	b.reload()
	row := fmt.Sprintf(`tr[data-testid=trigger-row][data-trigger=%q]`, id)
	b.until("the trigger in the list", fmt.Sprintf(`document.querySelector(%q)`, row))
	b.click(row + ` [data-testid=trigger-runs]`)
	b.until("the started run, linked to its thread", `(() => {
		const r = document.querySelector("[data-testid=trigger-runs-panel] [data-testid=run-row][data-state=started]");
		return !!r && !!r.querySelector("a[href*='/threads/']");
	})()`)
	b.shot("triggers")
	if n := threadCount(t, root); n != 1 {
		t.Fatalf("build-box has %d threads, want 1", n)
	}

	// Rotated from its row, keeping the old secret for a day: the new one
	// is shown once, both sign deliveries the gateway takes, and the row
	// says until when the old one is accepted.
	b.click(row + ` [data-testid=trigger-rotate]`)
	b.click(`[role=dialog] [data-testid=confirm]`)
	b.until("the webhook's new secret", `document.querySelector("[data-testid=trigger-rotated] [data-testid=trigger-secret]") && document.querySelector("[data-testid=trigger-old-secret]")`)
	b.shot("trigger-rotated")
	rotated := eval[string](b, `document.querySelector("[data-testid=trigger-rotated] [data-testid=trigger-secret]").innerText`)
	if len(rotated) != 64 || rotated == secret {
		t.Fatalf("the rotated secret %q (was %q)", rotated, secret)
	}
	b.click(`[data-testid=trigger-rotated-done]`)
	b.until("the row to say until when the old secret works", fmt.Sprintf(`!document.querySelector("[data-testid=trigger-rotated]") && document.querySelector(%q)`, row+` [data-testid=trigger-previous-until]`))
	for i, sig := range []string{secret, rotated} {
		ping := fmt.Sprintf(`{"action":"opened","issue":{"number":%d,"title":"after the rotation"}}`, 10+i)
		if code, body := deliverLikeGitHub(t, g.addr, id, ping, githubSign(sig, ping), fmt.Sprintf("5555555%d-ffff", i)); code != http.StatusAccepted {
			t.Fatalf("a delivery signed with the %s secret after the rotation: %d %s", []string{"old", "new"}[i], code, body)
		}
	}
}
