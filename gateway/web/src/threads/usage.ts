import { ThreadRecord } from "../api";

// Model usage as a connector reports it, per step and per thread: tokens,
// models, cost. Read tolerantly: an older connector sends none, and a
// field it does not know is left out rather than shown as 0.

/** Usage is what the page shows of a usage object. */
export type Usage = {
  calls?: number;
  promptTokens?: number;
  completionTokens?: number;
  totalTokens?: number;
  models: string[];
  costUsd?: number;
  /** calls whose tokens the provider did not report, and calls without a price */
  unknownCalls?: number;
  unpricedCalls?: number;
};

const num = (v: unknown) => (typeof v === "number" && Number.isFinite(v) && v >= 0 ? v : undefined);

/** readUsage reads a record's or thread's usage field; null when there is none to show. */
export function readUsage(v: unknown): Usage | null {
  if (!v || typeof v !== "object" || Array.isArray(v)) return null;
  const o = v as Record<string, unknown>;
  const models = Array.isArray(o.models) ? o.models.filter((m): m is string => typeof m === "string") : typeof o.model === "string" ? [o.model] : [];
  const u: Usage = {
    calls: num(o.calls),
    promptTokens: num(o.promptTokens),
    completionTokens: num(o.completionTokens),
    totalTokens: num(o.totalTokens) ?? num(o.tokens),
    models,
    costUsd: num(o.costUsd) ?? num(o.cost),
    unknownCalls: num(o.unknownCalls),
    unpricedCalls: num(o.unpricedCalls),
  };
  if (u.totalTokens === undefined && u.promptTokens !== undefined && u.completionTokens !== undefined) u.totalTokens = u.promptTokens + u.completionTokens;
  // No call at all (a thread that used no model): nothing to show.
  if (u.calls === 0) return null;
  if (u.totalTokens === undefined && u.costUsd === undefined && !models.length && !u.calls) return null;
  return u;
}

/** fmtTokens: 1234 → "1,234", 1234567 → "1.23 M". */
export function fmtTokens(n: number): string {
  return n >= 1_000_000 ? `${(n / 1_000_000).toFixed(2)} M` : n.toLocaleString("en-US");
}

/**
 * formatCost is how every cost on the dashboard reads (the CLI's rule too):
 * "—" when it cannot be known (not a number, negative, infinite), "$0" for
 * nothing, "<$0.001" for less than a tenth of a cent (never "$0.000", which
 * reads as free), below a dollar three significant digits (trailing zeros
 * dropped, at least two decimals: "$0.00123", "$0.012", "$0.50"), and from
 * a dollar up, after rounding, two decimals ("$1.00", "$1234.50").
 */
export function formatCost(usd: number): string {
  if (!Number.isFinite(usd) || usd < 0) return "—";
  if (usd === 0) return "$0";
  if (usd < 0.001) return "<$0.001";
  if (usd < 1) {
    const sig = Number(usd.toPrecision(3));
    if (sig < 1) {
      const [, decimals = ""] = String(sig).split(".");
      return `$${sig.toFixed(Math.max(2, decimals.length))}`;
    }
  }
  return `$${usd.toFixed(2)}`;
}

/** usageText is one line: "1,234 tokens (1,000 in, 234 out) · gpt-x · $0.012". */
export function usageText(u: Usage): string {
  const parts: string[] = [];
  if (u.totalTokens !== undefined) {
    const split = u.promptTokens !== undefined && u.completionTokens !== undefined ? ` (${fmtTokens(u.promptTokens)} in, ${fmtTokens(u.completionTokens)} out)` : "";
    parts.push(`${fmtTokens(u.totalTokens)} tokens${split}`);
  }
  if (u.calls) parts.push(`${u.calls} call${u.calls === 1 ? "" : "s"}`);
  if (u.models.length) parts.push(u.models.join(", "));
  if (u.costUsd !== undefined) parts.push(formatCost(u.costUsd) + (u.unpricedCalls ? ` + ${u.unpricedCalls} unpriced` : ""));
  else if (u.totalTokens !== undefined) parts.push("cost unknown");
  if (u.unknownCalls) parts.push(`${u.unknownCalls} call${u.unknownCalls === 1 ? "" : "s"} without token counts`);
  return parts.join(" · ");
}

/** withUsage is records, each step and the result given the usage of its place in from (GET /api/threads/:id) when it carries none itself. */
export function withUsage(records: ThreadRecord[], from: ThreadRecord[] | undefined): ThreadRecord[] {
  if (!from || records === from) return records;
  const has = (r: ThreadRecord) => (r as { usage?: unknown }).usage != null;
  const steps = from.filter((r) => r.type !== "thread-start");
  let i = 0;
  let changed = false;
  const out = records.map((r) => {
    if (r.type === "thread-start") return r;
    const twin = steps[i++];
    if (has(r) || !twin || twin.type !== r.type || !has(twin)) return r;
    changed = true;
    return { ...r, usage: (twin as { usage?: unknown }).usage } as unknown as ThreadRecord;
  });
  return changed ? out : records;
}
