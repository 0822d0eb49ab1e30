import { describe, expect, it } from "vitest";
import type { Edge, ThreadRecord } from "../api";
import { chooseEdge, END, FALLBACK, pathSteps, START, stepStatus, takenCounts, threadPath } from "./path";

const edge = (from: string, to: string, condition = FALLBACK): Edge => ({ from, to, condition, conditionDescription: null });

// writer ⇄ reviewer, as a YAML workflow's descriptor lists it.
const loop: Edge[] = [
  edge(START, "writer"), // 0
  edge("writer", "reviewer"), // 1
  edge("reviewer", END, "approved"), // 2
  edge("reviewer", "writer", "rejected"), // 3
];
const w = { role: "writer" };
const rejected = { role: "reviewer", status: "rejected" };
const approved = { role: "reviewer", status: "approved" };

describe("threadPath", () => {
  it("stops a killed thread where it stopped: no edge to the end after a rejection", () => {
    const p = threadPath(loop, [w, rejected, w, rejected], "killed");
    expect(p.taken).toEqual([0, 1, 3, 1]);
    expect(p.taken).not.toContain(2);
    expect(p.current).toBeNull();
  });

  it("follows a completed thread to the end by the edge its last status chose", () => {
    expect(threadPath(loop, [w, rejected, w, approved], "completed").taken).toEqual([0, 1, 3, 1, 2]);
  });

  it("takes no edge to the end for a failed, paused or interrupted thread", () => {
    for (const s of ["failed", "paused", "interrupted"] as const) expect(threadPath(loop, [w, approved], s).taken).toEqual([0, 1]);
  });

  it("rings the role in flight, not the last one that finished", () => {
    expect(threadPath(loop, [], "running").current).toBe("writer");
    expect(threadPath(loop, [w], "running").current).toBe("reviewer");
    expect(threadPath(loop, [w, rejected], "running").current).toBe("writer");
    // approved leads to the end: nothing more runs.
    expect(threadPath(loop, [w, approved], "running").current).toBeNull();
    // A paused thread: the role that runs once it is resumed.
    expect(threadPath(loop, [w, rejected], "paused").current).toBe("writer");
    expect(threadPath(loop, [w, rejected], "completed").current).toBeNull();
    // The running thread went along the edge to the role it runs; a paused one has not yet.
    expect(threadPath(loop, [w, rejected], "running").taken).toEqual([0, 1, 3]);
    expect(threadPath(loop, [w, rejected], "paused").taken).toEqual([0, 1]);
    expect(threadPath(loop, [], "running").taken).toEqual([0]);
    expect(threadPath(loop, [w, approved], "running").taken).toEqual([0, 1]);
    expect(threadPath(loop, [w, rejected], "killed").current).toBeNull();
  });

  it("rings the role a person plays while the thread waits for their answer, the edge there taken", () => {
    expect(threadPath(loop, [w], "waiting")).toEqual({ taken: [0, 1], current: "reviewer" });
  });

  it("tells two edges between the same roles apart by the status", () => {
    const g = [edge(START, "a"), edge("a", "b"), edge("b", "a", "rejected"), edge("b", "a")];
    expect(threadPath(g, [{ role: "a" }, { role: "b", status: "rejected" }, { role: "a" }], "killed").taken).toEqual([0, 1, 2]);
    expect(threadPath(g, [{ role: "a" }, { role: "b", status: "other" }, { role: "a" }], "killed").taken).toEqual([0, 1, 3]);
    expect(threadPath(g, [{ role: "a" }, { role: "b" }, { role: "a" }], "killed").taken).toEqual([0, 1, 3]);
  });

  it("takes a JavaScript moderator's named condition when it is the only edge to the role that ran", () => {
    const g = [edge(START, "rank"), edge("rank", "index", "retry"), edge("rank", "render"), edge("index", "rank")];
    expect(threadPath(g, [{ role: "rank" }, { role: "index" }, { role: "rank" }, { role: "render" }], "killed").taken).toEqual([0, 1, 3, 2]);
    // The named check cannot be run here: the FALLBACK is the guess.
    expect(threadPath(g, [{ role: "rank" }], "running").current).toBe("render");
  });

  it("leaves out a move the graph has no edge for, and keeps going", () => {
    expect(threadPath(loop, [w, { role: "elsewhere" }, w], "killed").taken).toEqual([0]);
    expect(threadPath(loop, [{ role: "elsewhere" }], "running").current).toBeNull();
  });

  it("draws nothing for a thread without steps, or a graph without edges", () => {
    expect(threadPath(loop, [], "killed")).toEqual({ taken: [], current: null });
    expect(threadPath(loop, [], "completed")).toEqual({ taken: [], current: null });
    expect(threadPath([], [w, approved], "running")).toEqual({ taken: [], current: null });
  });
});

describe("chooseEdge", () => {
  it("does not guess between different targets without a matching status or FALLBACK", () => {
    const g = [edge("r", "a", "x"), edge("r", "b", "y")];
    expect(chooseEdge(g, "r", "z")).toBe(-1);
    expect(chooseEdge(g, "r", undefined)).toBe(-1);
    expect(chooseEdge(g, "r", "y")).toBe(1);
    expect(chooseEdge([edge("r", "a", "x"), edge("r", "a", "y")], "r", undefined)).toBe(0);
    expect(chooseEdge(g, "nobody", "x")).toBe(-1);
  });
});

describe("stepStatus and pathSteps", () => {
  it("reads a string status only", () => {
    expect(stepStatus({ status: "approved" })).toBe("approved");
    for (const bad of [null, undefined, "approved", 3, [], ["approved"], { status: 1 }, { status: null }, { state: "approved" }]) expect(stepStatus(bad)).toBeUndefined();
  });

  it("keeps the role steps, in order, with their statuses", () => {
    const records = [
      { type: "thread-start" },
      { type: "role", role: "writer", meta: { words: 3 } },
      { type: "role", role: "reviewer", meta: { status: "rejected" } },
      { type: "workflow-result", returnCode: 130 },
    ] as unknown as ThreadRecord[];
    expect(pathSteps(records)).toEqual([{ role: "writer", status: undefined }, { role: "reviewer", status: "rejected" }]);
  });
});

describe("takenCounts", () => {
  it("counts repeats", () => {
    expect([...takenCounts([0, 1, 3, 1, 3])]).toEqual([[0, 1], [1, 2], [3, 2]]);
  });
});
