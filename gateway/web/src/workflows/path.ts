// The path a thread took through its role graph, computed from what its
// records say. Kept apart from layout.ts (dagre, @xyflow/react) so the main
// chunk does not pull the graph code in.
import type { Edge, ThreadRecord, ThreadStatus } from "../api";

/** START is the graph's entry, the from of the first edge a thread takes. */
export const START = "__start__";
/** END is where a workflow's graph ends. */
export const END = "__end__";
/** FALLBACK is the condition of the edge taken when no other matches. */
export const FALLBACK = "FALLBACK";

/** PathStep is a finished step as the path needs it: its role, and the meta.status it ended with (when a string). */
export type PathStep = { role: string; status?: string };

/**
 * ThreadPath is where a thread went: the graph's edges it went along and the
 * role it is at now.
 */
export type ThreadPath = {
  /**
   * Indices into the graph's edges, in the order the thread took them; an
   * edge taken twice (a loop) is listed twice. A move the graph has no edge
   * for (a JavaScript moderator may route anywhere) is left out.
   */
  taken: number[];
  /**
   * The role in flight: the one a running thread runs now, or the one a
   * paused or interrupted thread runs when resumed. Null for a finished
   * thread, and when the recorded steps cannot tell (no edge matches).
   */
  current: string | null;
};

/** stepStatus is a step meta's status, the value YAML workflows route on; undefined when it is not a string. */
export function stepStatus(meta: unknown): string | undefined {
  if (!meta || typeof meta !== "object" || Array.isArray(meta)) return undefined;
  const s = (meta as Record<string, unknown>).status;
  return typeof s === "string" ? s : undefined;
}

/** pathSteps are a thread's finished steps, in order, from its records. */
export function pathSteps(records: ThreadRecord[]): PathStep[] {
  const out: PathStep[] = [];
  for (const r of records) if (r.type === "role") out.push({ role: r.role, status: stepStatus(r.meta) });
  return out;
}

/**
 * chooseEdge is the index of the edge a step of role `from` that ended with
 * `status` left by, routed as the engine routes: the edge whose condition is
 * the status, else the FALLBACK one. With `to` (the role that ran next is
 * known), only edges to it count, and when neither matches, any edge to it
 * was the one (a JavaScript condition is a named check, not a status).
 * Without `to`, an edge is a guess only when every candidate leads to the
 * same place. -1: the graph has no such edge.
 */
export function chooseEdge(edges: Edge[], from: string, status: string | undefined, to?: string): number {
  const out: number[] = [];
  edges.forEach((e, i) => {
    if (e.from === from && (to === undefined || e.to === to)) out.push(i);
  });
  if (out.length === 0) return -1;
  if (status !== undefined) {
    const hit = out.find((i) => edges[i].condition === status);
    if (hit !== undefined) return hit;
  }
  const fallback = out.find((i) => edges[i].condition === FALLBACK);
  if (fallback !== undefined) return fallback;
  if (to !== undefined || new Set(out.map((i) => edges[i].to)).size === 1) return out[0];
  return -1;
}

/**
 * threadPath is the path a thread took, from the statuses its steps
 * recorded: __start__ to its first role, then each step to the next by the
 * edge its status chose. A completed thread also went from its last role to
 * __end__; a killed, failed, paused or interrupted one stops at its last
 * recorded step. The role in flight of a running thread (the records only
 * hold finished steps) is where its last step's status leads, and the edge
 * there is the last of its path.
 */
export function threadPath(edges: Edge[], steps: PathStep[], status: ThreadStatus | undefined): ThreadPath {
  const taken: number[] = [];
  let at = START;
  let atStatus: string | undefined;
  for (const s of steps) {
    const i = chooseEdge(edges, at, atStatus, s.role);
    if (i >= 0) taken.push(i);
    at = s.role;
    atStatus = s.status;
  }
  let current: string | null = null;
  if (status === "completed" && at !== START) {
    const i = chooseEdge(edges, at, atStatus, END);
    if (i >= 0) taken.push(i);
  } else if (status === "running" || status === "waiting" || status === "pausing" || status === "paused" || status === "interrupted") {
    const i = chooseEdge(edges, at, atStatus);
    if (i >= 0 && edges[i].to !== END) {
      current = edges[i].to;
      // A running thread (a pausing one too: its role finishes first; a
      // waiting one: a person plays that role) is at that role now: the
      // edge there is part of its path.
      if (status === "running" || status === "pausing" || status === "waiting") taken.push(i);
    }
  }
  return { taken, current };
}

/** takenCounts counts how often each edge (by index) was taken. */
export function takenCounts(taken: number[]): Map<number, number> {
  const n = new Map<number, number>();
  for (const i of taken) n.set(i, (n.get(i) ?? 0) + 1);
  return n;
}
