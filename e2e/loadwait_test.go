package e2e

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/uncaged/workflow/shared/testkit"
)

// browserStep bounds one step of the browser (an evaluation, a click, a
// navigation). It only turns a hung browser into a failure that names the
// step: on a loaded 2-core machine chromium gets a small share of a core,
// and a step that takes milliseconds alone has taken over the 20 s this
// once was.
const browserStep = 2 * time.Minute

// untilShown polls state, a JavaScript expression that is "" once what is
// awaited shows on the page and otherwise says what is still missing, then
// also (when given) a Go condition. A wait that gives up quotes the last
// thing missing, with whether the page is drawing: each check asks for an
// animation frame and reports how long ago the last one came. A page that
// draws no frames (hidden, or starved of CPU) still runs JavaScript and
// changes its DOM, but anything done in a frame — React Flow measuring
// nodes before it draws edges, a ResizeObserver — never happens.
func (b *browser) untilShown(what, state string, also ...func() bool) {
	b.t.Helper()
	check := withDrawing(state)
	testkit.WaitFor(b.t, what, func() error {
		if missing := eval[string](b, check); missing != "" {
			return errors.New(missing)
		}
		if len(also) > 0 && !also[0]() {
			return errors.New("the page shows it, but the test's own condition does not hold yet")
		}
		return nil
	})
}

// withDrawing is state (see untilShown) followed, when something is
// missing, by whether the page is visible and drawing; it asks for the
// next animation frame, whose time the next evaluation reports. A state
// that throws counts as not shown yet, with the exception as what is
// missing: a condition over a page that is still rendering meets elements
// that are not there yet (a view's parts load in whatever order their
// answers come), and a wait must wait through that, not end the test.
func withDrawing(state string) string {
	return `(() => {
		const last = window.__e2eLastFrame;
		requestAnimationFrame(() => { window.__e2eLastFrame = performance.now(); });
		let missing;
		try {
			missing = (` + state + `);
		} catch (e) {
			missing = "the condition threw " + e;
		}
		if (!missing) return "";
		const frames = last === undefined ? "no animation frame yet" : "last animation frame " + Math.round(performance.now() - last) + " ms ago";
		return missing + " (page " + document.visibilityState + ", " + frames + ")";
	})()`
}

// holds is the state (see untilShown) of a JavaScript condition: "" when
// it holds, else the condition itself.
func holds(cond string) string {
	return fmt.Sprintf(`(%s) ? "" : %q`, cond, "false: "+cond)
}

// graphDrawn is the state (see untilShown) of the role graph on the page:
// "" once it has nodes nodes and at least edges edges, among them a
// dashed fallback edge when fallback, and shows each of labels on its
// edges; else what of that is missing. React Flow puts the nodes in the
// page at once and draws the edges only after it has measured the nodes
// in an animation frame, so nodes without edges mean a page that has not
// drawn since.
func graphDrawn(nodes, edges int, fallback bool, labels ...string) string {
	var q strings.Builder
	fmt.Fprintf(&q, `(() => {
		const missing = [];
		const n = document.querySelectorAll(".react-flow__node").length;
		const e = document.querySelectorAll(".react-flow__edge").length;
		if (n !== %d) missing.push(n + " of %d nodes");
		if (e < %d) missing.push(e + " of %d edges" + (n ? " (drawn once the nodes are measured, in a frame)" : ""));
		if (%t && !document.querySelector(".react-flow__edge.gedge-fallback")) missing.push("no dashed fallback edge");
		const shown = [...document.querySelectorAll(".gedge-label")].map((l) => l.textContent);
		for (const want of %s) if (!shown.some((s) => s.includes(want))) missing.push("no edge labelled " + JSON.stringify(want) + " (labels: " + JSON.stringify(shown) + ")");
		return missing.join("; ");
	})()`, nodes, nodes, edges, edges, fallback, jsStrings(labels))
	return q.String()
}

// jsStrings is a JavaScript array literal of ss.
func jsStrings(ss []string) string {
	quoted := make([]string, len(ss))
	for i, s := range ss {
		quoted[i] = fmt.Sprintf("%q", s)
	}
	return "[" + strings.Join(quoted, ",") + "]"
}

// TestGraphWaitSaysWhenThePageDrawsNothing: the role graph's edges are
// drawn in an animation frame, after the nodes are in the page. On a page
// that draws nothing (a tab behind another here; a starved browser looks
// the same for a while) the nodes show and the edges do not, and the
// graph's wait says so — the edges missing, the page hidden, no frame —
// rather than only that it gave up. Once the page draws again, the same
// wait sees the whole graph.
func TestGraphWaitSaysWhenThePageDrawsNothing(t *testing.T) {
	t.Parallel()
	exe := chromiumPath(t)
	g := startGateway(t)
	crawl := filepath.Join(t.TempDir(), "crawl.esm.js")
	if err := os.WriteFile(crawl, []byte(crawlBundle), 0o644); err != nil {
		t.Fatal(err)
	}
	testdata, _ := filepath.Abs("testdata")
	rel, err := filepath.Rel(testdata, crawl)
	if err != nil {
		t.Fatal(err)
	}
	g.connector("laptop", map[string]string{"crawl": rel})
	base := dashboardURL(t, g)
	b := newBrowser(t, exe)
	b.open(base + "/#token=" + url.QueryEscape(g.dash))
	b.until("the all-machines view", `document.querySelector("[data-testid=all-threads]")`)

	// Another tab in the same window hides this one: a window shows one tab.
	other, closeOther := chromedp.NewContext(b.ctx, chromedp.WithNewWindow(false))
	defer closeOther()
	if err := chromedp.Do(other); err != nil {
		t.Fatalf("opening a second tab: %v", err)
	}
	b.until("the page to be hidden", `document.visibilityState === "hidden"`)
	b.open(base + "/#/m/laptop/workflows/crawl")
	b.until("the graph's nodes in the page", `document.querySelectorAll(".react-flow__node").length === 8`)
	state := eval[string](b, withDrawing(graphDrawn(8, 8, true, "retry")))
	for _, want := range []string{"0 of 8 edges", "no dashed fallback edge", `no edge labelled "retry"`, "page hidden"} {
		if !strings.Contains(state, want) {
			t.Errorf("the graph's state on a page that draws nothing: %q, want it to say %q", state, want)
		}
	}
	closeOther() // this tab is the window's only one again, and shown
	b.untilShown("the crawl workflow's graph once the page draws", graphDrawn(8, 8, true, "retry"))
}

// TestWaitOutlastsAConditionThatThrows: a condition over parts of a view
// that are not in the page yet throws (null.innerText); the wait reports
// that as what is missing and goes on waiting, and holds once the part is
// there.
func TestWaitOutlastsAConditionThatThrows(t *testing.T) {
	t.Parallel()
	b := newBrowser(t, chromiumPath(t))
	b.open("data:text/html,<title>later</title><p>first</p>")
	cond := `document.querySelector("#later").innerText.includes("there")`
	state := eval[string](b, withDrawing(holds(cond)))
	if !strings.Contains(state, "the condition threw TypeError") {
		t.Fatalf("state of a condition that throws: %q, want it to say what it threw", state)
	}
	// The element comes after the wait has started: the wait's first
	// evaluations throw, as a view's do while its answers arrive.
	eval[any](b, `setTimeout(() => { const p = document.createElement("p"); p.id = "later"; p.innerText = "there"; document.body.append(p); }, 300), null`)
	b.until("the element that comes later", cond)
}
