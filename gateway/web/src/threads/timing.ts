// When each step of a thread ran: the thread's records carry the time each
// step was written, so a step runs from the one before it (or the thread's
// start) to its own. The debug log adds when the model or the agent was at
// work, where it says so, and when the thread was paused: paused time is
// its own span, never part of a step.
import { RoleRecord, ThreadRecord, ThreadStatus } from "../api";
import { LogLine } from "./logFormat";
import { KILLED_CODE } from "./streamText";

/** Span is a stretch of time in ms. */
export type Span = { from: number; to: number };

/** PausedSpan is a stretch the thread was paused; open: it is paused still (the span ends now). */
export type PausedSpan = Span & { open: boolean };

/** StepTiming is one step's place in time; a step still running ends now. */
export type StepTiming = {
  /** step is the 1-based role step, as ?step= and fork count them */
  step: number;
  role: string;
  from: number;
  to: number;
  ms: number;
  /** running: the step is being worked on now (no record yet) */
  running: boolean;
  /** replayed: a fork copied this step from the thread it forked (it ran before this thread started) */
  replayed: boolean;
  /** ended: the step a kill or a failure cut short, which left no record of its own (it ends at the result) */
  ended?: "killed" | "failed";
  /** model: from the first to the last model line of the debug log in the step, when there are any */
  model?: Span;
  /** agent: from the step's start to a command agent's "output stored" line, when there is one */
  agent?: Span;
};

/** Debug-log tags that mark model and agent work (engine/agents). */
export const MODEL_TAG = "model";
export const AGENT_TAG = "agent";
/**
 * Debug-log tags of pausing (the engine's executor): a pause asked for while
 * a role runs, the thread stopped at the gate between two steps, and going
 * on again. A "paused" line up to the next "resumed" one is a paused span.
 */
export const PAUSING_TAG = "pausing";
export const PAUSED_TAG = "paused";
export const RESUMED_TAG = "resumed";
/** KILLED_TAG is the executor's line for a killed thread ("… killed during step 3 (role write)"). */
export const KILLED_TAG = "V8JX4NP2";

/** roleSteps are a thread's role records, in order: step n is roleSteps[n-1]. */
export const roleSteps = (records: ThreadRecord[]) => records.filter((r): r is RoleRecord => r.type === "role");

const timed = (log: LogLine[]) => log.filter((l): l is LogLine & { time: number } => l.time !== null).sort((a, b) => a.time - b.time);

/**
 * pausedSpans finds when the thread was paused, from its debug log: each
 * "paused" line up to the next "resumed" one. A span with no "resumed" line
 * ends at the first record written after it (the thread went on, or was
 * ended), else now: while the thread is paused, it is open.
 */
export function pausedSpans(records: ThreadRecord[], status: ThreadStatus | undefined, log: LogLine[] = [], now = Date.now()): PausedSpan[] {
  const marks = records.filter((r) => r.type !== "thread-start").map((r) => r.timestamp);
  const out: PausedSpan[] = [];
  let open: number | null = null;
  for (const l of timed(log)) {
    if (l.tag === PAUSED_TAG && open === null) open = l.time;
    else if (l.tag === RESUMED_TAG && open !== null) {
      out.push({ from: open, to: l.time, open: false });
      open = null;
    }
  }
  if (open !== null) {
    const at = open;
    const next = marks.filter((t) => t > at).sort((a, b) => a - b)[0];
    if (next !== undefined) out.push({ from: at, to: next, open: false });
    else out.push({ from: at, to: Math.max(at, now), open: status === "paused" });
  }
  return out;
}

/** pausedWithin is how long the spans overlap [from, to]. */
function pausedWithin(spans: Span[], from: number, to: number): number {
  let ms = 0;
  for (const p of spans) ms += Math.max(0, Math.min(to, p.to) - Math.max(from, p.from));
  return ms;
}

/**
 * afterPauses is when a step that could begin at from really began: a
 * pause is taken at the gate between two steps, so the step's role starts
 * when the last pause before its record ended.
 */
function afterPauses(spans: Span[], from: number, to: number): number {
  let begin = from;
  for (const p of spans) if (p.from >= from && p.to <= to && p.to > begin) begin = p.to;
  return begin;
}

/** ROLE_IN_LOG: lines of the debug log that name the role at work, each with the pattern that finds it. */
const ROLE_IN_LOG: { tag: string; re: RegExp }[] = [
  { tag: MODEL_TAG, re: /\bagent for role ([^\s:]+):/ },
  { tag: PAUSING_TAG, re: /\brole (\S+) finishes its step/ },
  { tag: KILLED_TAG, re: /\(role ([^)]+)\)/ },
];

/** roleAtWork is the role the debug log says was at work between from and to (the last it names), else "". */
function roleAtWork(log: LogLine[], from: number, to: number): string {
  let role = "";
  for (const l of timed(log)) {
    if (l.time <= from || l.time > to) continue;
    for (const { tag, re } of ROLE_IN_LOG) {
      const m = l.tag === tag ? re.exec(l.text) : null;
      if (m) role = m[1];
    }
  }
  return role;
}

/**
 * stepTimings works out when each step ran. A step that started before the
 * thread (a fork's replayed steps) is marked replayed, with its original
 * times. While the thread runs (status running or pausing, no result yet),
 * or waits for a person's answer (that person's step is the one at work),
 * one more step is open: from the last record to now, its role what the
 * debug log says ("" when it says nothing). A thread a kill or a failure
 * ended in the middle of a step has that step too, up to its result,
 * marked ended. Paused time is in no step: a step that followed a pause
 * begins when the thread was resumed.
 */
export function stepTimings(records: ThreadRecord[], status: ThreadStatus | undefined, log: LogLine[] = [], now = Date.now()): StepTiming[] {
  const start = records.find((r) => r.type === "thread-start");
  const began = start?.timestamp ?? 0;
  const spans = pausedSpans(records, status, log, now);
  const out: StepTiming[] = [];
  let prev = began;
  const step = (from: number, to: number) => {
    const f = afterPauses(spans, from, to);
    return { from: f, to, ms: Math.max(0, to - f - pausedWithin(spans, f, to)) };
  };
  roleSteps(records).forEach((r, i) => {
    const replayed = began > 0 && r.timestamp < began;
    if (replayed) {
      // A replayed step's own start is the step before it in the thread it came from.
      const from = i > 0 ? Math.min(out[i - 1].to, r.timestamp) : r.timestamp;
      out.push({ step: i + 1, role: r.role, from, to: r.timestamp, ms: Math.max(0, r.timestamp - from), running: false, replayed });
      return;
    }
    out.push({ step: i + 1, role: r.role, ...step(Math.max(prev, began), r.timestamp), running: false, replayed });
    prev = r.timestamp;
  });
  const result = records.find((r) => r.type === "workflow-result");
  if ((status === "running" || status === "pausing" || status === "waiting") && !result && began > 0) {
    // Up to now, or to the last log line if the page's clock has not caught up with it.
    const s = step(prev, Math.max(prev, now, ...timed(log).map((l) => l.time)));
    out.push({ step: out.length + 1, role: roleAtWork(log, s.from, s.to), ...s, running: true, replayed: false });
  }
  if (result?.type === "workflow-result" && result.returnCode !== 0 && began > 0 && cutShort(result, spans, log)) {
    const s = step(prev, Math.max(prev, result.timestamp));
    const killed = result.returnCode === KILLED_CODE;
    out.push({
      step: out.length + 1,
      role: roleAtWork(log, s.from, s.to) || (killed ? (/\(role ([^)]+)\)/.exec(result.content)?.[1] ?? "") : ""),
      ...s,
      running: false,
      replayed: false,
      ended: killed ? "killed" : "failed",
    });
  }
  for (const t of out) {
    if (t.replayed) continue;
    const inStep = timed(log).filter((l) => l.time > t.from && l.time <= t.to);
    const model = inStep.filter((l) => l.tag === MODEL_TAG);
    if (model.length) t.model = { from: model[0].time, to: model[model.length - 1].time };
    const agent = inStep.filter((l) => l.tag === AGENT_TAG && /output stored/.test(l.text));
    if (agent.length) t.agent = { from: t.from, to: agent[agent.length - 1].time };
  }
  return out;
}

/**
 * cutShort tells whether a kill or failure ended the thread in the middle
 * of a step. Not when it was paused then (a paused span reaches the
 * result), nor when the engine says the kill came between steps ("killed
 * while paused …", "killed after step n …"); an engine that says nothing
 * of where (older ones) was in a step.
 */
function cutShort(result: { returnCode: number; content: string; timestamp: number }, spans: PausedSpan[], log: LogLine[]): boolean {
  if (spans.some((p) => p.to >= result.timestamp)) return false;
  const words = [result.content, ...log.filter((l) => l.tag === KILLED_TAG).map((l) => l.text)].join("\n");
  if (/\bkilled during step\b/.test(words)) return true;
  return !/\bkilled (while|after)\b/.test(words);
}

/** threadSpan is the stretch the timeline draws: the thread's own steps and its paused spans, replayed steps left out. */
export function threadSpan(steps: StepTiming[], paused: Span[] = []): Span | null {
  const own: Span[] = [...steps.filter((s) => !s.replayed), ...paused];
  if (!own.length) return null;
  return { from: Math.min(...own.map((s) => s.from)), to: Math.max(...own.map((s) => s.to)) };
}

/** place is where a span sits in the whole, as left and width percentages (a sliver stays visible). */
export function place(s: Span, whole: Span): { left: number; width: number } {
  const len = Math.max(1, whole.to - whole.from);
  const left = Math.min(99.5, Math.max(0, ((s.from - whole.from) / len) * 100));
  const width = Math.max(0.5, Math.min(100 - left, ((s.to - s.from) / len) * 100));
  return { left, width };
}

/** stepFromQuery reads ?step=N: a whole number from 1, else null. */
export function stepFromQuery(q: URLSearchParams): number | null {
  const v = q.get("step");
  if (!v || !/^[1-9][0-9]{0,5}$/.test(v)) return null;
  return Number(v);
}
