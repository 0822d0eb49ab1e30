import { api, FleetQuery, FleetThread } from "../api";

/** FleetDay is one day of a group's threads, counted per status (GET /api/gateway/stats). */
export type FleetDay = { day: string; threads: Record<string, number> };

/** FleetGroupStats is one machine's or workflow's summary over the range. */
export type FleetGroupStats = {
  key: string;
  days: FleetDay[];
  threads: number;
  ended: number;
  completed: number;
  successRate: number | null;
  medianDurationMs: number | null;
  tokens: number;
  cost: number;
};

/** FleetStats is GET /api/gateway/stats. */
export type FleetStats = { by: "machine" | "workflow"; since: string; until: string; groups: FleetGroupStats[] };

/** FleetSearch is a page of GET /api/gateway/threads; nextCursor continues it (keyset paging). */
export type FleetSearch = { threads: FleetThread[]; total: number; totalCapped?: boolean; nextCursor?: string };

function qs(q: Record<string, string | number | undefined>): string {
  const p = new URLSearchParams();
  for (const [k, v] of Object.entries(q)) if (v !== undefined && v !== "") p.set(k, String(v));
  return p.toString();
}

/** searchFleet searches every machine's threads; after (a page's nextCursor) continues a search where offset would re-read every skipped thread. */
export const searchFleet = (q: FleetQuery & { after?: string }) =>
  api<FleetSearch>(`/api/gateway/threads?${qs({ ...q, offset: q.after ? undefined : q.offset })}`);

/** fleetStats summarises the fleet per machine or workflow over [since, until). */
export const fleetStats = (q: { by: "machine" | "workflow"; since?: string; until?: string }) => api<FleetStats>(`/api/gateway/stats?${qs(q)}`);

/** OUTCOMES are the series a day's bar stacks, in order; "other" is whatever is not over yet (running, paused, interrupted). */
export const OUTCOMES = ["completed", "failed", "killed", "other"] as const;
export type Outcome = (typeof OUTCOMES)[number];

/** COLORS of the outcomes in the charts and their legend. */
export const COLORS: Record<Outcome, string> = { completed: "#2e8540", failed: "#c62828", killed: "#8e24aa", other: "#9e9e9e" };

/** outcomeOf buckets a status into a chart series. */
export function outcomeOf(status: string): Outcome {
  return status === "completed" || status === "failed" || status === "killed" ? status : "other";
}

/** dayRange lists every UTC day (yyyy-mm-dd) from since's day up to until, exclusive, so days without threads show as gaps. */
export function dayRange(since: string, until: string): string[] {
  const out: string[] = [];
  const start = Date.parse(`${since.slice(0, 10)}T00:00:00Z`);
  const end = Date.parse(until);
  if (Number.isNaN(start) || Number.isNaN(end)) return out;
  for (let t = start; t < end && out.length < 400; t += 86_400_000) out.push(new Date(t).toISOString().slice(0, 10));
  return out;
}

/** series turns a group's days into one count per outcome per day of the range (the chart's data). */
export function series(g: FleetGroupStats, days: string[]): Record<Outcome, number[]> {
  const out = Object.fromEntries(OUTCOMES.map((o) => [o, days.map(() => 0)])) as Record<Outcome, number[]>;
  const at = new Map(days.map((d, i) => [d, i]));
  for (const d of g.days) {
    const i = at.get(d.day);
    if (i === undefined) continue;
    for (const [status, n] of Object.entries(d.threads)) out[outcomeOf(status)][i] += n;
  }
  return out;
}

/** compact formats a count: 1234 → 1.2k, 2500000 → 2.5M. */
export function compact(n: number): string {
  if (n < 1000) return String(n);
  if (n < 1_000_000) return `${(n / 1000).toFixed(n < 10_000 ? 1 : 0)}k`;
  return `${(n / 1_000_000).toFixed(1)}M`;
}
