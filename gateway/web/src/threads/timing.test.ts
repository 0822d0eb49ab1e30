import { describe, expect, it } from "vitest";
import { ThreadRecord } from "../api";
import { LogLine } from "./logFormat";
import { pausedSpans, place, stepFromQuery, stepTimings, threadSpan } from "./timing";

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

// The engine's pause lines (word tags, as `live --debug` prints them).
const pausing = (time: number, r: string): LogLine => ({ time, tag: "pausing", text: `pause requested; role ${r} finishes its step first` });
const paused = (time: number, n: number): LogLine => ({ time, tag: "paused", text: `paused after step ${n}` });
const resumed = (time: number): LogLine => ({ time, tag: "resumed", text: "resumed after some time paused" });
const result = (returnCode: number, timestamp: number, content = ""): ThreadRecord => ({ type: "workflow-result", returnCode, content, timestamp });
const rows = (t: ReturnType<typeof stepTimings>) => t.map((s) => [s.step, s.role, s.from, s.to, s.ms, s.running, s.ended ?? null]);

describe("paused time", () => {
  it("is a span of its own, from paused to resumed, and in no step's duration, whichever step it follows", () => {
    for (const after of [0, 1, 2]) {
      // Steps a, b, c take 1 s each of work; a 5 s pause follows step `after` (0: before the first step).
      const at = [1000, 2000, 3000, 4000].map((t, i) => (i > after ? t + 5000 : t));
      const pauseFrom = at[after] + 10;
      const log = [pausing(at[after] - 500, "x"), paused(pauseFrom, after), resumed(pauseFrom + 4990)];
      const recs = [start(at[0]), role("a", at[1]), role("b", at[2]), role("c", at[3]), result(0, at[3] + 5)];
      const t = stepTimings(recs, "completed", log);
      // The gate's few ms before the pause are not the next role's work either.
      expect(t.map((s) => s.ms), `pause after step ${after}`).toEqual([1000, 1000, 1000]);
      expect(pausedSpans(recs, "completed", log)).toEqual([{ from: pauseFrom, to: pauseFrom + 4990, open: false }]);
      // The step after the pause begins when the thread was resumed.
      expect(t[after].from).toBe(pauseFrom + 4990);
      expect(threadSpan(t, pausedSpans(recs, "completed", log))).toEqual({ from: after === 0 ? pauseFrom : at[0], to: at[3] });
    }
  });

  it("counts several pauses, each on its own, and a pause resumed and taken again at the same gate", () => {
    const log = [paused(2010, 1), resumed(3000), paused(4010, 2), resumed(4500), paused(4600, 2), resumed(6000)];
    const recs = [start(1000), role("a", 2000), role("b", 4000), role("c", 7000), result(0, 7001)];
    const t = stepTimings(recs, "completed", log);
    expect(rows(t)).toEqual([
      [1, "a", 1000, 2000, 1000, false, null],
      [2, "b", 3000, 4000, 1000, false, null],
      [3, "c", 6000, 7000, 1000, false, null],
    ]);
    expect(pausedSpans(recs, "completed", log).map((p) => [p.from, p.to])).toEqual([[2010, 3000], [4010, 4500], [4600, 6000]]);
  });

  it("is open up to now while the thread is paused, with no step running", () => {
    const recs = [start(1000), role("a", 2000)];
    const log = [pausing(1500, "a"), paused(2005, 1)];
    expect(pausedSpans(recs, "paused", log, 9000)).toEqual([{ from: 2005, to: 9000, open: true }]);
    const t = stepTimings(recs, "paused", log, 9000);
    expect(rows(t)).toEqual([[1, "a", 1000, 2000, 1000, false, null]]);
    expect(threadSpan(t, pausedSpans(recs, "paused", log, 9000))).toEqual({ from: 1000, to: 9000 });
  });

  it("leaves a pausing thread's role at work: its step runs on, named by the pause line", () => {
    const recs = [start(1000), role("a", 2000)];
    const t = stepTimings(recs, "pausing", [pausing(2500, "b")], 4000);
    expect(rows(t)[1]).toEqual([2, "b", 2000, 4000, 2000, true, null]);
    expect(pausedSpans(recs, "pausing", [pausing(2500, "b")], 4000)).toEqual([]);
    // The page's clock behind the log's last line (it ticks once a second): the line still counts.
    expect(rows(stepTimings(recs, "pausing", [pausing(2500, "b")], 2400))[1]).toEqual([2, "b", 2000, 2500, 500, true, null]);
  });

  it("keeps a running step after a resume from the resume on", () => {
    const recs = [start(1000), role("a", 2000)];
    const t = stepTimings(recs, "running", [paused(2010, 1), resumed(7000)], 7500);
    expect(rows(t)[1]).toEqual([2, "", 7000, 7500, 500, true, null]);
  });

  it("ends a pause the log never saw resumed at the next record", () => {
    const recs = [start(1000), role("a", 2000), role("b", 9000)];
    expect(pausedSpans(recs, "completed", [paused(2010, 1)], 10_000)).toEqual([{ from: 2010, to: 9000, open: false }]);
    expect(stepTimings(recs, "completed", [paused(2010, 1)], 10_000)[1].ms).toBe(0);
  });

  it("ignores a resume with no pause before it (a pause cancelled before it took effect)", () => {
    const recs = [start(1000), role("a", 2000), role("b", 3000)];
    const log = [pausing(1500, "a"), resumed(1600)];
    expect(pausedSpans(recs, "completed", log)).toEqual([]);
    expect(stepTimings(recs, "completed", log).map((s) => s.ms)).toEqual([1000, 1000]);
  });
});

describe("a step a kill or a failure cut short", () => {
  it("runs from the last record to the result, marked killed, named by the engine's kill line", () => {
    const recs = [start(1000), role("plan", 2000), result(130, 5000, "thread aborted: killed during step 2 (role write) by the dashboard")];
    const log: LogLine[] = [{ time: 4999, tag: "V8JX4NP2", text: "thread T killed during step 2 (role write) by the dashboard" }];
    expect(rows(stepTimings(recs, "killed", log))).toEqual([
      [1, "plan", 1000, 2000, 1000, false, null],
      [2, "write", 2000, 5000, 3000, false, "killed"],
    ]);
    // The summary alone names it too; the model's line as well.
    expect(stepTimings(recs, "killed")[1].role).toBe("write");
    const older = [start(1000), role("plan", 2000), result(130, 5000, "thread aborted")];
    expect(stepTimings(older, "killed", [{ time: 2100, tag: "model", text: "llm agent for role review: model m, up to 8 rounds" }])[1]).toMatchObject({ role: "review", ended: "killed", ms: 3000 });
    expect(stepTimings(older, "killed")[1]).toMatchObject({ role: "", ended: "killed" });
  });

  it("is not there when the thread was killed while paused, or between steps", () => {
    const recs = [start(1000), role("plan", 2000), result(130, 9000, "thread aborted: killed while paused after step 1")];
    const log = [paused(2010, 1)];
    expect(rows(stepTimings(recs, "killed", log))).toEqual([[1, "plan", 1000, 2000, 1000, false, null]]);
    expect(pausedSpans(recs, "killed", log)).toEqual([{ from: 2010, to: 9000, open: false }]);
    // An engine that says nothing of where: the open pause says it.
    expect(stepTimings([start(1000), role("plan", 2000), result(130, 9000, "thread aborted")], "killed", log)).toHaveLength(1);
    expect(stepTimings([start(1000), role("plan", 2000), result(130, 9000, "thread aborted: killed after step 1, while it was not running")], "killed")).toHaveLength(1);
  });

  it("marks a failed thread's last step failed, and a completed thread has none", () => {
    const recs = [start(1000), role("a", 2000), result(1, 2600, "failed: the agent exited 2")];
    expect(rows(stepTimings(recs, "failed"))[1]).toEqual([2, "", 2000, 2600, 600, false, "failed"]);
    expect(stepTimings([start(1000), role("a", 2000), result(0, 2600)], "completed")).toHaveLength(1);
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
