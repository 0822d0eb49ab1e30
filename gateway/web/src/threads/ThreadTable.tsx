import { useState } from "react";
import { ago, duration, fmtTime, ThreadSummary } from "../api";

/**
 * ThreadRow is a row of the table: a machine's thread summary, with its
 * machine when the table lists several, and what the gateway's memory adds
 * (offline: the machine is offline and this is its last-known state).
 */
export type ThreadRow = ThreadSummary & { machine?: string; offline?: boolean; lastSeen?: string; summary?: string; durationMs?: number };
import { ScrollBox } from "../common/ScrollBox";
import { href } from "../route";
import { Status } from "./Status";
import { ariaSort, nextSort, Sort, SortKey, sortThreads, sortWords, threadDuration } from "./threads";
import { fmtTokens, formatCost, readUsage, Usage, usageText } from "./usage";

/** usageCell is a row's model usage in a few characters: tokens and cost. */
function usageCell(u: Usage | null): string {
  if (!u) return "—";
  const parts: string[] = [];
  if (u.totalTokens !== undefined) parts.push(`${fmtTokens(u.totalTokens)} tok`);
  if (u.costUsd !== undefined) parts.push(formatCost(u.costUsd) + (u.unpricedCalls ? "+" : ""));
  return parts.join(" · ") || "—";
}

const COLUMNS: { key: SortKey; label: string }[] = [
  { key: "status", label: "Status" },
  { key: "workflow", label: "Workflow" },
  { key: "started", label: "Started" },
  { key: "updated", label: "Updated" },
  { key: "duration", label: "Duration" },
];

/** DEFAULT_SORT is a machine's own order: newest start first (as its connector lists them). */
export const DEFAULT_SORT: Sort = { key: "started", dir: "desc" };

/**
 * ThreadTable lists threads, sortable by clicking (or Enter/Space on) a
 * column header, which sorts the rows it is given, on screen. Without a
 * machine (rows from several) it has a Machine column. The sort is kept by
 * the caller when given (sort, onSort), so it survives paging and reloads.
 */
export function ThreadTable({ rows, machine: one, caption, sort: given, onSort, offline: allOffline = false, prompts = false }: {
  rows: ThreadRow[];
  machine?: string;
  caption?: string;
  sort?: Sort;
  onSort?: (s: Sort) => void;
  /** every row is the last-known state of an offline machine */
  offline?: boolean;
  /** show each row's prompt (and summary) */
  prompts?: boolean;
}) {
  const [own, setOwn] = useState<Sort>(DEFAULT_SORT);
  const sort = given ?? own;
  const setSort = (f: (cur: Sort) => Sort) => (onSort ? onSort(f(sort)) : setOwn(f));
  const now = Date.now();
  const sorted = sortThreads(rows, sort, now);
  const multi = one === undefined;
  const base = prompts ? [...COLUMNS.slice(0, 2), { key: "prompt" as const, label: "Prompt" }, ...COLUMNS.slice(2)] : COLUMNS;
  const cols: { key: SortKey | "prompt"; label: string }[] = multi ? [base[0], { key: "machine", label: "Machine" }, ...base.slice(1)] : base;
  // A Usage column only where some thread used a model: most lists of a
  // machine without one would show a column of dashes.
  const usage = rows.some((r) => readUsage(r.usage));
  const sortedBy = cols.find((c) => c.key === sort.key)?.label.toLowerCase() ?? sort.key;
  return (
    <ScrollBox>
      <table className="threads">
        <caption className={caption ? "caption" : "sr-only"}>
          {caption ? `${caption} ` : ""}Sorted by {sortedBy}, {sortWords(sort)}.
        </caption>
        <thead>
          <tr>
            <th scope="col">Thread</th>
            {cols.map(({ key, label }) => {
              if (key === "prompt") return <th key="prompt" scope="col">Prompt → summary</th>;
              return (
                <th key={key} scope="col" aria-sort={ariaSort(sort, key)} data-sort={key}>
                  <button type="button" className="sort" onClick={() => setSort((cur) => nextSort(cur, key))}>
                    {label}
                    <span aria-hidden="true" className="sort-mark">{sort.key === key ? (sort.dir === "asc" ? " ▲" : " ▼") : " ↕"}</span>
                  </button>
                </th>
              );
            })}
            {usage && <th scope="col">Model usage</th>}
          </tr>
        </thead>
        <tbody>
          {sorted.map((t) => {
            const m = t.machine ?? one ?? "";
            const start = Date.parse(t.startedAt);
            const off = allOffline || !!t.offline;
            return (
              <tr key={`${m}/${t.threadId}`} data-thread={t.threadId} data-machine={m} data-offline={off ? "true" : undefined} className={off ? "offline-row" : undefined}>
                <td><a href={href.thread(m, t.threadId)} className="mono">{t.threadId}</a></td>
                <td>
                  <Status s={t.status} />
                  {off && <span className="lastknown" title={t.lastSeen ? `machine offline, last seen ${fmtTime(t.lastSeen)}` : "machine offline"}> last known</span>}
                </td>
                {multi && (
                  <td className="wrap">
                    <a href={href.threads(m)} className="mlink" data-machine-link={m}>{m}</a>
                    {off && <span className="muted small"> · offline{t.lastSeen ? `, seen ${ago(Date.parse(t.lastSeen), now)}` : ""}</span>}
                  </td>
                )}
                <td className="wrap">{t.workflow ?? <span className="muted">unknown</span>}</td>
                {prompts && (
                  <td className="prompt-cell" title={[t.prompt, t.summary].filter(Boolean).join("\n\n") || undefined}>
                    <div className="clamp">
                      {t.prompt || <span className="muted">no prompt</span>}
                      {t.summary && <span className="muted"> → {t.summary}</span>}
                    </div>
                  </td>
                )}
                <td title={fmtTime(t.startedAt)}>{ago(start, now)}</td>
                <td title={fmtTime(t.updatedAt)}>{ago(Date.parse(t.updatedAt), now)}</td>
                <td>{duration(threadDuration(t, now))}</td>
                {usage && <UsageCell u={readUsage(t.usage)} />}
              </tr>
            );
          })}
        </tbody>
      </table>
    </ScrollBox>
  );
}

/** UsageCell is a row's usage cell: the short form, the whole of it on hover. */
function UsageCell({ u }: { u: Usage | null }) {
  return (
    <td className="usage-cell" data-usage title={u ? usageText(u) : "no model calls recorded"}>
      {usageCell(u)}
    </td>
  );
}
