import { useMemo, useState } from "react";
import { isOffline, machine, useApi } from "../api";
import { ErrorBox } from "../common/ErrorBox";
import { Loading } from "../common/Loading";
import { OfflineNote } from "../common/Offline";
import { useActionBlock } from "../machines/scope";
import { RunDialog } from "./RunDialog";
import { DEFAULT_SORT, ThreadTable } from "./ThreadTable";
import { Sort } from "./threads";

import { THREAD_STATUSES } from "./Status";

const PAGE = 20;

export function ThreadList({ machine: m }: { machine: string }) {
  const [status, setStatus] = useState("");
  const [workflow, setWorkflow] = useState("");
  const [offset, setOffset] = useState(0);
  const [running, setRunning] = useState(false);
  const [sort, setSort] = useState<Sort>(DEFAULT_SORT);
  const api = useMemo(() => machine(m), [m]);
  const q = useApi(
    () => api.threads({ limit: PAGE, offset, status: status || undefined, workflow: workflow || undefined }),
    [m, status, workflow, offset],
    5000,
    { topic: "threads", machine: m },
  );
  const wfs = useApi(api.workflows, [m]);
  const total = q.data?.total ?? 0;
  // Offline: the gateway answered from its memory (offline: true), or, a
  // gateway that keeps none, refused with "offline".
  const offline = !!q.data?.offline || (!!q.error && isOffline(q.error));
  // An offline machine cannot list its workflows: offer the ones its threads ran.
  const workflows = wfs.data?.workflows.map((w) => w.name) ?? [...new Set([...(q.data?.threads ?? []).map((t) => t.workflow ?? ""), workflow].filter(Boolean))].sort();
  const block = useActionBlock();
  // A connector that sends each thread's prompt gets the Prompt column
  // "all machines" has; an older one sends none, and the column would be empty.
  const prompts = (q.data?.threads ?? []).some((t) => "prompt" in t);
  return (
    <section aria-labelledby="threads-title">
      <div className="row between wrap">
        <h1 id="threads-title">Threads on {m}</h1>
        <div className="row wrap">
          <label className="inline">
            Status{" "}
            <select value={status} onChange={(e) => { setStatus(e.target.value); setOffset(0); }} aria-label="status filter">
              <option value="">all</option>
              {THREAD_STATUSES.map((s) => <option key={s} value={s}>{s}</option>)}
            </select>
          </label>
          <label className="inline">
            Workflow{" "}
            <select value={workflow} onChange={(e) => { setWorkflow(e.target.value); setOffset(0); }} aria-label="workflow filter">
              <option value="">all</option>
              {workflows.map((w) => <option key={w} value={w}>{w}</option>)}
            </select>
          </label>
          {/* An offline machine cannot run anything: no Run… at all (the banner says why). */}
          {!offline && (
            <button className="primary" onClick={() => setRunning(true)} data-testid="run-open" disabled={!!block} title={block ?? undefined}>
              Run…
            </button>
          )}
        </div>
      </div>
      {offline && q.data?.offline && <OfflineNote machine={m} lastSeen={q.data.lastSeen} />}
      {q.error && isOffline(q.error) && (
        <p className="offline-banner" data-testid="offline-banner" role="status">
          {q.data
            ? `${m} went offline: the threads below are as it last listed them; actions need it online.`
            : `${m} is offline, and this gateway keeps no memory of its threads: they show once it is back online.`}
        </p>
      )}
      {q.error && !isOffline(q.error) && <ErrorBox error={q.error} retry={q.reload} />}
      {!q.data && q.loading && <Loading what="threads" />}
      {q.data && q.data.threads.length === 0 && <p className="empty muted">No threads{status ? ` with status ${status}` : ""}{workflow ? ` of ${workflow}` : ""} yet.</p>}
      {q.data && q.data.threads.length > 0 && (
        <ThreadTable
          rows={q.data.offline ? q.data.threads.map((t) => ({ ...t, offline: true, lastSeen: q.data!.lastSeen })) : q.data.threads}
          machine={m}
          offline={!!q.data.offline}
          prompts={prompts}
          sort={sort}
          onSort={setSort}
          caption={total > PAGE ? `Threads ${offset + 1}–${Math.min(offset + PAGE, total)} of ${total}; sorting orders the rows on this page only.` : undefined}
        />
      )}
      {total > PAGE && (
        <nav className="row pager" aria-label="pages">
          <button disabled={offset === 0} onClick={() => setOffset(Math.max(0, offset - PAGE))}>← Newer</button>
          <span>{offset + 1}–{Math.min(offset + PAGE, total)} of {total}</span>
          <button disabled={offset + PAGE >= total} onClick={() => setOffset(offset + PAGE)}>Older →</button>
        </nav>
      )}
      {running && !offline && <RunDialog machine={m} onClose={() => setRunning(false)} />}
    </section>
  );
}
