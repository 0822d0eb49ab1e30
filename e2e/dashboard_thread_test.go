package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/uncaged/workflow/engine/storage"
	"github.com/uncaged/workflow/engine/usage"
	"github.com/uncaged/workflow/shared/testkit"
)

// threadViewDetail is GET /api/clients/<m>/threads/<id> through the gateway.
type threadViewDetail struct {
	Records []struct {
		Type       string
		Role       string
		Head       string
		Start      string
		BundleHash string
		StateHash  string
		Status     string
	}
}

// threadViewRecords reads a thread's records through the gateway.
func (g *gatewayEnv) threadViewRecords(t *testing.T, m, id string) threadViewDetail {
	t.Helper()
	var d threadViewDetail
	resp, body := g.do("GET", "/api/clients/"+m+"/threads/"+id, "")
	if resp.StatusCode != 200 || json.Unmarshal([]byte(body), &d) != nil {
		t.Fatalf("thread %s on %s: %d %s", id, m, resp.StatusCode, body)
	}
	return d
}

// openStepGate lets step k of the threads gated on prefix end.
func openStepGate(t *testing.T, prefix string, k int) {
	t.Helper()
	if err := os.WriteFile(fmt.Sprintf("%s.%d", prefix, k), nil, 0o644); err != nil {
		t.Fatal(err)
	}
}

// logInToDashboard opens the dashboard and logs in with the dashboard token.
func (b *browser) logInToDashboard(base, token string) {
	b.t.Helper()
	b.open(base + "/#/")
	b.until("the login form", `document.querySelector("#token")`)
	b.do("logging in", typeKeys("#token", token), chromedp.Click(chromedp.CSS(`button[type=submit]`)))
	b.until("the dashboard", `document.querySelector(".topbar")`)
}

// The thread page: its live head, pause without a question, the timeline,
// the debug log, a deep link to a step, a fork from the second run of a
// role, the bundle link, a killed thread's last words, an offline machine.
func TestDashboardThreadPage(t *testing.T) {
	t.Parallel()
	exe := chromiumPath(t)
	g := startGateway(t)
	dir := t.TempDir()
	_, laptopRoot := g.connector("laptop", map[string]string{"drafts": "drafts.esm.js"})
	ciBox, ciBoxRoot := g.connector("ci-box", map[string]string{"plan-code-review": "linear.esm.js"})
	base := dashboardURL(t, g)
	b := newBrowser(t, exe)
	b.logInToDashboard(base, g.dash)

	// A gated thread: its page follows it step by step.
	gate := filepath.Join(dir, "a")
	id := g.startThread("laptop", "drafts", "gate:"+gate)
	b.open(base + "/#/m/laptop/threads/" + id)
	b.until("the live thread page", `document.querySelector('section[data-status="running"]') && document.querySelector("[data-testid=live-state]").innerText === "● live"`)

	// The head follows the run: after step 1 it is step 1's state, not the start.
	openStepGate(t, gate, 1)
	b.until("step 1's card", `document.querySelectorAll(".rec-role").length === 1`)
	first := g.threadViewRecords(t, "laptop", id).Records
	if len(first) < 2 || first[1].Type != "role" {
		t.Fatalf("records after step 1: %+v", first)
	}
	b.until("the head at step 1's state while the thread runs", fmt.Sprintf(`document.querySelector("[data-testid=head] a").innerText === %q`, first[1].StateHash),
		func() bool { return show(t, laptopRoot, id).Status == "running" })
	if first[1].StateHash == first[0].Start {
		t.Fatalf("step 1's state is the start: %+v", first)
	}
	b.shot("thread-live-head")

	// Pause acts at once: no question. It holds the thread after step 2.
	b.click(`[data-testid=pause]`)
	if eval[bool](b, `!!document.querySelector("[role=dialog]")`) {
		t.Fatalf("pause asked a question")
	}
	// Step 2's role is at work: the thread is pausing until it finishes,
	// and only then paused.
	testkit.WaitUntil(t, "the pause to be asked for", func() bool {
		resp, body := g.do("GET", "/api/clients/laptop/threads/running", "")
		return resp.StatusCode == 200 && strings.Contains(body, `"status":"pausing"`)
	})
	b.until("the page to say pausing, with Resume and without Pause", `document.querySelector('section[data-status="pausing"]') && document.querySelector("[data-testid=resume]") && (!document.querySelector("[data-testid=pause]") || document.querySelector("[data-testid=pause]").disabled)`)
	openStepGate(t, gate, 2)
	testkit.WaitUntil(t, "the pause to be taken", func() bool {
		resp, body := g.do("GET", "/api/clients/laptop/threads/running", "")
		return resp.StatusCode == 200 && strings.Contains(body, `"status":"paused"`)
	})
	b.until("the page to say paused", `document.querySelector('section[data-status="paused"]') && document.querySelectorAll(".rec-role").length === 2 && document.querySelector("[data-testid=resume]")`)
	b.shot("thread-paused-no-question")
	openStepGate(t, gate, 3)
	openStepGate(t, gate, 4)
	b.click(`[data-testid=resume]`)
	if eval[bool](b, `!!document.querySelector("[role=dialog]")`) {
		t.Fatalf("resume asked a question")
	}
	if s := finished(t, laptopRoot, id); s.Result.ReturnCode != 0 || roles(s) != "plan,write,write,review" {
		t.Fatalf("the drafts thread: %+v", s)
	}
	b.until("the result and four steps", `document.querySelector(".rec-result") && document.querySelectorAll(".rec-role").length === 4`)
	b.until("the stream's end in words", `document.querySelector("[data-testid=live-state]").innerText === "Stream ended: the thread completed."`)

	// Model usage: the engine counted a model call in step 2 (written here
	// as the engine writes its usage file): the step and the thread say so.
	recs := g.threadViewRecords(t, "laptop", id).Records
	call, _ := json.Marshal(usage.Record{Time: 1, Thread: id, Workflow: "drafts", Step: 2, Role: "write", Source: usage.SourceRole, Model: "acme/writer-1", PromptTokens: 1200, CompletionTokens: 34})
	usagePath := usage.Path(storage.Layout{Root: laptopRoot}, recs[0].BundleHash, id)
	if err := os.MkdirAll(filepath.Dir(usagePath), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(usagePath, append(call, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	b.do("reloading", chromedp.Reload())
	b.until("step 2's model usage and the thread's", `(() => {
		const steps = [...document.querySelectorAll("[data-testid=step-usage]")].map(u => u.closest("article").dataset.step + ": " + u.innerText);
		const total = document.querySelector("[data-testid=thread-usage-total]");
		return steps.length === 1 && steps[0].startsWith("2: ") && steps[0].includes("1,234 tokens (1,200 in, 34 out)") && steps[0].includes("acme/writer-1") &&
			total && total.innerText.includes("1,234 tokens");
	})()`)
	b.shot("thread-usage")

	// The timeline: a bar per step, with its duration, in the list too.
	b.until("a timeline bar per step, with durations", `document.querySelectorAll("[data-testid=timeline] .tl-row .tl-bar").length === 4 &&
		[...document.querySelectorAll("[data-testid=timeline] .tl-dur")].every(d => /\d/.test(d.innerText)) &&
		[...document.querySelectorAll("[data-testid=step-duration]")].length === 4`)
	b.shot("thread-timeline")

	// The debug log: time, tag, text; it wraps; a tag filters it.
	b.click(`[data-testid=debug-log] > summary`)
	b.until("the debug log's lines", `document.querySelectorAll("[data-testid=debug-log] .log-line").length >= 5 &&
		[...document.querySelectorAll("[data-testid=debug-log] .log-line")].every(l => /^\d\d:\d\d:\d\d$/.test(l.querySelector(".log-time").innerText) && l.querySelector(".log-tag").innerText && !l.innerText.includes('"tag"'))`)
	if overflow := eval[bool](b, `(() => { const l = document.querySelector("[data-testid=debug-log] .log-lines"); return l.scrollWidth > l.clientWidth + 1 })()`); overflow {
		t.Fatalf("the debug log runs off to the right")
	}
	total := eval[int](b, `document.querySelectorAll("[data-testid=debug-log] .log-line").length`)
	b.click(`[data-testid=debug-log] input[data-log-tag="N7BW4YHQ"]`) // the executor's step lines
	b.until("only the step lines", fmt.Sprintf(`(() => { const ls = [...document.querySelectorAll("[data-testid=debug-log] .log-line")];
		return ls.length > 0 && ls.length < %d && ls.every(l => l.dataset.tag === "N7BW4YHQ") })()`, total))
	b.shot("thread-debug-log")

	// A deep link to step 3 survives a reload.
	b.open(base + "/#/m/laptop/threads/" + id + "?step=3")
	b.do("reloading", chromedp.Reload())
	b.until("step 3 marked after a reload", `document.querySelector('.rec-role.current[data-step="3"][data-role="write"]') && document.querySelector('.tl-row.current[data-step="3"]')`)
	b.shot("thread-step-link")

	// Fork from the second write (step 3): the fork replays three steps.
	b.confirm(`.rec-role[data-step="3"] [data-testid=fork]`)
	b.until("the fork's page", fmt.Sprintf(`/^#\/m\/laptop\/threads\/[0-9A-Z]{26}$/.test(location.hash) && !location.hash.endsWith(%q)`, id))
	forked := b.hash()[len("#/m/laptop/threads/"):]
	if s := finished(t, laptopRoot, forked); s.Result.ReturnCode != 0 || roles(s) != "plan,write,write,review" {
		t.Fatalf("the fork: %+v", s)
	}
	orig, fork := g.threadViewRecords(t, "laptop", id).Records, g.threadViewRecords(t, "laptop", forked).Records
	// Records: 0 the start, 1-4 the steps.
	if fork[3].StateHash != orig[3].StateHash || fork[4].StateHash == orig[4].StateHash {
		t.Fatalf("the fork does not go on from step 3:\norig %+v\nfork %+v", orig, fork)
	}
	b.until("the fork's result", `document.querySelector(".rec-result") && document.querySelectorAll(".rec-role").length === 4 && document.querySelector('.tl-row.replayed[data-step="3"]')`)
	b.shot("thread-fork")

	// The bundle link shows the workflow's source and roles.
	b.click(`.rec-start .hashes a[href*="/bundles/"]`)
	b.until("the bundle's source", `document.querySelector("[data-testid=bundle-source]") && document.querySelector("[data-testid=bundle-source]").innerText.includes("createWorkflow") && document.querySelector("[data-testid=bundle-workflows]").innerText.includes("drafts") && !document.querySelector(".error-box")`)
	b.shot("thread-bundle")

	// A killed thread's stream ends in those words.
	killed := g.startThread("laptop", "drafts", "gate:"+filepath.Join(dir, "never"))
	b.open(base + "/#/m/laptop/threads/" + killed)
	b.confirm(`[data-testid=kill]`)
	if s := finished(t, laptopRoot, killed); s.Result.ReturnCode != 130 {
		t.Fatalf("killed thread: %+v", s)
	}
	b.until("the stream's end, killed", `document.querySelector('section[data-status="killed"]') && document.querySelector("[data-testid=live-state]").innerText === "Stream ended: the thread was killed (return code 130)."`)
	b.shot("thread-killed")

	// An offline machine: its threads as last known, with when it was last
	// seen; no Run…, no error box; its thread's page likewise.
	onCI := g.startThread("ci-box", "plan-code-review", "remember me")
	if s := finished(t, ciBoxRoot, onCI); s.Result.ReturnCode != 0 {
		t.Fatalf("ci-box's thread: %+v", s)
	}
	testkit.WaitUntil(t, "the gateway to remember ci-box's thread", func() bool {
		resp, body := g.do("GET", "/api/gateway/threads?machine=ci-box&status=completed", "")
		return resp.StatusCode == 200 && strings.Contains(body, onCI)
	})
	ciBox.stop(syscall.SIGTERM)
	g.waitStatus("ci-box", "offline")
	b.open(base + "/#/m/ci-box/threads")
	b.until("ci-box's last-known threads, no Run…, no error", fmt.Sprintf(`document.querySelector('tr[data-thread=%q]') && document.querySelector("[data-testid=offline-banner]").innerText.includes("offline since") && !document.querySelector("[data-testid=run-open]") && !document.querySelector(".error-box")`, onCI))
	b.shot("thread-offline-machine")
	b.click(fmt.Sprintf(`tr[data-thread=%q] td a`, onCI))
	b.until("the thread's last-known summary", `document.querySelector("[data-testid=known-thread]") && document.querySelector("[data-testid=offline-banner]").innerText.includes("last known") && !document.querySelector(".error-box") && !document.querySelector("[data-testid=kill]")`)
	b.shot("thread-offline-thread")
}

// The thread page shows the model usage a fake model reported, as the
// engine recorded it (per step and for the thread, with cost at the
// configured price), and its timeline marks the model's work that the
// debug log saw.
func TestDashboardUsageFromAFakeModel(t *testing.T) {
	t.Parallel()
	exe := chromiumPath(t)
	g := startGateway(t)
	_, root := g.connector("usage-laptop", nil)
	f, id := runPricedPlanCodeReview(t, root)
	calls := len(f.seen())
	base := dashboardURL(t, g)
	b := newBrowser(t, exe)
	b.logInToDashboard(base, g.dash)
	b.open(base + "/#/m/usage-laptop/threads/" + id)

	tokens := calls * (fakePromptTokens + fakeCompletionTokens)
	cost := float64(calls) * (fakePromptTokens*promptPrice + fakeCompletionTokens*completionPrice) / 1e6
	want := fmt.Sprintf("%s tokens (%s in, %s out) · %d calls", thousands(tokens), thousands(calls*fakePromptTokens), thousands(calls*fakeCompletionTokens), calls)
	b.until("the thread's usage as the fake model reported it: "+want, fmt.Sprintf(`(() => {
		const total = document.querySelector("[data-testid=thread-usage-total]");
		return !!total && total.innerText.includes(%q);
	})()`, want))
	if shown := eval[string](b, `document.querySelector("[data-testid=thread-usage-total]").innerText`); !strings.Contains(shown, usage.FormatCost(cost)) {
		t.Fatalf("the thread's usage %q lacks its cost %s", shown, usage.FormatCost(cost))
	}
	// Every agent step called the model, each card says how much it used;
	// the person who approved the plan called none.
	if n := eval[int](b, `document.querySelectorAll("[data-testid=step-usage]").length`); n != 5 {
		t.Fatalf("%d steps show usage, want all 5", n)
	}
	b.until("the timeline's model stretches", `document.querySelectorAll("[data-testid=timeline] .tl-wait.model").length > 0`)
	b.shot("thread-usage-fake-model")

	// The fleet's list shows the same tokens and cost beside the thread,
	// from the gateway's index of it.
	b.open(base + "/#/threads")
	wantCell := fmt.Sprintf("%s tok · %s", thousands(tokens), usage.FormatCost(cost))
	b.until("the fleet list's usage of the thread: "+wantCell, fmt.Sprintf(`(() => {
		const cell = document.querySelector('tr[data-thread=%q] td[data-usage]');
		return !!cell && cell.innerText.trim() === %q;
	})()`, id, wantCell))
	// At this window's width the table scrolls sideways: show the column.
	eval[bool](b, fmt.Sprintf(`(() => { document.querySelector('tr[data-thread=%q] td[data-usage]').scrollIntoView({inline: "end"}); return true; })()`, id))
	b.shot("fleet-threads-usage")
}

// thousands writes n with comma separators, as the dashboard does.
func thousands(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
