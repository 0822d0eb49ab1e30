import { describe, expect, it } from "vitest";
import type { Edge } from "../api";
import { edgeKinds, END, layoutGraph, ROLE_SIZE, smoothPath, START, type GraphEdgeData, type Point } from "./layout";

const edge = (from: string, to: string, condition = "FALLBACK", conditionDescription: string | null = null): Edge => ({ from, to, condition, conditionDescription });

const edges: Edge[] = [
  edge(START, "planner"),
  edge("planner", "coder"),
  edge("coder", "reviewer"),
  edge("reviewer", END, "approved", "the reviewer approved"),
  edge("reviewer", "coder"),
];

describe("layoutGraph", () => {
  const g = layoutGraph(edges, { planner: {}, coder: {}, reviewer: {}, idle: {} }, { active: "coder" });
  const pos = (id: string) => g.nodes.find((n) => n.id === id)!.position;

  it("has every role and both terminals", () => {
    expect(g.nodes.map((n) => n.id).sort()).toEqual([END, START, "coder", "idle", "planner", "reviewer"].sort());
    expect(g.nodes.find((n) => n.id === START)!.data.kind).toBe("terminal");
    expect(g.nodes.find((n) => n.id === "planner")!.data.kind).toBe("role");
  });

  it("lays out top to bottom along the edges", () => {
    expect(pos(START).y).toBeLessThan(pos("planner").y);
    expect(pos("planner").y).toBeLessThan(pos("coder").y);
    expect(pos("coder").y).toBeLessThan(pos("reviewer").y);
    expect(pos("reviewer").y).toBeLessThan(pos(END).y);
    for (const n of g.nodes) {
      expect(Number.isFinite(n.position.x) && Number.isFinite(n.position.y)).toBe(true);
    }
  });

  it("dashes FALLBACK edges and labels conditions", () => {
    const byCond = (c: string) => g.edges.filter((e) => e.data!.condition === c);
    expect(g.edges).toHaveLength(5);
    for (const e of byCond("FALLBACK")) {
      expect(e.style?.strokeDasharray).toBeTruthy();
      expect(e.label).toBeUndefined();
    }
    const [approved] = byCond("approved");
    expect(approved.style?.strokeDasharray).toBeUndefined();
    expect(approved.label).toBe("approved");
    expect(approved.data!.description).toBe("the reviewer approved");
    expect(approved.source).toBe("reviewer");
    expect(approved.target).toBe(END);
  });

  it("gives every edge a path that starts and ends on its roles", () => {
    for (const e of g.edges) {
      expect(e.type).toBe("routed");
      expect(e.data!.path).toMatch(/^M[-\d.]+,[-\d.]+/);
      const [first, last] = [e.data!.points[0], e.data!.points[e.data!.points.length - 1]];
      expect(onBorder(g, e.source, first)).toBe(true);
      expect(onBorder(g, e.target, last)).toBe(true);
    }
  });

  it("marks the active role, dashed when it waits for a resume", () => {
    expect(g.nodes.find((n) => n.id === "coder")!.data.active).toBe(true);
    expect(g.nodes.find((n) => n.id === "coder")!.className).toContain("gnode-active");
    expect(g.nodes.find((n) => n.id === "planner")!.data.active).toBe(false);
    const paused = layoutGraph(edges, {}, { active: "coder", waiting: true }).nodes.find((n) => n.id === "coder")!;
    expect(paused.className).toContain("gnode-waiting");
    expect(paused.style?.outline).toMatch(/dashed/);
  });

  it("draws the terminals even without edges", () => {
    const empty = layoutGraph([]);
    expect(empty.nodes.map((n) => n.id).sort()).toEqual([END, START].sort());
    expect(empty.edges).toEqual([]);
  });
});

describe("the path taken", () => {
  it("styles the edges taken, counts repeats, and leaves the others alone", () => {
    const g = layoutGraph(edges, {}, { taken: [0, 1, 2, 4, 2] });
    const visited = g.edges.filter((e) => e.className?.includes("gedge-visited")).map((e) => `${e.source}>${e.target}`);
    expect(visited.sort()).toEqual([`${START}>planner`, "coder>reviewer", "planner>coder", "reviewer>coder"].sort());
    const pc = g.edges.find((e) => e.source === "planner" && e.target === "coder")!;
    expect(pc.style?.strokeDasharray).toBeTruthy(); // still a FALLBACK edge
    expect(pc.style?.strokeWidth).toBe(3);
    expect(g.edges.find((e) => e.source === "coder" && e.target === "reviewer")!.data!.times).toBe(2);
    expect(pc.data!.times).toBe(1);
    const end = g.edges.find((e) => e.target === END)!;
    expect(end.className).not.toContain("gedge-visited");
    expect(end.style).toBeUndefined();
  });
});

// --- loops -------------------------------------------------------------------------

// A self-loop (writer revises itself), a two-role loop (writer ⇄ reviewer)
// and a three-role cycle (reviewer → tester → fixer → reviewer).
const loops: Edge[] = [
  edge(START, "writer"), // 0
  edge("writer", "writer", "revise"), // 1
  edge("writer", "reviewer"), // 2
  edge("reviewer", "writer", "rejected"), // 3
  edge("reviewer", "tester", "approved"), // 4
  edge("tester", "fixer", "failed"), // 5
  edge("fixer", "reviewer"), // 6
  edge("tester", END, "passed"), // 7
];

describe("loops", () => {
  const g = layoutGraph(loops, { writer: {}, reviewer: {}, tester: {}, fixer: {} });
  const node = (id: string) => {
    const n = g.nodes.find((x) => x.id === id)!;
    const w = n.width!, h = n.height!;
    return { left: n.position.x, right: n.position.x + w, top: n.position.y, bottom: n.position.y + h, cx: n.position.x + w / 2, cy: n.position.y + h / 2 };
  };
  const data = (i: number): GraphEdgeData => g.edges[i].data!;

  it("tells back-edges and self-loops from forward edges", () => {
    expect(edgeKinds(loops, [])).toEqual(["forward", "self", "forward", "back", "forward", "forward", "back", "forward"]);
    expect(g.edges.map((e) => e.className!.split(" ")[1])).toEqual(["gedge-forward", "gedge-self", "gedge-forward", "gedge-back", "gedge-forward", "gedge-forward", "gedge-back", "gedge-forward"]);
    expect(edgeKinds([edge("a", "b"), edge("b", "a")], ["a", "b"])).toEqual(["forward", "back"]);
  });

  it("draws the back-edge of a two-role loop apart from its forward edge, label on its own line", () => {
    const fwd = data(2), back = data(3);
    // Not collinear: the back-edge's middle is far from every point of the forward edge.
    expect(distanceToPolyline({ x: back.labelX, y: back.labelY }, fwd.points)).toBeGreaterThan(40);
    // It runs right of both roles, and its label sits on it.
    const lane = back.points[1].x;
    expect(lane).toBeGreaterThan(Math.max(node("writer").right, node("reviewer").right));
    expect(back.points[2].x).toBe(lane);
    expect(back.labelX).toBe(lane);
    // It leaves the reviewer on its right side, going right, and comes into the writer from the right.
    expect(back.points[0].x).toBeCloseTo(node("reviewer").right);
    expect(back.points[3].x).toBeCloseTo(node("writer").right);
    expect(back.points[0].y).toBeGreaterThan(node("reviewer").top);
    expect(back.points[0].y).toBeLessThan(node("reviewer").bottom);
  });

  it("routes a three-role cycle's back-edge around the role in between", () => {
    const back = data(6);
    expect(node("reviewer").cy).toBeLessThan(node("tester").cy);
    expect(node("tester").cy).toBeLessThan(node("fixer").cy);
    expect(back.points[1].x).toBeGreaterThan(node("tester").right);
    // Nothing of it crosses a role it passes.
    for (const id of ["tester", "writer", END]) expect(crosses(back.points, node(id))).toBe(false);
  });

  it("ends every edge on the roles as drawn", () => {
    for (const e of g.edges) {
      const pts = e.data!.points;
      expect(onBorder(g, e.source, pts[0])).toBe(true);
      expect(onBorder(g, e.target, pts[pts.length - 1])).toBe(true);
    }
  });

  it("keeps lanes that overlap apart", () => {
    const a = data(3).points[1].x, b = data(6).points[1].x;
    expect(Math.abs(a - b)).toBeGreaterThan(20);
  });

  it("draws a self-loop as a loop left of its role, with its label beside it", () => {
    const self = data(1);
    const n = node("writer");
    expect(self.points[0].x).toBeCloseTo(n.left);
    expect(self.points[self.points.length - 1].x).toBeCloseTo(n.left);
    expect(self.points[0].y).not.toBeCloseTo(self.points[self.points.length - 1].y);
    expect(Math.min(...self.points.map((p) => p.x))).toBeLessThan(n.left - 30);
    expect(self.labelX).toBeLessThan(n.left - 30);
    expect(self.path).toMatch(/^M[-\d.]+,[-\d.]+ C/);
    // Room for it: no other role overlaps the loop.
    for (const o of g.nodes) if (o.id !== "writer") expect(crosses(self.points, node(o.id))).toBe(false);
  });
});

describe("smoothPath", () => {
  it("starts and ends on the first and last points", () => {
    const d = smoothPath([{ x: 0, y: 0 }, { x: 10, y: 50 }, { x: 0, y: 100 }]);
    expect(d.startsWith("M0,0")).toBe(true);
    expect(d.endsWith("L0,100")).toBe(true);
    expect(smoothPath([{ x: 1, y: 2 }, { x: 3, y: 4 }])).toBe("M1,2 L3,4");
    expect(smoothPath([])).toBe("");
  });
});

// onBorder: p is on the border of node id's box (its drawn size), give or take a pixel.
function onBorder(g: ReturnType<typeof layoutGraph>, id: string, p: Point): boolean {
  const n = g.nodes.find((x) => x.id === id)!;
  const [l, t, r, b] = [n.position.x, n.position.y, n.position.x + (n.width ?? ROLE_SIZE.width), n.position.y + (n.height ?? ROLE_SIZE.height)];
  const inside = p.x >= l - 1 && p.x <= r + 1 && p.y >= t - 1 && p.y <= b + 1;
  const edgeish = Math.abs(p.x - l) < 1 || Math.abs(p.x - r) < 1 || Math.abs(p.y - t) < 1 || Math.abs(p.y - b) < 1;
  return inside && edgeish;
}

function distanceToPolyline(p: Point, line: Point[]): number {
  let best = Infinity;
  for (let i = 1; i < line.length; i++) {
    const [a, b] = [line[i - 1], line[i]];
    const dx = b.x - a.x, dy = b.y - a.y;
    const t = Math.max(0, Math.min(1, ((p.x - a.x) * dx + (p.y - a.y) * dy) / (dx * dx + dy * dy || 1)));
    best = Math.min(best, Math.hypot(p.x - (a.x + t * dx), p.y - (a.y + t * dy)));
  }
  return best;
}

// crosses: some segment of the polyline passes through the inside of the box.
function crosses(line: Point[], box: { left: number; right: number; top: number; bottom: number }): boolean {
  for (let i = 1; i < line.length; i++) {
    for (let k = 0; k <= 20; k++) {
      const x = line[i - 1].x + ((line[i].x - line[i - 1].x) * k) / 20;
      const y = line[i - 1].y + ((line[i].y - line[i - 1].y) * k) / 20;
      if (x > box.left + 1 && x < box.right - 1 && y > box.top + 1 && y < box.bottom - 1) return true;
    }
  }
  return false;
}
