package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/uncaged/workflow/shared/testkit"
)

// loopsBundle is a workflow whose graph has every kind of loop: planner
// revises itself (a self-loop), writer ⇄ reviewer (a two-role loop, whose
// reviewer can also approve to the end) and reviewer → tester → fixer →
// reviewer (a three-role cycle). Each condition is named after the
// status that takes it, as a YAML workflow's are. The prompt scripts the
// run: its words are the statuses of the steps in turn, "status/ms" for a
// step that takes ms milliseconds (others take 100).
const loopsBundle = `import { createWorkflow, buildDescriptor, START, END } from "@uncaged/workflow-runtime";

const delay = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const when = (status) => ({
  name: status,
  description: "the last step's status is " + status,
  check: (ctx) => ctx.steps.length > 0 && ctx.steps[ctx.steps.length - 1].meta.status === status,
});
const role = (d) => ({ description: d, systemPrompt: d, schema: { type: "object" } });
const roles = { planner: role("plans"), writer: role("writes"), reviewer: role("reviews"), tester: role("tests"), fixer: role("fixes") };
const table = {
  [START]: [{ condition: "FALLBACK", role: "planner" }],
  planner: [{ condition: when("revise"), role: "planner" }, { condition: "FALLBACK", role: "writer" }],
  writer: [{ condition: "FALLBACK", role: "reviewer" }],
  reviewer: [{ condition: when("rejected"), role: "writer" }, { condition: when("approved"), role: END }, { condition: when("test"), role: "tester" }],
  tester: [{ condition: when("failed"), role: "fixer" }, { condition: when("passed"), role: END }],
  fixer: [{ condition: "FALLBACK", role: "reviewer" }],
};
const definition = { description: "Loops of every kind.", roles, table };
export const descriptor = buildDescriptor(definition);
export const run = createWorkflow(definition, {
  adapter: () => async (ctx) => {
    const words = ctx.start.content.trim().split(/\s+/);
    const [status, ms] = (words[ctx.steps.length] || "ok").split("/");
    await delay(Number(ms || 100));
    return { meta: { status }, childThread: null };
  },
  overrides: null,
});
`

// edgeGeometry measures, in the page, how far apart two edges of the graph
// are drawn: the distance from the middle of the first (its middle 60%,
// sampled along its SVG path) to the nearest point of the second, in
// screen pixels; and whether the first passes through a node's box.
const edgeGeometryJS = `((a, b, avoid) => {
  const path = (from, to) => {
    const g = [...document.querySelectorAll(".react-flow__edge")].find((e) => (e.getAttribute("data-id") || "").endsWith("-" + from + "-" + to));
    return g && g.querySelector("path.react-flow__edge-path");
  };
  const sample = (el, n) => {
    const m = el.getScreenCTM(), len = el.getTotalLength(), out = [];
    for (let k = 0; k <= n; k++) {
      const p = el.getPointAtLength((len * k) / n);
      out.push(new DOMPoint(p.x, p.y).matrixTransform(m));
    }
    return out;
  };
  const pa = path(a[0], a[1]), pb = path(b[0], b[1]);
  if (!pa || !pb) return { apart: -1, crosses: [], d: "" };
  const sa = sample(pa, 60), sb = sample(pb, 120);
  const mid = sa.slice(12, 49);
  const apart = Math.min(...mid.map((p) => Math.min(...sb.map((q) => Math.hypot(p.x - q.x, p.y - q.y)))));
  const crosses = avoid.filter((id) => {
    const n = document.querySelector('.react-flow__node[data-id="' + id + '"]');
    if (!n) return false;
    const r = n.getBoundingClientRect();
    return sa.some((p) => p.x > r.left + 1 && p.x < r.right - 1 && p.y > r.top + 1 && p.y < r.bottom - 1);
  });
  return { apart, crosses, d: pa.getAttribute("d") };
})`

type edgeGeometry struct {
	Apart   float64  `json:"apart"`
	Crosses []string `json:"crosses"`
	D       string   `json:"d"`
}

func (b *browser) edgeGeometry(a, other [2]string, avoid ...string) edgeGeometry {
	b.t.Helper()
	args, _ := json.Marshal([]any{a, other, append([]string{}, avoid...)})
	expr := edgeGeometryJS + "(..." + string(args) + ")"
	return eval[edgeGeometry](b, expr)
}

// visitedEdgesJS lists the edges drawn as the thread's path, "from>to" each.
const visitedEdgesJS = `[...document.querySelectorAll(".react-flow__edge.gedge-visited")].map((e) => e.getAttribute("data-id").replace(/^e\d+-/, "").replace("-", ">")).sort().join(" ")`

func TestDashboardGraphLoopsAndThreadPath(t *testing.T) {
	t.Parallel()
	exe := chromiumPath(t)
	g := startGateway(t)
	dir := t.TempDir()
	bundle := filepath.Join(dir, "loops.esm.js")
	if err := os.WriteFile(bundle, []byte(loopsBundle), 0o644); err != nil {
		t.Fatal(err)
	}
	testdata, _ := filepath.Abs("testdata")
	rel, err := filepath.Rel(testdata, bundle)
	if err != nil {
		t.Fatal(err)
	}
	_, root := g.connector("laptop", map[string]string{"loops": rel})
	base := dashboardURL(t, g)
	b := newBrowser(t, exe)
	b.open(base + "/#/")
	b.until("the login form", `document.querySelector("#token")`)
	b.do("logging in", typeKeys("#token", g.dash), chromedp.Click(chromedp.CSS(`button[type=submit]`)))
	b.until("the landing page", `document.querySelector("[data-testid=all-threads]")`)

	// The workflow's graph: every edge drawn, each back-edge apart from the
	// forward edges of its loop.
	b.open(base + "/#/m/laptop/workflows/loops")
	b.until("the graph's nodes and edges", `document.querySelectorAll(".react-flow__node").length === 7 && document.querySelectorAll(".react-flow__edge").length === 10`)
	b.until("the back-edges and the self-loop", `document.querySelectorAll(".react-flow__edge.gedge-back").length === 2 && document.querySelectorAll(".react-flow__edge.gedge-self").length === 1`)
	b.shot("graph-loops")

	// Two-role loop: reviewer → writer is not drawn on writer → reviewer.
	back := b.edgeGeometry([2]string{"reviewer", "writer"}, [2]string{"writer", "reviewer"}, "writer", "reviewer")
	if back.Apart < 20 {
		t.Fatalf("the back-edge reviewer → writer runs %.1f px from writer → reviewer (path %q): the loop cannot be seen", back.Apart, back.D)
	}
	if len(back.Crosses) > 0 {
		t.Fatalf("the back-edge reviewer → writer crosses %v (path %q)", back.Crosses, back.D)
	}
	// Its label is on it, not on the forward edge.
	onItsEdge := eval[bool](b, `(() => {
		const label = [...document.querySelectorAll(".gedge-label")].find((l) => l.textContent === "rejected");
		const g = [...document.querySelectorAll(".react-flow__edge")].find((e) => e.getAttribute("data-id").endsWith("-reviewer-writer"));
		if (!label || !g) return false;
		const r = label.getBoundingClientRect(), p = g.querySelector("path.react-flow__edge-path").getBoundingClientRect();
		const cx = (r.left + r.right) / 2;
		return cx >= p.left - 2 && cx <= p.right + 2 && label.dataset.edge === g.getAttribute("data-id");
	})()`)
	if !onItsEdge {
		t.Fatal(`the label "rejected" is not on the edge reviewer → writer`)
	}
	// Three-role cycle: fixer → reviewer goes around tester, apart from the cycle's other edges.
	cycle := b.edgeGeometry([2]string{"fixer", "reviewer"}, [2]string{"reviewer", "tester"}, "tester", "writer", "__end__")
	if cycle.Apart < 20 || len(cycle.Crosses) > 0 {
		t.Fatalf("the back-edge fixer → reviewer: %.1f px from reviewer → tester, crosses %v (path %q)", cycle.Apart, cycle.Crosses, cycle.D)
	}
	// Self-loop: a loop out of and back into planner, not a point.
	self := eval[bool](b, `(() => {
		const g = [...document.querySelectorAll(".react-flow__edge")].find((e) => e.getAttribute("data-id").endsWith("-planner-planner"));
		const r = g && g.querySelector("path.react-flow__edge-path").getBoundingClientRect();
		const n = document.querySelector('.react-flow__node[data-id="planner"]').getBoundingClientRect();
		return !!r && r.width > 15 && r.height > 10 && r.left < n.left - 10;
	})()`)
	if !self {
		t.Fatal("the self-loop on planner is not drawn beside it")
	}

	// A version's page has its own URL, which survives a reload.
	var wf struct{ Hash string }
	if resp, body := g.do("GET", "/api/clients/laptop/workflows/loops", ""); resp.StatusCode != 200 || json.Unmarshal([]byte(body), &wf) != nil {
		t.Fatalf("workflow: %d %s", resp.StatusCode, body)
	}
	b.open(base + "/#/m/laptop/workflows/loops?version=" + wf.Hash)
	b.until("the version's page", fmt.Sprintf(`document.querySelector('section[data-version=%q]') && document.querySelectorAll(".react-flow__edge").length === 10`, wf.Hash))

	// A killed thread whose last review was a rejection: its path ends where
	// it stopped, with no edge to the end.
	killed := startThread(t, g, "loops", "revise ok ok rejected ok rejected ok/60000")
	testkit.WaitUntil(t, "the second rejection, the writer running again", func() bool {
		return roles(show(t, root, killed)) == "planner,planner,writer,reviewer,writer,reviewer"
	})
	if resp, body := g.do("POST", "/api/clients/laptop/threads/"+killed+"/kill", `{}`); resp.StatusCode != 200 {
		t.Fatalf("kill: %d %s", resp.StatusCode, body)
	}
	if s := finished(t, root, killed); s.Result.ReturnCode != 130 {
		t.Fatalf("killed thread: %+v", s.Result)
	}
	b.open(base + "/#/m/laptop/threads/" + killed)
	b.until("the killed thread's page", `document.querySelector('section[data-status="killed"]') && document.querySelectorAll(".rec-role").length === 6`)
	b.click(`[data-testid=thread-graph] > summary`)
	b.until("the thread's graph", `document.querySelectorAll(".react-flow__edge").length === 10 && document.querySelector(".react-flow__edge.gedge-visited")`)
	want := "__start__>planner planner>planner planner>writer reviewer>writer writer>reviewer"
	if got := eval[string](b, visitedEdgesJS); got != want {
		t.Fatalf("the killed thread's path is %q, want %q (nothing after the last rejection, no edge to the end)", got, want)
	}
	if n := eval[int](b, `document.querySelectorAll(".react-flow__node.gnode-active").length`); n != 0 {
		t.Fatalf("a killed thread rings %d roles", n)
	}
	b.until("writer → reviewer taken twice", `[...document.querySelectorAll(".gedge-label")].some((l) => l.textContent === "×2")`)
	b.shot("graph-killed")

	// A running thread: the ring is on the role running now (reviewer),
	// not on the writer that finished before it.
	running := startThread(t, g, "loops", "ok ok approved/60000")
	testkit.WaitUntil(t, "the writer to finish", func() bool { return roles(show(t, root, running)) == "planner,writer" })
	b.open(base + "/#/m/laptop/threads/" + running)
	b.until("the running thread's page", `document.querySelector('section[data-status="running"]') && document.querySelectorAll(".rec-role").length === 2`)
	b.click(`[data-testid=thread-graph] > summary`)
	b.until("the ring on the running role", `document.querySelectorAll(".react-flow__node.gnode-active").length === 1 && document.querySelector('.react-flow__node.gnode-active[data-id="reviewer"]')`)
	if got := eval[string](b, `document.querySelector("[data-testid=graph-current]").innerText + " / " + document.querySelector("[data-testid=graph-legend]").textContent.replace(/\s+/g, " ")`); !strings.HasPrefix(got, "reviewer / ") || !strings.Contains(got, "reviewer is running now") {
		t.Fatalf("the legend says %q", got)
	}
	// The path's edges are drawn once the graph's layout settles, which may
	// be after the ring.
	b.until("the running thread's path __start__>planner planner>writer writer>reviewer",
		visitedEdgesJS+` === "__start__>planner planner>writer writer>reviewer"`)
	b.shot("graph-running")
	if resp, body := g.do("POST", "/api/clients/laptop/threads/"+running+"/kill", `{}`); resp.StatusCode != 200 {
		t.Fatalf("kill: %d %s", resp.StatusCode, body)
	}
	finished(t, root, running)
}

// startThread starts a thread through the gateway and returns its id.
func startThread(t *testing.T, g *gatewayEnv, workflow, prompt string) string {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"workflow": workflow, "prompt": prompt})
	resp, out := g.do("POST", "/api/clients/laptop/threads", string(body))
	var r struct{ ThreadID string }
	if resp.StatusCode != 201 || json.Unmarshal([]byte(out), &r) != nil || r.ThreadID == "" {
		t.Fatalf("start %s: %d %s", workflow, resp.StatusCode, out)
	}
	return r.ThreadID
}
