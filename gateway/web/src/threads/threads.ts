// Thread-table logic: loading every online machine's threads in parallel,
// merging them, and sorting the rows on screen.
import { api, ApiError, clientPath, Endpoint, FleetThread, gateway, machine, noMemory, ThreadSummary } from "../api";

export type MachineRow = ThreadSummary & { machine: string };
export type MachineResult = { machine: string; threads?: ThreadSummary[]; total?: number; error?: Error };
export type AllThreads = {
  rows: MachineRow[];
  /** machines that answered, with how many threads they hold in all */
  loaded: { machine: string; shown: number; total: number }[];
  /** machines that did not answer, with why */
  failed: { machine: string; error: Error }[];
};

export const ALL_LIMIT = 50;

/** loadMachines asks every machine for its newest threads at once; one failing never fails the others. */
export async function loadMachines(names: string[], limit = ALL_LIMIT): Promise<MachineResult[]> {
  return Promise.all(
    names.map(async (m): Promise<MachineResult> => {
      try {
        const r = await machine(m).threads({ limit, offset: 0 });
        return { machine: m, threads: r.threads ?? [], total: r.total ?? (r.threads ?? []).length };
      } catch (e) {
        return { machine: m, error: e instanceof Error ? e : new ApiError(0, String(e)) };
      }
    }),
  );
}

/** mergeThreads puts every machine's threads into one list, newest start first. */
export function mergeThreads(results: MachineResult[]): AllThreads {
  const rows: MachineRow[] = [];
  const loaded: AllThreads["loaded"] = [];
  const failed: AllThreads["failed"] = [];
  for (const r of [...results].sort((a, b) => a.machine.localeCompare(b.machine))) {
    if (r.error || !r.threads) {
      failed.push({ machine: r.machine, error: r.error ?? new Error("no answer") });
      continue;
    }
    loaded.push({ machine: r.machine, shown: r.threads.length, total: Math.max(r.total ?? 0, r.threads.length) });
    for (const t of r.threads) rows.push({ ...t, machine: r.machine });
  }
  return { rows: sortThreads(rows, { key: "started", dir: "desc" }), loaded, failed };
}

/** splitEndpoints returns the online machines (to ask) and the offline ones (to mention), by name. */
export function splitEndpoints(eps: Endpoint[]): { online: string[]; offline: string[] } {
  const names = (s: Endpoint["status"]) => eps.filter((e) => e.status === s).map((e) => e.name).sort((a, b) => a.localeCompare(b));
  return { online: names("online"), offline: eps.filter((e) => e.status !== "online").map((e) => e.name).sort((a, b) => a.localeCompare(b)) };
}

// --- sorting -------------------------------------------------------------------

export type SortKey = "status" | "workflow" | "started" | "updated" | "duration" | "machine";
export type SortDir = "asc" | "desc";
export type Sort = { key: SortKey; dir: SortDir };

// Live threads first, then the ones that need a look, then the finished ones.
const STATUS_ORDER = ["running", "waiting", "pausing", "paused", "interrupted", "damaged", "failed", "killed", "completed"];

const time = (s: string) => {
  const t = Date.parse(s);
  return Number.isFinite(t) ? t : 0;
};

/**
 * threadDuration: how long a thread ran (up to now while it runs). A
 * last-known summary (offline) has its duration as last reported: its
 * machine is not there to say it still runs.
 */
export function threadDuration(t: ThreadSummary & { offline?: boolean; durationMs?: number }, now = Date.now()): number {
  if (t.offline && typeof t.durationMs === "number") return t.durationMs;
  const start = time(t.startedAt);
  const end = t.status === "running" || t.status === "waiting" ? now : time(t.updatedAt);
  return end - start;
}

function compare(a: ThreadSummary & { machine?: string }, b: ThreadSummary & { machine?: string }, key: SortKey, now: number): number {
  switch (key) {
    case "status": {
      const ia = STATUS_ORDER.indexOf(a.status);
      const ib = STATUS_ORDER.indexOf(b.status);
      return (ia < 0 ? 99 : ia) - (ib < 0 ? 99 : ib);
    }
    case "workflow":
      return (a.workflow ?? "").localeCompare(b.workflow ?? "");
    case "machine":
      return (a.machine ?? "").localeCompare(b.machine ?? "");
    case "started":
      return time(a.startedAt) - time(b.startedAt);
    case "updated":
      return time(a.updatedAt) - time(b.updatedAt);
    case "duration":
      return threadDuration(a, now) - threadDuration(b, now);
  }
}

/**
 * sortThreads returns a sorted copy; ties go newest start first, then by id,
 * so the order is stable between polls. Unknown workflows sort last either way.
 */
export function sortThreads<T extends ThreadSummary & { machine?: string }>(rows: T[], sort: Sort, now = Date.now()): T[] {
  const sign = sort.dir === "asc" ? 1 : -1;
  return [...rows].sort((a, b) => {
    if (sort.key === "workflow" && !a.workflow !== !b.workflow) return a.workflow ? -1 : 1;
    const c = compare(a, b, sort.key, now) * sign;
    if (c) return c;
    return time(b.startedAt) - time(a.startedAt) || a.threadId.localeCompare(b.threadId) || (a.machine ?? "").localeCompare(b.machine ?? "");
  });
}

/** nextSort is what clicking a column header does: a new column starts in its natural direction, the same one flips. */
export function nextSort(cur: Sort, key: SortKey): Sort {
  if (cur.key === key) return { key, dir: cur.dir === "asc" ? "desc" : "asc" };
  const textual = key === "status" || key === "workflow" || key === "machine";
  return { key, dir: textual ? "asc" : "desc" };
}

/** sortWords says a sort's direction in words that fit its column: "newest first", "longest first", "A to Z"… */
export function sortWords(s: Sort): string {
  const asc = s.dir === "asc";
  switch (s.key) {
    case "started":
    case "updated":
      return asc ? "oldest first" : "newest first";
    case "duration":
      return asc ? "shortest first" : "longest first";
    case "status":
      return asc ? "live ones first" : "finished ones first";
    default:
      return asc ? "A to Z" : "Z to A";
  }
}

export const ariaSort = (cur: Sort, key: SortKey): "ascending" | "descending" | "none" =>
  cur.key === key ? (cur.dir === "asc" ? "ascending" : "descending") : "none";

// --- the gateway's memory --------------------------------------------------------

const LOOKUP_PAGE = 500;
const LOOKUP_MAX = 10_000;

/**
 * lastKnownThread finds a thread's last-known summary in the gateway's
 * memory, for the page of a thread whose machine is offline: null when the
 * gateway does not know it, or keeps no memory (an older gateway: 404).
 * The search has no id filter, so it pages through the machine's threads
 * (newest first, where a thread someone just looked at usually is).
 */
export async function lastKnownThread(m: string, id: string): Promise<FleetThread | null> {
  for (let offset = 0; offset < LOOKUP_MAX; offset += LOOKUP_PAGE) {
    let page: { threads: FleetThread[]; total: number };
    try {
      page = await gateway.threads({ machine: m, limit: LOOKUP_PAGE, offset });
    } catch (e) {
      if (noMemory(e)) return null;
      throw e;
    }
    const hit = (page.threads ?? []).find((t) => t.threadId === id && t.machine === m);
    if (hit) return hit;
    if ((page.threads ?? []).length < LOOKUP_PAGE || offset + LOOKUP_PAGE >= page.total) return null;
  }
  return null;
}

/** fleetRow turns a remembered thread into a table row; online says whether its machine is up now. */
export function fleetRow(t: FleetThread): MachineRow & { offline: boolean; lastSeen?: string; prompt?: string; summary?: string; durationMs?: number; usage?: unknown } {
  return {
    threadId: t.threadId,
    workflow: t.workflow ?? null,
    hash: "",
    startedAt: t.startedAt,
    updatedAt: t.updatedAt,
    status: t.status,
    source: "",
    machine: t.machine,
    offline: t.online === false,
    lastSeen: t.lastSeen,
    prompt: t.prompt,
    summary: t.summary,
    durationMs: t.durationMs,
    // The connector's own usage object when the gateway kept it, else the
    // totals the gateway indexes (a thread with neither shows none).
    usage: t.usage ?? (t.tokens || t.cost ? { tokens: t.tokens || undefined, cost: t.cost || undefined } : undefined),
  };
}

// --- actions -----------------------------------------------------------------

/**
 * forkAtStep forks a thread at its step-th role step (1-based, as the page
 * numbers them): the new thread replays the steps up to that one and runs
 * on. A role that ran twice forks from the run that was clicked.
 */
export function forkAtStep(m: string, id: string, step: number): Promise<{ threadId: string }> {
  return api<{ threadId: string }>(clientPath(m, `/threads/${encodeURIComponent(id)}/fork`), { method: "POST", body: { step } });
}

/** stepHref is the address of a thread's page scrolled to one step (#/m/<m>/threads/<id>?step=N), which survives a reload. */
export function stepHref(threadHref: string, step: number): string {
  return `${threadHref}?step=${step}`;
}
