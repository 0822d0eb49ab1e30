package e2e

import (
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/uncaged/workflow/gateway/server"
	"github.com/uncaged/workflow/shared/testkit"
)

// rowsExpr is the thread ids of the fleet list's rows, in order, joined by commas.
const rowsExpr = `[...document.querySelectorAll("[data-testid=all-threads] tr[data-thread]")].map(r => r.dataset.thread).join(",")`

// choose sets a form control's value as a person would (React sees the
// change), for selects and date inputs alike.
func (b *browser) choose(sel, value string) {
	b.t.Helper()
	// A select's options may arrive after it (the machines load on their
	// own): wait for the one wanted.
	b.until(sel+" to offer "+value, fmt.Sprintf(`(() => { const e = document.querySelector(%q);
		return !!e && (!(e instanceof HTMLSelectElement) || [...e.options].some(o => o.value === %q)) })()`, sel, value))
	got := eval[string](b, fmt.Sprintf(`(() => { const e = document.querySelector(%q);
		const proto = e instanceof HTMLSelectElement ? HTMLSelectElement.prototype : HTMLInputElement.prototype;
		Object.getOwnPropertyDescriptor(proto, "value").set.call(e, %q);
		e.dispatchEvent(new Event("input", { bubbles: true }));
		e.dispatchEvent(new Event("change", { bubbles: true }));
		return e.value })()`, sel, value))
	if got != value {
		b.t.Fatalf("%s: set %q, reads %q", sel, value, got)
	}
}

// typeInto replaces a text field's content by typing.
func (b *browser) typeInto(sel, text string) {
	b.t.Helper()
	b.until(sel+" to be there", fmt.Sprintf("document.querySelector(%q)", sel))
	eval[bool](b, fmt.Sprintf(`(() => { const e = document.querySelector(%q); e.focus(); e.select(); return true })()`, sel))
	if text == "" {
		b.do("clearing "+sel, chromedp.KeyEvent("\b"))
		return
	}
	b.do("typing into "+sel, typeKeys(sel, text))
}

// reload reloads the page (the whole app starts again from the URL).
func (b *browser) reload() {
	b.t.Helper()
	b.do("reloading", chromedp.Reload())
}

// rows waits until the fleet list shows exactly these threads, in order.
func (b *browser) rows(what string, ids ...string) {
	b.t.Helper()
	b.until(what, fmt.Sprintf(`!document.querySelector("[data-testid=all-threads] [role=status]") && %s === %q`, rowsExpr, strings.Join(ids, ",")))
}

func (g *gatewayEnv) fleetStats(by string) map[string]server.FleetGroupStats {
	g.t.Helper()
	resp, body := g.do("GET", "/api/gateway/stats?by="+by, "")
	var out struct{ Groups []server.FleetGroupStats }
	if resp.StatusCode != 200 || json.Unmarshal([]byte(body), &out) != nil {
		g.t.Fatalf("stats by %s: %d %s", by, resp.StatusCode, body)
	}
	m := map[string]server.FleetGroupStats{}
	for _, gr := range out.Groups {
		m[gr.Key] = gr
	}
	return m
}

// checkGlance compares the glance view's cards with GET /api/gateway/stats:
// the same groups, thread counts, success rates and tokens, and each
// card's chart holding as many threads as its count.
func checkGlance(t *testing.T, b *browser, g *gatewayEnv, by string, keys ...string) {
	t.Helper()
	b.until("a card with a drawn chart per "+by, fmt.Sprintf(`[...document.querySelectorAll("[data-testid=fleet-card]")].map(c => c.dataset.key).join(",") === %q
		&& document.querySelectorAll("[data-testid=fleet-card] canvas").length === %d`, strings.Join(keys, ","), len(keys)))
	api := g.fleetStats(by)
	for _, k := range keys {
		want, ok := api[k]
		if !ok {
			t.Fatalf("%s %s: not in the API's stats %+v", by, k, api)
		}
		card := func(stat string) string {
			// Tokens show compacted (12k); their exact count is the title.
			return eval[string](b, fmt.Sprintf(`(e => %q === "tokens" ? e.title : e.innerText)(document.querySelector('[data-testid=fleet-card][data-key=%q] [data-stat=%q]'))`, stat, k, stat))
		}
		rate := "–"
		if want.SuccessRate != nil {
			rate = strconv.Itoa(int(math.Round(*want.SuccessRate*100))) + "%"
		}
		totals := eval[string](b, fmt.Sprintf(`document.querySelector('[data-testid=fleet-card][data-key=%q] [data-testid=fleet-chart]').dataset.totals`, k))
		charted := 0
		for _, n := range strings.Split(totals, ",") {
			v, _ := strconv.Atoi(n)
			charted += v
		}
		if card("threads") != strconv.Itoa(want.Threads) || card("success") != rate || card("tokens") != strconv.FormatInt(want.Tokens, 10) || charted != want.Threads {
			t.Fatalf("%s %s: card says %s threads, %s success, %s tokens, %d in its chart; the API %+v", by, k, card("threads"), card("success"), card("tokens"), charted, want)
		}
	}
}

// TestDashboardFleet drives the fleet's views in chromium against real
// connectors: a machine that went offline still lists its threads, marked
// with when it was last seen; the search finds threads by prompt and by
// summary text and narrows by machine, workflow, status and days, and the
// search in the URL survives a reload and opens the same on a new visit;
// keyset paging walks the whole history through the real gateway; the
// audit log filters by action, machine and token, also from its URL; the
// glance view draws a chart per machine and per workflow (its chart
// library loaded only then) whose numbers are the stats API's.
func TestDashboardFleet(t *testing.T) {
	t.Parallel()
	exe := chromiumPath(t)
	g := startGateway(t)
	laptop, laptopRoot := g.connector("laptop", map[string]string{"plan-code-review": "linear.esm.js"})
	addPath(t, laptopRoot, "hello-world", filepath.Join(helloWorldDir, "hello-world.yaml"))
	_, ciRoot := g.connector("ci-box", map[string]string{"plan-code-review": "linear.esm.js"})
	hello := g.startThread("laptop", "hello-world", "Say hello to the fleet.")
	flux := g.startThread("laptop", "plan-code-review", "review the flux capacitor")
	warp := g.startThread("ci-box", "plan-code-review", "review the warp drive")
	finished(t, laptopRoot, hello)
	finished(t, laptopRoot, flux)
	finished(t, ciRoot, warp)
	testkit.WaitUntil(t, "the three threads completed in the gateway's memory", func() bool {
		return g.searchFleet(q("status", "completed")).Total == 3
	})

	// Keyset paging through the real gateway: a page at a time, each
	// after the previous page's last thread, meets every thread once.
	var walked []string
	for after, pages := "", 0; ; pages++ {
		query := q("limit", "1")
		if after != "" {
			query.Set("after", after)
		}
		resp, body := g.do("GET", "/api/gateway/threads?"+query.Encode(), "")
		var page struct {
			Threads    []fleetThread `json:"threads"`
			NextCursor string        `json:"nextCursor"`
		}
		if resp.StatusCode != 200 || json.Unmarshal([]byte(body), &page) != nil || pages > 3 {
			t.Fatalf("page %d: %d %s", pages, resp.StatusCode, body)
		}
		for _, th := range page.Threads {
			walked = append(walked, th.ThreadID)
		}
		if after = page.NextCursor; after == "" {
			break
		}
	}
	var all []string
	for _, th := range g.searchFleet(q()).Threads {
		all = append(all, th.ThreadID)
	}
	if strings.Join(walked, ",") != strings.Join(all, ",") {
		t.Fatalf("page by page %v, at once %v", walked, all)
	}

	laptop.stop(syscall.SIGTERM)
	g.waitStatus("laptop", "offline")

	base := dashboardURL(t, g)
	b := newBrowser(t, exe)
	b.open(base + "/#token=" + url.QueryEscape(g.dash))

	// The offline machine's history: its threads listed, marked, with
	// when the machine was last seen.
	b.until("the all-machines view", `document.querySelector("[data-testid=all-threads] table")`)
	b.until("the laptop's threads, marked offline", fmt.Sprintf(`document.querySelector('tr[data-thread=%q][data-offline="true"]') && document.querySelector('tr[data-thread=%q][data-offline="true"]')
		&& document.querySelector('tr[data-thread=%q]') && !document.querySelector('tr[data-thread=%q]').dataset.offline`, hello, flux, warp, warp))
	b.until("the laptop's last-seen time", `/laptop offline \(last seen \d+ (s|min) ago\)/.test(document.querySelector('[data-testid=offline-note] li[data-machine="laptop"]').innerText)`)
	if row := eval[string](b, fmt.Sprintf(`document.querySelector('tr[data-thread=%q]').innerText`, hello)); !strings.Contains(row, "offline, seen") {
		t.Fatalf("the offline thread's row says nothing of its machine: %q", row)
	}
	b.shot("fleet-offline-history")

	// Search by prompt text, then by summary text.
	b.typeInto("[data-testid=search-q]", "flux")
	b.click("[data-testid=search-submit]")
	b.rows("the prompt search", flux)
	// Every summary here is "completed: moderator returned END"; no prompt
	// has the word.
	b.typeInto("[data-testid=search-q]", "moderator")
	b.click("[data-testid=search-submit]")
	b.until("the summary search", fmt.Sprintf(`%s.split(",").sort().join(",") === %q`, rowsExpr, strings.Join(sorted(hello, flux, warp), ",")))
	b.typeInto("[data-testid=search-q]", "moderator hello") // one word in the summary, one in the prompt
	b.click("[data-testid=search-submit]")
	b.rows("a search over prompt and summary together", hello)
	b.typeInto("[data-testid=search-q]", "")
	b.click("[data-testid=search-submit]")
	b.until("every thread again", fmt.Sprintf(`%s.split(",").length === 3`, rowsExpr))

	// Filters: machine, status, workflow, and a range of days.
	b.choose(`select[aria-label="machine filter"]`, "laptop")
	b.choose(`select[aria-label="status filter"]`, "completed")
	b.until("the laptop's completed threads", fmt.Sprintf(`%s.split(",").sort().join(",") === %q`, rowsExpr, strings.Join(sorted(hello, flux), ",")))
	b.typeInto(`input[aria-label="workflow filter"]`, "plan-code-review")
	b.click("[data-testid=search-submit]")
	b.rows("the workflow filter", flux)
	b.choose(`input[aria-label="updated until"]`, "2020-01-31")
	b.until("nothing before 2020", `document.querySelector("[data-testid=no-results]")`)
	today := eval[string](b, `(() => { const d = new Date(); return d.getFullYear() + "-" + String(d.getMonth() + 1).padStart(2, "0") + "-" + String(d.getDate()).padStart(2, "0") })()`)
	b.choose(`input[aria-label="updated until"]`, "")
	b.choose(`input[aria-label="updated since"]`, today)
	b.rows("today's thread", flux)
	b.shot("fleet-search")

	// The search is in the URL: a reload keeps it, and the URL opened
	// afresh shows the same.
	hash := b.hash()
	for _, p := range []string{"machine=laptop", "status=completed", "workflow=plan-code-review", "since=" + today} {
		if !strings.Contains(hash, p) {
			t.Fatalf("the URL %q lacks %s", hash, p)
		}
	}
	b.reload()
	b.rows("the same search after a reload", flux)
	// The machine filter's options load after the page: its value shows
	// once they are there.
	b.until("the filters after a reload: laptop plan-code-review",
		`document.querySelector('select[aria-label="machine filter"]').value + " " + document.querySelector('input[aria-label="workflow filter"]').value === "laptop plan-code-review"`)
	b.open(base + "/#/threads?q=warp")
	b.rows("a shared search link", warp)

	// The audit log: the three starts, by action, then by machine and
	// token, the filters in the URL.
	starts, total := g.audit("?action=start")
	if total != 3 {
		t.Fatalf("audit starts: %d %+v", total, starts)
	}
	b.open(base + "/#/audit?action=start")
	b.until("the three starts", `document.querySelectorAll("[data-testid=audit] tr[data-action]").length === 3
		&& [...document.querySelectorAll("[data-testid=audit] tr[data-action]")].every(r => r.dataset.action === "start")`)
	b.choose(`select[aria-label="machine filter"]`, "ci-box")
	b.until("the ci box's start", fmt.Sprintf(`document.querySelectorAll("[data-testid=audit] tr[data-action]").length === 1 && document.querySelector("[data-testid=audit] tr[data-action]").innerText.includes(%q)`, warp))
	b.click(`[data-testid=audit] [data-token]`)
	b.until("the token filter", fmt.Sprintf(`document.querySelector("[data-testid=token-filter]") && location.hash.includes("token=" + %q)`, starts[0].TokenID))
	if !strings.Contains(b.hash(), "machine=ci-box") {
		t.Fatalf("the audit URL %q lacks its machine", b.hash())
	}
	b.reload()
	b.until("the filtered log after a reload", fmt.Sprintf(`document.querySelectorAll("[data-testid=audit] tr[data-action]").length === 1
		&& document.querySelector('select[aria-label="machine filter"]').value === "ci-box" && document.querySelector("[data-testid=token-filter]").innerText.includes(%q)`, starts[0].TokenID))
	b.shot("fleet-audit")

	// The glance: its chart library comes only with it.
	if eval[bool](b, `performance.getEntriesByType("resource").some(e => e.name.includes("StatsChart"))`) {
		t.Fatal("the chart library was loaded before the glance view")
	}
	b.click(".topbar a.fleet-link")
	checkGlance(t, b, g, "machine", "ci-box", "laptop")
	if !eval[bool](b, `performance.getEntriesByType("resource").some(e => e.name.includes("StatsChart"))`) {
		t.Fatal("the glance view's chart library was not loaded lazily")
	}
	b.shot("fleet-glance-machines")
	b.choose("[data-testid=fleet-by]", "workflow")
	checkGlance(t, b, g, "workflow", "hello-world", "plan-code-review")
	if h := b.hash(); h != "#/fleet?by=workflow" {
		t.Fatalf("the glance's URL: %q", h)
	}
	b.reload()
	checkGlance(t, b, g, "workflow", "hello-world", "plan-code-review")
	b.shot("fleet-glance-workflows")
}

func sorted(s ...string) []string { return slices.Sorted(slices.Values(s)) }

// TestFleetCountsModelUsage: a thread's model calls (a fake model that
// reports usage, priced in workflow.yaml) reach the gateway's index with
// the thread — its tokens and cost in the search — and the fleet's
// stats sum them for the machine and the workflow.
//
// It waits for what the numbers depend on, in order: the thread finished
// on its machine (runPricedPlanCodeReview), then the fleet's record of it
// says so (the end crossed the change stream; the record carries the
// usage the thread had when it was sent, so a record of a running thread
// may rightly hold fewer tokens). Only then are the numbers compared, and
// each failure says which of these did not happen.
func TestFleetCountsModelUsage(t *testing.T) {
	t.Parallel()
	g := startGateway(t)
	_, root := g.connector("usage-box", nil)
	f, id := runPricedPlanCodeReview(t, root)
	calls := len(f.seen())
	wantTokens := int64(calls * (fakePromptTokens + fakeCompletionTokens))
	wantCost := float64(calls) * (fakePromptTokens*promptPrice + fakeCompletionTokens*completionPrice) / 1e6
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
	th := g.fleetRecordOfEnded(t, "usage-box", id)
	if th.Status != "completed" || th.Tokens != wantTokens || !near(th.Cost, wantCost) {
		t.Fatalf("the fleet's record of the ended thread %s: %s, %d tokens, $%v; want completed, %d tokens (%d calls) and $%v",
			id, th.Status, th.Tokens, th.Cost, wantTokens, calls, wantCost)
	}
	for by, key := range map[string]string{"machine": "usage-box", "workflow": "plan-code-review"} {
		gr := g.fleetStats(by)[key]
		if gr.Threads != 1 || gr.Tokens != wantTokens || !near(gr.Cost, wantCost) || gr.SuccessRate == nil || *gr.SuccessRate != 1 {
			t.Errorf("stats by %s: %+v, want %d tokens and $%v", by, gr, wantTokens, wantCost)
		}
	}
}

// fleetUsageRecord is a thread as the gateway's index returns it.
type fleetUsageRecord struct {
	ThreadID string  `json:"threadId"`
	Status   string  `json:"status"`
	Tokens   int64   `json:"tokens"`
	Cost     float64 `json:"cost"`
}

// fleetRecordOfEnded waits until the gateway's index holds machine's only
// thread, id, as ended (not running or paused: its end has reached the
// gateway), and returns that record. A failure says what the index held
// instead.
func (g *gatewayEnv) fleetRecordOfEnded(t *testing.T, machine, id string) fleetUsageRecord {
	t.Helper()
	var th fleetUsageRecord
	testkit.WaitFor(t, "the fleet's record of thread "+id+" to show it ended", func() error {
		resp, body := g.do("GET", "/api/gateway/threads?machine="+url.QueryEscape(machine), "")
		var page struct {
			Threads []fleetUsageRecord `json:"threads"`
		}
		if resp.StatusCode != 200 || json.Unmarshal([]byte(body), &page) != nil {
			return fmt.Errorf("the fleet's search answered %d %s", resp.StatusCode, body)
		}
		switch {
		case len(page.Threads) == 0:
			return fmt.Errorf("the gateway's index holds no thread of %s yet (its change stream has not brought it)", machine)
		case len(page.Threads) > 1 || page.Threads[0].ThreadID != id:
			return fmt.Errorf("the gateway's index holds %+v for %s, want only thread %s", page.Threads, machine, id)
		}
		th = page.Threads[0]
		if th.Status == "running" || th.Status == "paused" {
			presence := g.endpoints()[machine]
			if presence == "" {
				presence = "unknown"
			}
			return fmt.Errorf("the fleet still records thread %s as %s (%d tokens so far): its end has not reached the gateway (%s is %s there)",
				id, th.Status, th.Tokens, machine, presence)
		}
		return nil
	})
	return th
}
