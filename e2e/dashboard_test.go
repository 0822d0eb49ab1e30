package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/uncaged/workflow/gateway/web"
	"github.com/uncaged/workflow/shared/testkit"
)

// crawlBundle is a workflow slow enough to watch, pause and kill from a
// browser: six roles of 1.2 s each, with markdown content and meta.
const crawlBundle = `import { createWorkflow, buildDescriptor, START, END } from "@uncaged/workflow-runtime";

const delay = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const names = ["fetch", "parse", "index", "rank", "render", "publish"];
const roles = {};
const table = { [START]: [{ condition: "FALLBACK", role: names[0] }] };
names.forEach((name, i) => {
  roles[name] = { description: "the " + name + " step", systemPrompt: "Do " + name + ".", schema: { type: "object" } };
  table[name] = [{ condition: "FALLBACK", role: names[i + 1] || END }];
});
const retry = { name: "retry", description: "never taken", check: () => false };
table.rank = [{ condition: retry, role: "index" }, { condition: "FALLBACK", role: "render" }];

export const descriptor = buildDescriptor({ description: "Six slow steps to watch.", roles, table });

export const run = createWorkflow({ description: "Six slow steps to watch.", roles, table }, {
  adapter: () => async (ctx) => {
    await delay(1200);
    return { meta: { step: ctx.steps.length + 1 }, childThread: null };
  },
  overrides: null,
});
`

// chromiumPath finds Debian's chromium (or E2E_CHROMIUM). Without one the
// browser test is skipped, unless CI is set: there a missing browser fails.
func chromiumPath(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("E2E_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("no chromium on PATH (apt-get install -y chromium, or set E2E_CHROMIUM); CI requires the browser test")
	}
	t.Skip("no chromium on PATH: skipping the dashboard browser test (apt-get install -y chromium, or set E2E_CHROMIUM)")
	return ""
}

// dashboardURL is where the browser opens the dashboard: the gateway itself
// when it serves the app at /, else a front server that serves
// web.Handler() and reverse-proxies /api/ to the gateway (so this test does
// not depend on how the gateway binary wires the dashboard in).
func dashboardURL(t *testing.T, g *gatewayEnv) string {
	t.Helper()
	base := "http://" + g.front
	resp, body := g.do("GET", "/", "")
	if resp.StatusCode == 200 && strings.Contains(body, `<div id="root">`) {
		t.Logf("the gateway serves the dashboard at %s/", base)
		return base
	}
	target, _ := url.Parse(base)
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			r.Out.Host = r.In.Host
		},
		FlushInterval: -1, // live streams
	}
	app := web.Handler()
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/api/") {
			proxy.ServeHTTP(w, r)
			return
		}
		app.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	t.Logf("the gateway's / is not the dashboard (%d); serving web.Handler() from %s in front of it", resp.StatusCode, front.URL)
	return front.URL
}

// browser drives one headless chromium tab.
type browser struct {
	t       *testing.T
	ctx     context.Context
	mu      sync.Mutex
	console []string // what the page logged, shown when the test fails
}

func newBrowser(t *testing.T, exe string) *browser {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(exe),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(1280, 900),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx)
	t.Cleanup(func() { cancelTab(); cancelAlloc() })
	// The first run starts the browser; it must not carry a timeout.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting chromium %s: %v", exe, err)
	}
	b := &browser{t: t, ctx: ctx}
	go func() {
		for m, err := range chromedp.Console(ctx) {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleLog || m.Type == chromedp.ConsoleDebug || m.Type == chromedp.ConsoleInfo {
				continue
			}
			b.mu.Lock()
			if len(b.console) < 200 {
				b.console = append(b.console, string(m.Type)+": "+m.Text)
			}
			b.mu.Unlock()
		}
	}()
	// Registered after the browser's cleanup, so it runs first.
	t.Cleanup(b.screenshotOnFailure)
	return b
}

// screenshotOnFailure saves a screenshot and the page's text when the test
// failed, and shows what the page logged (also with -v).
func (b *browser) screenshotOnFailure() {
	b.mu.Lock()
	if (b.t.Failed() || testing.Verbose()) && len(b.console) > 0 {
		b.t.Logf("browser console:\n%s", strings.Join(b.console, "\n"))
	}
	b.mu.Unlock()
	if !b.t.Failed() {
		return
	}
	dir := os.Getenv("E2E_ARTIFACTS")
	if dir == "" {
		dir = os.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.t.Logf("no screenshot: %v", err)
		return
	}
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	loc, _ := chromedp.Run(ctx, chromedp.Location())
	text, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.innerText.slice(0, 3000)`))
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Logf("no screenshot: %v", err)
		return
	}
	path := filepath.Join(dir, fmt.Sprintf("dashboard-%s-%d.png", strings.ReplaceAll(b.t.Name(), "/", "_"), time.Now().UnixNano()))
	if err := os.WriteFile(path, png, 0o644); err != nil {
		b.t.Logf("screenshot not saved: %v", err)
		return
	}
	b.t.Logf("screenshot of %s saved to %s; page text:\n%s", loc, path, text)
}

func (b *browser) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, browserStep)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
}

// eval evaluates a JavaScript expression.
func eval[T any](b *browser, expr string) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, browserStep)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		b.t.Fatalf("evaluating %s: %v", expr, err)
	}
	return v
}

// until polls a JavaScript condition, then also (when given) a Go one
// (see untilShown).
func (b *browser) until(what, expr string, also ...func() bool) {
	b.t.Helper()
	b.untilShown(what, holds(expr), also...)
}

func (b *browser) click(sel string) {
	b.t.Helper()
	b.until(sel+" to be there", fmt.Sprintf("document.querySelector(%q)", sel))
	b.do("clicking "+sel, chromedp.Click(chromedp.CSS(sel)))
}

// confirm clicks an action button and then the dialog's Confirm.
func (b *browser) confirm(sel string) {
	b.t.Helper()
	b.click(sel)
	b.click(`[role=dialog] [data-testid=confirm]`)
	b.until("the dialog to close", `!document.querySelector("[role=dialog]")`)
}

func (b *browser) open(u string) {
	b.t.Helper()
	b.do("opening "+u, chromedp.Navigate(u))
}

// shot saves a screenshot of the page as name.png into $E2E_SCREENSHOTS,
// when that is set (to look at the views; the test does not need them).
func (b *browser) shot(name string) {
	b.t.Helper()
	dir := os.Getenv("E2E_SCREENSHOTS")
	if dir == "" {
		return
	}
	// Let the fonts load and the graph's fit-to-view settle: its
	// transform the same on two looks in a row.
	last := "unset"
	testkit.WaitUntil(b.t, "the page to settle for screenshot "+name, func() bool {
		now := eval[string](b, `document.fonts.status + " " + ((document.querySelector(".react-flow__viewport") || {}).style || {}).transform`)
		settled := now == last && strings.HasPrefix(now, "loaded ")
		last = now
		return settled
	})
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err == nil {
		err = os.MkdirAll(dir, 0o755)
	}
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644)
	}
	if err != nil {
		b.t.Logf("screenshot %s: %v", name, err)
	}
}

func (b *browser) hash() string {
	b.t.Helper()
	return eval[string](b, `location.hash`)
}

func TestDashboardInABrowser(t *testing.T) {
	t.Parallel()
	exe := chromiumPath(t)
	g := startGateway(t)

	// A temporary bundle, referred to from testdata/ as g.connector wants.
	dir := t.TempDir()
	crawl := filepath.Join(dir, "crawl.esm.js")
	if err := os.WriteFile(crawl, []byte(crawlBundle), 0o644); err != nil {
		t.Fatal(err)
	}
	testdata, _ := filepath.Abs("testdata")
	rel, err := filepath.Rel(testdata, crawl)
	if err != nil {
		t.Fatal(err)
	}
	_, laptopRoot := g.connector("laptop", map[string]string{"crawl": rel, "slow": "slow.esm.js"})
	ciBox, ciBoxRoot := g.connector("ci-box", map[string]string{"plan-code-review": "linear.esm.js"})
	base := dashboardURL(t, g)
	b := newBrowser(t, exe)

	// Log in with the dashboard token; a wrong one is refused first.
	b.open(base + "/#/")
	b.until("the login form", `document.querySelector("#token")`)
	b.do("typing a wrong token", typeKeys("#token", "not-a-token"), chromedp.Click(chromedp.CSS(`button[type=submit]`)))
	b.until("the refusal, in words", `document.querySelector("[role=alert]") && document.querySelector("[role=alert]").innerText.startsWith("That is not a usable token")`)
	b.shot("login")
	eval[bool](b, `(() => { const e = document.querySelector("#token"); e.focus(); e.select(); return true })()`) // typing replaces it
	connectorToken := gwCLI(t, g.key, "token", "create", "--connector", "someone", "--data-dir", g.dataDir)
	b.do("typing a connector token", typeKeys("#token", connectorToken), chromedp.Click(chromedp.CSS(`button[type=submit]`)))
	b.until("the refusal of a connector token, in words", `document.querySelector("[role=alert]") && document.querySelector("[role=alert]").innerText === "This is a connector token; log in with a dashboard token."`)
	eval[bool](b, `(() => { const e = document.querySelector("#token"); e.focus(); e.select(); return true })()`)
	b.do("typing the token", typeKeys("#token", g.dash), chromedp.Click(chromedp.CSS(`button[type=submit]`)))

	// The landing page: every machine's threads in one table.
	b.until("the all-machines view", `document.querySelector("[data-testid=all-threads]") && document.querySelector('.topbar a.all-link[aria-current="page"]')`)

	// Both machines, online.
	b.until("both machines online", `document.querySelector('.machine[data-machine="laptop"][data-status="online"]') && document.querySelector('.machine[data-machine="ci-box"][data-status="online"]')`)
	// The page hears the gateway's change hints (GET /api/gateway/changes,
	// through the browser's EventSource and the session cookie): the
	// machine list is not polled then, and each machine says since when
	// it is connected rather than its last heartbeat's age.
	b.until("the sidebar to follow the gateway's machine changes",
		`[...document.querySelectorAll("#sidebar .machine .mmeta")].filter((e) => /^online · connected \d+ (s|min|h) ago( · |$)/.test(e.textContent)).length === 2`)

	// A workflow's role graph: 6 roles + start + end, with a dashed fallback
	// edge and a labelled conditional one.
	b.click(`.machine[data-machine="laptop"] a`)
	b.click(`.tabs a[href$="/workflows"]`)
	b.click(`a[data-workflow="crawl"]`)
	b.untilShown("the crawl workflow's graph", graphDrawn(8, 8, true, "retry"))
	b.shot("workflow")

	// A workflow registered twice: its earlier version is made current again.
	add(t, laptopRoot, "slow", "linear.esm.js")
	b.click(`.tabs a[href$="/workflows"]`)
	b.click(`a[data-workflow="slow"]`)
	b.until("the earlier version in the history", `document.querySelectorAll("li[data-hash] [data-testid=rollback]").length === 1`)
	older := eval[string](b, `document.querySelector("li[data-hash]").dataset.hash`)
	newer := eval[string](b, `document.querySelector(".kv dd.mono").innerText.trim()`)
	b.confirm(`li[data-hash] [data-testid=rollback]`)
	b.until("the earlier version current, the newer one in the history", fmt.Sprintf(`document.querySelector(".kv dd.mono").innerText.trim() === %q && document.querySelector('li[data-hash=%q]')`, older, newer))
	var slow struct{ Hash string }
	if resp, body := g.do("GET", "/api/clients/laptop/workflows/slow", ""); resp.StatusCode != 200 || json.Unmarshal([]byte(body), &slow) != nil || slow.Hash != older {
		t.Fatalf("after the rollback to %s: %d %s", older, resp.StatusCode, body)
	}

	// Run a thread from the dialog; it opens the thread's page.
	b.click(`.tabs a[href$="/threads"]`)
	b.click(`[data-testid=run-open]`)
	b.until("the workflow list in the run dialog", `[...document.querySelectorAll("#run-wf option")].some(o => o.value === "crawl")`)
	picked := eval[string](b, `(() => { const s = document.querySelector("#run-wf");
		Object.getOwnPropertyDescriptor(HTMLSelectElement.prototype, "value").set.call(s, "crawl");
		s.dispatchEvent(new Event("change", { bubbles: true })); return s.value })()`)
	if picked != "crawl" {
		t.Fatalf("picked %q in the run dialog", picked)
	}
	b.shot("run-dialog")
	b.do("typing the prompt", typeKeys("#run-prompt", "crawl **the web**"))
	b.click(`[data-testid=run-submit]`)
	b.until("the thread page", `/^#\/m\/laptop\/threads\/[0-9A-Z]{26}$/.test(location.hash)`)
	id := b.hash()[len("#/m/laptop/threads/"):]
	if s := show(t, laptopRoot, id); s.ThreadID != id {
		t.Fatalf("the dialog started %s, the CLI shows %+v", id, s)
	}

	// Its first step appears live, while the thread still runs.
	var liveWhileRunning bool
	b.until("the first step card while the thread runs", `document.querySelector(".rec-role")`, func() bool {
		liveWhileRunning = show(t, laptopRoot, id).Result == nil
		return true
	})
	if !liveWhileRunning {
		t.Fatalf("the first step card appeared only after the thread ended: no live stream")
	}
	b.until("the prompt rendered as markdown", `document.querySelector(".rec-start strong + div strong, .rec-start .md strong")`)

	// Pause it, then resume it; the page follows to the result.
	b.until("the pause button", `document.querySelector("[data-testid=pause]")`)
	b.click(`[data-testid=pause]`) // pause and resume can be undone: no question
	testkit.WaitUntil(t, "the thread to pause", func() bool { return show(t, laptopRoot, id).Status == "paused" })
	b.until("the page to say paused", `document.querySelector('section[data-status="paused"]')`)
	b.click(`details.card > summary`) // the role graph, the latest step highlighted
	b.until("the thread's graph with its current role and the path so far", `document.querySelectorAll(".react-flow__node").length === 8 && document.querySelector(".react-flow__node.gnode-active") && document.querySelector(".react-flow__edge.gedge-visited")`)
	b.shot("thread-paused")
	b.click(`[data-testid=resume]`)
	b.until("the result card after resuming", `document.querySelector(".rec-result") && document.querySelectorAll(".rec-role").length === 6`)
	if s := finished(t, laptopRoot, id); s.Result.ReturnCode != 0 || roles(s) != "fetch,parse,index,rank,render,publish" {
		t.Fatalf("resumed thread: %+v", s)
	}
	b.shot("thread-done")

	// Fork it from its third step: the copy replays fetch and parse, then runs on.
	b.confirm(`.rec-role[data-role="index"] header button`)
	b.until("the forked thread's page", fmt.Sprintf(`/^#\/m\/laptop\/threads\/[0-9A-Z]{26}$/.test(location.hash) && !location.hash.endsWith(%q)`, id))
	forked := b.hash()[len("#/m/laptop/threads/"):]
	b.until("the forked thread's steps", `document.querySelectorAll(".rec-role").length >= 2`)
	if s := finished(t, laptopRoot, forked); s.Result.ReturnCode != 0 || roles(s) != "fetch,parse,index,rank,render,publish" {
		t.Fatalf("forked thread: %+v", s)
	}
	b.until("the forked thread's result", `document.querySelector(".rec-result") && document.querySelectorAll(".rec-role").length === 6`)

	// A CAS node from a step card: its state, then what that refers to.
	b.click(`.rec-role .hashes .hashlink:nth-child(2) a.hash`)
	b.until("the state node", `document.querySelector("[data-testid=cas-type]") && document.querySelector("[data-testid=cas-type]").innerText.trim() !== "–"`)
	state := b.hash()
	b.until("the state's payload and refs", `document.querySelector("[data-testid=cas-payload]") && document.querySelectorAll("[data-testid=cas-refs] a").length > 0`)
	b.click(`[data-testid=cas-refs] a`)
	b.until("the referred node", fmt.Sprintf(`location.hash !== %q && /\/cas\/[0-9A-Z]{13}$/.test(location.hash) && document.querySelector("[data-testid=cas-type]") && document.querySelector("[data-testid=cas-type]").innerText.trim() !== "–"`, state))
	b.until("the CAS node", `/\/cas\/[0-9A-Z]{13}$/.test(location.hash) && document.querySelector("[data-testid=cas-type]") && document.querySelector("[data-testid=cas-type]").innerText.trim() !== "–"`)
	b.shot("cas")

	// Kill another thread, started elsewhere.
	resp, body := g.do("POST", "/api/clients/laptop/threads", `{"workflow":"crawl","prompt":"kill me"}`)
	var other struct{ ThreadID string }
	if resp.StatusCode != 201 || json.Unmarshal([]byte(body), &other) != nil {
		t.Fatalf("start the second thread: %d %s", resp.StatusCode, body)
	}
	b.open(base + "/#/m/laptop/threads/" + other.ThreadID)
	b.until("the kill button", `document.querySelector("[data-testid=kill]")`)
	b.confirm(`[data-testid=kill]`)
	if s := finished(t, laptopRoot, other.ThreadID); s.Result.ReturnCode != 130 {
		t.Fatalf("killed thread: %+v", s)
	}
	b.until("the page to say killed", `document.querySelector('section[data-status="killed"]')`)

	// The thread list shows both, with their statuses.
	b.click(`.tabs a[href$="/threads"]`)
	b.until("both threads in the list", fmt.Sprintf(`document.querySelector('tr[data-thread=%q] .st-completed') && document.querySelector('tr[data-thread=%q] .st-killed')`, id, other.ThreadID))
	b.shot("threads")
	eval[bool](b, `(() => { const s = document.querySelector('select[aria-label="status filter"]');
		Object.getOwnPropertyDescriptor(HTMLSelectElement.prototype, "value").set.call(s, "killed");
		s.dispatchEvent(new Event("change", { bubbles: true })); return true })()`)
	b.until("only the killed thread under the killed filter", fmt.Sprintf(`document.querySelectorAll("tr[data-thread]").length === 1 && document.querySelector('tr[data-thread=%q]')`, other.ThreadID))

	// All machines: the same threads with their machine, sortable on screen.
	b.click(`.topbar a.all-link`)
	b.until("both threads under all machines", fmt.Sprintf(`document.querySelector('tr[data-thread=%q][data-machine="laptop"] a[data-machine-link="laptop"]') && document.querySelector('tr[data-thread=%q][data-machine="laptop"]') && document.querySelector('[data-testid=machines-up]').innerText.includes("ci-box")`, id, other.ThreadID))
	b.shot("all-threads")
	b.click(`th[data-sort=status] button`)
	b.until("sorted by status, the killed thread before the completed ones", fmt.Sprintf(`document.querySelector('th[data-sort=status]').getAttribute("aria-sort") === "ascending" && document.querySelector("tbody tr").dataset.thread === %q`, other.ThreadID))
	// A thread on ci-box, which the gateway remembers before ci-box goes away.
	resp, body = g.do("POST", "/api/clients/ci-box/threads", `{"workflow":"plan-code-review","prompt":"reconcile the ledger of the offline books"}`)
	var onCI struct{ ThreadID string }
	if resp.StatusCode != 201 || json.Unmarshal([]byte(body), &onCI) != nil {
		t.Fatalf("start a thread on ci-box: %d %s", resp.StatusCode, body)
	}
	if s := finished(t, ciBoxRoot, onCI.ThreadID); s.Result.ReturnCode != 0 {
		t.Fatalf("ci-box's thread: %+v", s)
	}
	testkit.WaitUntil(t, "the gateway to remember ci-box's finished thread", func() bool {
		resp, body := g.do("GET", "/api/gateway/threads?machine=ci-box&status=completed", "")
		return resp.StatusCode == 200 && strings.Contains(body, onCI.ThreadID)
	})

	// A machine going offline: it stays in the sidebar, greyed, with when it
	// was last seen; its threads stay listed, marked as last known.
	ciBox.stop(syscall.SIGTERM)
	g.waitStatus("ci-box", "offline")
	b.until("the offline note", fmt.Sprintf(`document.querySelector('[data-testid=offline-note] li[data-machine="ci-box"]') && document.querySelector('[data-testid=offline-note]').innerText.includes("ci-box offline") && document.querySelector('tr[data-thread=%q]')`, id))
	b.until("ci-box's thread, marked last known", fmt.Sprintf(`document.querySelector('tr[data-thread=%q][data-machine="ci-box"][data-offline="true"]')`, onCI.ThreadID))
	b.until("ci-box in the sidebar, offline, last seen", `document.querySelector('.machine[data-machine="ci-box"][data-status="offline"]') && document.querySelector('.machine[data-machine="ci-box"]').innerText.includes("last seen")`)
	b.shot("all-threads-offline")

	// Search finds it by a word of its prompt, on every machine, online or not.
	b.do("typing a search", typeKeys("[data-testid=search-q]", "ledger"))
	b.click(`[data-testid=search-submit]`)
	b.until("the search's one result", fmt.Sprintf(`document.querySelectorAll("tr[data-thread]").length === 1 && document.querySelector('tr[data-thread=%q] .prompt-cell').innerText.includes("ledger")`, onCI.ThreadID))
	b.shot("search")

	// Its machine's page: the last-known threads, no Run…; its thread's page:
	// the last-known summary, no actions.
	b.click(`.machine[data-machine="ci-box"] a`)
	b.until("ci-box's last-known threads", fmt.Sprintf(`document.querySelector("[data-testid=offline-banner]") && document.querySelector('tr[data-thread=%q]') && !document.querySelector("[data-testid=run-open]") && !document.querySelector(".error-box")`, onCI.ThreadID))
	b.shot("machine-offline")
	b.click(fmt.Sprintf(`tr[data-thread=%q] td a`, onCI.ThreadID))
	b.until("the thread's last-known summary", `document.querySelector("[data-testid=known-thread]") && document.querySelector("[data-testid=known-thread]").innerText.includes("ledger") && document.querySelector("[data-testid=offline-banner]") && !document.querySelector("[data-testid=kill]") && !document.querySelector(".error-box")`)
	b.shot("thread-offline")

	// The audit log lists this session's login and the kill above.
	b.click(`.topbar a.audit-link`)
	b.until("the login and the kill in the audit log", fmt.Sprintf(`document.querySelector('tr[data-action="login"]') && document.querySelector('tr[data-action="kill"] a[href$=%q]')`, "/threads/"+other.ThreadID))
	b.shot("audit")
	b.click(`.topbar a.all-link`)

	// A phone-sized window: the machine list folds behind a menu button.
	b.do("a phone-sized window", chromedp.EmulateViewport(390, 844))
	b.until("the folded sidebar", `getComputedStyle(document.querySelector("#sidebar")).display === "none"`)
	b.shot("phone-threads")
	b.click(`.menu-btn`)
	b.until("the machine list", `getComputedStyle(document.querySelector("#sidebar")).display !== "none"`)
	b.shot("phone-menu")
	b.do("a laptop-sized window", chromedp.EmulateViewport(1280, 900))

	// An unknown thread and an unknown route show their error states.
	b.open(base + "/#/m/laptop/threads/01ARZ3NDEKTSV4RRFFQ69G5FAV")
	b.until("the not-found error", `document.querySelector(".error-box") && /not found/i.test(document.querySelector(".error-box").innerText)`)
	b.open(base + "/#/nowhere")
	b.until("the not-found page", `document.body.innerText.includes("Nothing lives at")`)

	// Log out: back to the login page, and the token is gone.
	b.click(`.topbar > button.link`)
	b.until("the login form again", `document.querySelector("#token") && !localStorage.getItem("uncaged.dashboard.token")`)

	// A session whose token is revoked meanwhile returns to the login page,
	// which says so; the audit log names the session's token by its note.
	var minted struct{ ID, Token string }
	if out := gwCLI(t, g.key, "token", "create", "--dashboard", "--json", "--note", "browser session", "--data-dir", g.dataDir); json.Unmarshal([]byte(out), &minted) != nil || minted.Token == "" {
		t.Fatalf("token create --json: %q", out)
	}
	b.do("logging in with a token to revoke", typeKeys("#token", minted.Token), chromedp.Click(chromedp.CSS(`button[type=submit]`)))
	b.until("the dashboard", `document.querySelector(".topbar a.audit-link")`)
	b.click(`.topbar a.audit-link`)
	b.until("the login in the audit log, by the token's note", `[...document.querySelectorAll('tr[data-action="login"]')].some(r => r.innerText.includes("browser session"))`)
	gwCLI(t, g.key, "token", "revoke", minted.ID, "--data-dir", g.dataDir)
	b.until("the login form, saying the token was revoked", `document.querySelector("#token") && document.querySelector("[role=alert]") && document.querySelector("[role=alert]").innerText.startsWith("This token was revoked") && !localStorage.getItem("uncaged.dashboard.token")`)
	b.shot("login-revoked")

	// A 401 from the gateway (a token that stopped working) also returns to login.
	eval[bool](b, `(localStorage.setItem("uncaged.dashboard.token", "revoked"), true)`)
	b.open(base + "/#/m/laptop/threads")
	b.do("reloading", chromedp.Reload())
	b.until("the login form after a 401", `document.querySelector("#token") && !localStorage.getItem("uncaged.dashboard.token")`)
}

// typeKeys types text into the element sel. Not chromedp.SendKeys: in
// v0.23.1 it reads the node's attributes without the lock chromedp's DOM
// events take to change them, a data race the race detector reports.
func typeKeys(sel, text string) chromedp.Action[chromedp.Void] {
	return func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		if _, err := chromedp.Focus(chromedp.CSS(sel))(ctx, t); err != nil {
			return chromedp.Void{}, err
		}
		return chromedp.KeyEvent(text)(ctx, t)
	}
}
