package e2e

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// While the gateway is down the dashboard says so, greys out every action
// and shows no machine online; started again on the same address, the
// gateway is found again without a reload, and the page works as before.
func TestDashboardWhileTheGatewayIsDown(t *testing.T) {
	t.Parallel()
	exe := chromiumPath(t)
	g := startGateway(t)
	g.connector("laptop", map[string]string{"drafts": "drafts.esm.js"})
	g.connector("ci-box", map[string]string{"plan-code-review": "linear.esm.js"})
	base := dashboardURL(t, g)
	b := newBrowser(t, exe)
	b.logInToDashboard(base, g.dash)

	gate := filepath.Join(t.TempDir(), "gate")
	id := g.startThread("laptop", "drafts", "gate:"+gate)
	b.open(base + "/#/m/laptop/threads/" + id)
	const actionsOn = `["pause", "kill"].every(id => { const b = document.querySelector("[data-testid=" + id + "]"); return b && !b.disabled })`
	const bothOnline = `["laptop", "ci-box"].every(m => { const li = document.querySelector('li[data-machine="' + m + '"]'); return li && li.dataset.status === "online" })`
	b.until("a running thread with Pause and Kill, both machines online", `document.querySelector('section[data-status="running"]') && `+actionsOn+` && `+bothOnline+` && !document.querySelector("[data-testid=gateway-unreachable]")`)

	g.gw.stop(syscall.SIGTERM)
	b.until("the banner, every action off and no machine online", `(() => {
		const banner = document.querySelector("[data-testid=gateway-unreachable]");
		const actions = ["pause", "kill"].map(id => document.querySelector("[data-testid=" + id + "]"));
		const machines = [...document.querySelectorAll("li[data-machine]")];
		return !!banner && banner.innerText.startsWith("Gateway unreachable — retrying.") && banner.innerText.includes("Last contact") &&
			actions.every(b => b && b.disabled && /gateway does not answer/.test(b.title)) &&
			machines.length === 2 && machines.every(li => li.dataset.status === "unknown" && !/online/.test(li.innerText));
	})()`)
	b.shot("gateway-unreachable")
	// Every page says so, and its Run… is off too.
	b.open(base + "/#/m/laptop/threads")
	b.until("the machine's page with the banner and Run… off", `!!document.querySelector("[data-testid=gateway-unreachable]") && document.querySelector("[data-testid=run-open]") && document.querySelector("[data-testid=run-open]").disabled`)

	g.restart() // the same address
	b.until("the banner gone, Run… on, both machines online again", `!document.querySelector("[data-testid=gateway-unreachable]") && document.querySelector("[data-testid=run-open]") && !document.querySelector("[data-testid=run-open]").disabled && `+bothOnline)
	b.open(base + "/#/m/laptop/threads/" + id)
	b.until("the thread's Pause and Kill on again", `document.querySelector('section[data-status="running"]') && `+actionsOn+` && document.querySelector("[data-testid=live-state]").innerText === "● live"`)
	b.shot("gateway-back")
}

// A machine the gateway does not know: the page says so, names the known
// ones, and offers no Run….
func TestDashboardUnknownMachine(t *testing.T) {
	t.Parallel()
	exe := chromiumPath(t)
	g := startGateway(t)
	g.connector("laptop", map[string]string{"drafts": "drafts.esm.js"})
	base := dashboardURL(t, g)
	b := newBrowser(t, exe)
	b.logInToDashboard(base, g.dash)
	b.open(base + "/#/m/nosuch")
	b.until("the unknown machine said, Run… off", `(() => {
		const box = document.querySelector("[data-testid=unknown-machine]");
		const run = document.querySelector("[data-testid=run-open]");
		return !!box && box.innerText.includes("knows no machine named nosuch") && !!box.querySelector('a[href="#/m/laptop/threads"]') &&
			!!run && run.disabled && !document.body.innerText.includes("Something went wrong");
	})()`)
	b.shot("unknown-machine")
}

// Pause while a role is at work: the thread is pausing (Resume on, Pause
// off) until the role ends its step, then paused; the timeline draws the
// paused time as its own line. A thread killed in the middle of a step
// keeps that step on its timeline, and its summary says where it was.
func TestDashboardPausingAndAKilledStep(t *testing.T) {
	t.Parallel()
	exe := chromiumPath(t)
	g := startGateway(t)
	_, root := g.connector("laptop", map[string]string{"drafts": "drafts.esm.js"})
	base := dashboardURL(t, g)
	b := newBrowser(t, exe)
	b.logInToDashboard(base, g.dash)

	gate := filepath.Join(t.TempDir(), "gate")
	id := g.startThread("laptop", "drafts", "gate:"+gate)
	b.open(base + "/#/m/laptop/threads/" + id)
	b.until("the running thread", `document.querySelector('section[data-status="running"]') && document.querySelector("[data-testid=pause]") && !document.querySelector("[data-testid=pause]").disabled`)
	b.click(`[data-testid=pause]`)
	b.until("pausing: its badge, Resume on, Pause off", `(() => {
		const badge = document.querySelector("#thread-title .badge");
		const pause = document.querySelector("[data-testid=pause]"), resume = document.querySelector("[data-testid=resume]");
		return document.querySelector('section[data-status="pausing"]') && badge && badge.innerText === "pausing" && badge.classList.contains("st-pausing") &&
			pause && pause.disabled && resume && !resume.disabled && document.querySelector("[data-testid=kill]") && !document.querySelector("[data-testid=kill]").disabled;
	})()`)
	b.shot("thread-pausing")
	openStepGate(t, gate, 1)
	b.until("paused once step 1 is written", `document.querySelector('section[data-status="paused"]') && document.querySelectorAll(".rec-role").length === 1 && document.querySelector('.tl-row[data-paused="open"]')`)
	b.click(`[data-testid=resume]`)
	for k := 2; k <= 4; k++ {
		openStepGate(t, gate, k)
	}
	if s := finished(t, root, id); s.Result.ReturnCode != 0 {
		t.Fatalf("the paused thread: %+v", s)
	}
	b.until("the paused span on the timeline, between steps 1 and 2, in no step", `(() => {
		const rows = [...document.querySelectorAll("[data-testid=timeline] .tl-row")];
		const order = rows.map(r => r.dataset.paused ? "paused" : r.dataset.step).join(",");
		return order === "1,paused,2,3,4" && rows[1].querySelector(".tl-pause") && !rows[1].querySelector(".tl-bar");
	})()`)
	b.shot("thread-paused-span")

	killed := g.startThread("laptop", "drafts", "gate:"+filepath.Join(t.TempDir(), "never"))
	b.open(base + "/#/m/laptop/threads/" + killed)
	b.until("the thread at work on step 1", `document.querySelector('section[data-status="running"]') && document.querySelector(".tl-row.running")`)
	b.confirm(`[data-testid=kill]`)
	if s := finished(t, root, killed); s.Result.ReturnCode != 130 {
		t.Fatalf("the killed thread: %+v", s)
	}
	b.until("the killed step on the timeline and the summary", `(() => {
		const row = document.querySelector('[data-testid=timeline] .tl-row[data-ended="killed"]');
		const summary = document.querySelector("[data-testid=result-summary]");
		return !!row && row.dataset.step === "1" && !!row.querySelector(".tl-bar.tl-ended") && !!summary && /killed/.test(summary.innerText);
	})()`)
	summary := eval[string](b, `document.querySelector("[data-testid=result-summary]").innerText`)
	role := eval[string](b, `document.querySelector('.tl-row[data-ended="killed"] .tl-role').innerText`)
	t.Logf("the killed thread's summary: %q; its cut-short step: %q", summary, role)
	if want := "during step 1"; !strings.Contains(summary, want) {
		t.Errorf("the summary %q does not say %q", summary, want)
	}
	if want := "plan"; !strings.HasPrefix(role, want) {
		t.Errorf("the cut-short step is %q, not role %s", role, want)
	}
	b.shot("thread-killed-step")
}
