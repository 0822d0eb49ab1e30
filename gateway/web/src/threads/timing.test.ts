import { describe, expect, it } from "vitest";
import { ThreadRecord } from "../api";
import { place, stepFromQuery, stepTimings, threadSpan } from "./timing";

const start = (timestamp: number): ThreadRecord => ({ type: "thread-start", threadId: "T", workflow: "w", prompt: null, status: "running", startedAt: "", timestamp, bundleHash: "B", head: "H", start: "S", source: "active" });
const role = (r: string, timestamp: number): ThreadRecord => ({ type: "role", role: r, contentHash: "C", content: "", meta: null, timestamp, stateHash: "H" + timestamp, childThread: null });

describe("stepTimings", () => {
  it("runs each step from the one before it, the first from the thread's start", () => {
    const t = stepTimings([start(1000), role("a", 3000), role("b", 3500), { type: "workflow-result", returnCode: 0, content: "", timestamp: 3600 }], "completed");
    expect(t.map((s) => [s.step, s.role, s.from, s.to, s.ms, s.running])).toEqual([
      [1, "a", 1000, 3000, 2000, false],
      [2, "b", 3000, 3500, 500, false],
    ]);
    expect(threadSpan(t)).toEqual({ from: 1000, to: 3500 });
  });

  it("adds the step being worked on while the thread runs, up to now", () => {
    const t = stepTimings([start(1000), role("a", 3000)], "running", [], 4500);
    expect(t[1]).toMatchObject({ step: 2, role: "", from: 3000, to: 4500, ms: 1500, running: true });
    expect(stepTimings([start(1000), role("a", 3000)], "paused", [], 4500)).toHaveLength(1);
  });

  it("marks a fork's replayed steps, which ran before the thread began", () => {
    const t = stepTimings([start(10_000), role("a", 2000), role("b", 2500), role("c", 12_000)], "completed");
    expect(t.map((s) => [s.replayed, s.from, s.to])).toEqual([
      [true, 2000, 2000],
      [true, 2000, 2500],
      [false, 10_000, 12_000],
    ]);
    expect(threadSpan(t)).toEqual({ from: 10_000, to: 12_000 });
  });

  it("finds the model's and the agent's work in the debug log, step by step", () => {
    const log = [
      { time: 1500, tag: "model", text: "llm agent for role a: model m" },
      { time: 2500, tag: "model", text: "an answer" },
      { time: 3200, tag: "agent", text: "claude: output stored as content node X" },
      { time: 3300, tag: "N7BW4YHQ", text: "thread T wrote role b" },
      { time: null, tag: "model", text: "no time" },
    ];
    const t = stepTimings([start(1000), role("a", 3000), role("b", 4000)], "completed", log);
    expect(t[0].model).toEqual({ from: 1500, to: 2500 });
    expect(t[0].agent).toBeUndefined();
    expect(t[1].model).toBeUndefined();
    expect(t[1].agent).toEqual({ from: 3000, to: 3200 });
  });

  it("has nothing to show without steps", () => {
    expect(stepTimings([], undefined)).toEqual([]);
    expect(threadSpan([])).toBeNull();
  });
});

describe("place", () => {
  it("puts a span in the whole as percentages, a sliver still visible", () => {
    expect(place({ from: 1000, to: 1500 }, { from: 1000, to: 2000 })).toEqual({ left: 0, width: 50 });
    expect(place({ from: 2000, to: 2000 }, { from: 1000, to: 2000 })).toEqual({ left: 99.5, width: 0.5 });
    expect(place({ from: 1500, to: 1500 }, { from: 1000, to: 2000 }).width).toBe(0.5);
  });
});

describe("stepFromQuery", () => {
  it("reads ?step=N, a whole number from 1", () => {
    expect(stepFromQuery(new URLSearchParams("step=3"))).toBe(3);
    for (const bad of ["", "step=", "step=0", "step=-1", "step=1.5", "step=abc", "step=01", "step=9999999"]) expect(stepFromQuery(new URLSearchParams(bad))).toBeNull();
  });
});
