import { useState } from "react";
import { ago, duration, fmtTime, ThreadSummary } from "../api";
import { href } from "../route";
import { Status } from "./Status";
import { ariaSort, nextSort, Sort, SortKey, sortThreads, threadDuration } from "./threads";

const COLUMNS: { key: SortKey; label: string }[] = [
  { key: "status", label: "Status" },
  { key: "workflow", label: "Workflow" },
  { key: "started", label: "Started" },
  { key: "updated", label: "Updated" },
  { key: "duration", label: "Duration" },
];

export const DEFAULT_SORT: Sort = { key: "started", dir: "desc" };

/**
 * ThreadTable lists threads, sortable by clicking (or Enter/Space on) a
 * column header, which sorts the rows it is given, on screen. Without a
 * machine (rows from several) it has a Machine column. The sort is kept by
 * the caller when given (sort, onSort), so it survives paging and reloads.
 */
export function ThreadTable({ rows, machine: one, caption, sort: given, onSort }: {
  rows: (ThreadSummary & { machine?: string })[];
  machine?: string;
  caption?: string;
  sort?: Sort;
  onSort?: (s: Sort) => void;
}) {
  const [own, setOwn] = useState<Sort>(DEFAULT_SORT);
  const sort = given ?? own;
  const setSort = (f: (cur: Sort) => Sort) => (onSort ? onSort(f(sort)) : setOwn(f));
  const now = Date.now();
  const sorted = sortThreads(rows, sort, now);
  const multi = one === undefined;
  const cols = multi ? [COLUMNS[0], { key: "machine" as SortKey, label: "Machine" }, ...COLUMNS.slice(1)] : COLUMNS;
  const dirWord = sort.dir === "asc" ? "ascending" : "descending";
  const sortedBy = cols.find((c) => c.key === sort.key)?.label.toLowerCase() ?? sort.key;
  return (
    <div className="table-wrap">
      <table className="threads">
        <caption className={caption ? "caption" : "sr-only"}>
          {caption ? `${caption} ` : ""}Sorted by {sortedBy}, {dirWord}.
        </caption>
        <thead>
          <tr>
            <th scope="col">Thread</th>
            {cols.map((c) => (
              <th key={c.key} scope="col" aria-sort={ariaSort(sort, c.key)} data-sort={c.key}>
                <button type="button" className="sort" onClick={() => setSort((cur) => nextSort(cur, c.key))}>
                  {c.label}
                  <span aria-hidden="true" className="sort-mark">{sort.key === c.key ? (sort.dir === "asc" ? " ▲" : " ▼") : " ↕"}</span>
                </button>
              </th>
            ))}
          </tr>
        </thead>
        <tbody>
          {sorted.map((t) => {
            const m = t.machine ?? one ?? "";
            const start = Date.parse(t.startedAt);
            return (
              <tr key={`${m}/${t.threadId}`} data-thread={t.threadId} data-machine={m}>
                <td><a href={href.thread(m, t.threadId)} className="mono">{t.threadId}</a></td>
                <td><Status s={t.status} /></td>
                {multi && <td><a href={href.threads(m)} className="mlink" data-machine-link={m}>{m}</a></td>}
                <td>{t.workflow ?? <span className="muted">unknown</span>}</td>
                <td title={fmtTime(t.startedAt)}>{ago(start, now)}</td>
                <td title={fmtTime(t.updatedAt)}>{ago(Date.parse(t.updatedAt), now)}</td>
                <td>{duration(threadDuration(t, now))}</td>
              </tr>
            );
          })}
        </tbody>
      </table>
    </div>
  );
}
