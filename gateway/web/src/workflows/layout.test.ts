import { describe, expect, it } from "vitest";
import type { Edge } from "../api";
import { edgeKey, END, layoutGraph, START, visitedEdges } from "./layout";

const edges: Edge[] = [
  { from: START, to: "planner", condition: "FALLBACK", conditionDescription: null },
  { from: "planner", to: "coder", condition: "FALLBACK", conditionDescription: null },
  { from: "coder", to: "reviewer", condition: "FALLBACK", conditionDescription: null },
  { from: "reviewer", to: END, condition: "approved", conditionDescription: "the reviewer approved" },
  { from: "reviewer", to: "coder", condition: "FALLBACK", conditionDescription: null },
];

describe("layoutGraph", () => {
  const g = layoutGraph(edges, { planner: {}, coder: {}, reviewer: {}, idle: {} }, "coder");
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
    const byCond = (c: string) => g.edges.filter((e) => (e.data as { condition: string }).condition === c);
    expect(g.edges).toHaveLength(5);
    for (const e of byCond("FALLBACK")) {
      expect(e.style?.strokeDasharray).toBeTruthy();
      expect(e.label).toBeUndefined();
    }
    const [approved] = byCond("approved");
    expect(approved.style?.strokeDasharray).toBeUndefined();
    expect(approved.label).toBe("approved");
    expect(approved.source).toBe("reviewer");
    expect(approved.target).toBe(END);
  });

  it("marks the active role", () => {
    expect(g.nodes.find((n) => n.id === "coder")!.data.active).toBe(true);
    expect(g.nodes.find((n) => n.id === "planner")!.data.active).toBe(false);
  });

  it("draws the terminals even without edges", () => {
    const empty = layoutGraph([]);
    expect(empty.nodes.map((n) => n.id).sort()).toEqual([END, START].sort());
    expect(empty.edges).toEqual([]);
  });
});

describe("visited edges", () => {
  it("lists start → first role, consecutive roles, and → end once finished", () => {
    const running = visitedEdges(["planner", "coder", "reviewer", "coder"], false);
    expect(running).toEqual([edgeKey(START, "planner"), edgeKey("planner", "coder"), edgeKey("coder", "reviewer"), edgeKey("reviewer", "coder")]);
    expect(visitedEdges(["planner", "coder", "reviewer"], true)).toContain(edgeKey("reviewer", END));
    expect(visitedEdges([], true)).toEqual([]);
    // A role repeated is one edge, listed once.
    expect(visitedEdges(["a", "a", "a"], false)).toEqual([edgeKey(START, "a"), edgeKey("a", "a")]);
  });

  it("styles the visited edges apart and leaves the others alone", () => {
    const g = layoutGraph(edges, {}, "reviewer", visitedEdges(["planner", "coder", "reviewer"], false));
    const visited = g.edges.filter((e) => e.className?.includes("gedge-visited")).map((e) => `${e.source}>${e.target}`);
    expect(visited.sort()).toEqual([`${START}>planner`, "coder>reviewer", "planner>coder"].sort());
    const pc = g.edges.find((e) => e.source === "planner" && e.target === "coder")!;
    expect(pc.style?.strokeDasharray).toBeTruthy(); // still a FALLBACK edge
    expect(pc.style?.strokeWidth).toBe(3);
    const end = g.edges.find((e) => e.target === END)!;
    expect(end.className).not.toContain("gedge-visited");
    expect(end.style).toBeUndefined();
    const done = layoutGraph(edges, {}, null, visitedEdges(["planner", "coder", "reviewer"], true));
    expect(done.edges.find((e) => e.target === END)!.className).toContain("gedge-visited");
  });
});
