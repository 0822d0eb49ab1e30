// When each step of a thread ran: the thread's records carry the time each
// step was written, so a step runs from the one before it (or the thread's
// start) to its own. The debug log adds when the model or the agent was at
// work, where it says so.
import { RoleRecord, ThreadRecord, ThreadStatus } from "../api";
import { LogLine } from "./logFormat";

/** Span is a stretch of time in ms. */
export type Span = { from: number; to: number };

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
  /** model: from the first to the last model line of the debug log in the step, when there are any */
  model?: Span;
  /** agent: from the step's start to a command agent's "output stored" line, when there is one */
  agent?: Span;
};

/** Debug-log tags that mark model and agent work (engine/agents). */
export const MODEL_TAG = "model";
export const AGENT_TAG = "agent";

/** roleSteps are a thread's role records, in order: step n is roleSteps[n-1]. */
export const roleSteps = (records: ThreadRecord[]) => records.filter((r): r is RoleRecord => r.type === "role");

/**
 * stepTimings works out when each step ran. A step that started before the
 * thread (a fork's replayed steps) is marked replayed, with its original
 * times. While the thread runs (status running, no result yet), one more
 * step is open: from the last record to now, role unknown ("").
 */
export function stepTimings(records: ThreadRecord[], status: ThreadStatus | undefined, log: LogLine[] = [], now = Date.now()): StepTiming[] {
  const start = records.find((r) => r.type === "thread-start");
  const began = start?.timestamp ?? 0;
  const out: StepTiming[] = [];
  let prev = began;
  roleSteps(records).forEach((r, i) => {
    const replayed = began > 0 && r.timestamp < began;
    // A replayed step's own start is the step before it in the thread it came from.
    const from = replayed ? (i > 0 ? Math.min(out[i - 1].to, r.timestamp) : r.timestamp) : Math.max(prev, began);
    out.push({ step: i + 1, role: r.role, from, to: r.timestamp, ms: Math.max(0, r.timestamp - from), running: false, replayed });
    if (!replayed) prev = r.timestamp;
  });
  if (status === "running" && !records.some((r) => r.type === "workflow-result") && began > 0) {
    out.push({ step: out.length + 1, role: "", from: prev, to: Math.max(prev, now), ms: Math.max(0, now - prev), running: true, replayed: false });
  }
  for (const t of out) {
    if (t.replayed) continue;
    const inStep = log.filter((l) => l.time !== null && l.time > t.from && l.time <= t.to);
    const model = inStep.filter((l) => l.tag === MODEL_TAG);
    if (model.length) t.model = { from: model[0].time!, to: model[model.length - 1].time! };
    const agent = inStep.filter((l) => l.tag === AGENT_TAG && /output stored/.test(l.text));
    if (agent.length) t.agent = { from: t.from, to: agent[agent.length - 1].time! };
  }
  return out;
}

/** threadSpan is the stretch the timeline draws: the thread's own steps, replayed ones left out. */
export function threadSpan(steps: StepTiming[]): Span | null {
  const own = steps.filter((s) => !s.replayed);
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
