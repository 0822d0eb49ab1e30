import { describe, expect, it } from "vitest";
import type { Edge } from "./api";
import { END, layoutGraph, START } from "./layout";

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
