import { FormEvent, lazy, ReactNode, Suspense, useEffect, useMemo, useRef, useState } from "react";
import Markdown from "react-markdown";
import {
  ago, ApiError, duration, fmtTime, gateway, HASH_RE, machine, RoleRecord, TERMINAL, threadGraphSource, ThreadRecord, ThreadStatus, ThreadSummary, useApi, useLive,
} from "./api";
import { visitedEdges } from "./path";
import { href, navigate } from "./route";
import { ALL_LIMIT, ariaSort, loadMachines, mergeThreads, nextSort, Sort, SortKey, sortThreads, splitEndpoints, threadDuration } from "./threads";

const Graph = lazy(() => import("./Graph"));

// --- small shared pieces ---------------------------------------------------

export function Loading({ what }: { what: string }) {
  return <p className="muted" role="status">Loading {what}…</p>;
}
export function ErrorBox({ error, retry }: { error: Error; retry?: () => void }) {
  return (
    <div className="error-box" role="alert">
      <strong>Something went wrong:</strong> {error.message}
      {retry && (
        <button className="link" onClick={retry}>
          Retry
        </button>
      )}
    </div>
  );
}
function Status({ s }: { s: string }) {
  return <span className={`badge st-${s}`}>{s}</span>;
}
/** Linkify turns CAS hashes in text into links to the CAS viewer. */
function Linkify({ m, text }: { m: string; text: string }) {
  const out: ReactNode[] = [];
  let last = 0;
  for (const match of text.matchAll(HASH_RE)) {
    const i = match.index ?? 0;
    out.push(text.slice(last, i));
    out.push(
      <a key={i} href={href.cas(m, match[0])} className="hash">
        {match[0]}
      </a>,
    );
    last = i + match[0].length;
  }
  out.push(text.slice(last));
  return <>{out}</>;
}
function HashLink({ m, hash, label }: { m: string; hash?: string | null; label: string }) {
  if (!hash) return null;
  return (
    <span className="hashlink">
      {label} <a href={href.cas(m, hash)} className="hash" data-cas={hash}>{hash}</a>
    </span>
  );
}

/** Modal is a small accessible dialog: focus moves in, Escape closes. */
function Modal({ title, onClose, children }: { title: string; onClose: () => void; children: ReactNode }) {
  const ref = useRef<HTMLDivElement>(null);
  // The latest onClose, so a parent re-rendering (polling) never re-runs the
  // focus effect and steals the focus from a field being typed in.
  const close = useRef(onClose);
  close.current = onClose;
  useEffect(() => {
    const prev = document.activeElement as HTMLElement | null;
    const first = ref.current?.querySelector<HTMLElement>("[autofocus], select, textarea, input, button");
    first?.focus();
    const onKey = (e: KeyboardEvent) => {
      if (e.key === "Escape") close.current();
      if (e.key !== "Tab" || !ref.current) return;
      // Keep Tab inside the dialog.
      const items = [...ref.current.querySelectorAll<HTMLElement>("button, select, textarea, input, a[href]")].filter((el) => !(el as HTMLButtonElement).disabled);
      if (items.length === 0) return;
      const [a, z] = [items[0], items[items.length - 1]];
      if (e.shiftKey && document.activeElement === a) {
        e.preventDefault();
        z.focus();
      } else if (!e.shiftKey && document.activeElement === z) {
        e.preventDefault();
        a.focus();
      }
    };
    window.addEventListener("keydown", onKey);
    return () => {
      window.removeEventListener("keydown", onKey);
      prev?.focus?.();
    };
  }, []);
  return (
    <div className="backdrop" onClick={(e) => e.target === e.currentTarget && onClose()}>
      <div className="card modal" role="dialog" aria-modal="true" aria-labelledby="modal-title" ref={ref}>
        <h2 id="modal-title">{title}</h2>
        {children}
      </div>
    </div>
  );
}

/** ConfirmButton asks before it acts, and shows the action's error. */
function ConfirmButton({ label, question, action, className, testid }: { label: string; question: string; action: () => Promise<unknown>; className?: string; testid?: string }) {
  const [asking, setAsking] = useState(false);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const go = async () => {
    setBusy(true);
    setError(null);
    try {
      await action();
      setAsking(false);
    } catch (e) {
      setError((e as Error).message);
    } finally {
      setBusy(false);
    }
  };
  return (
    <>
      <button className={className} data-testid={testid} onClick={() => setAsking(true)}>
        {label}
      </button>
      {asking && (
        <Modal title={label} onClose={() => setAsking(false)}>
          <p>{question}</p>
          {error && <p className="error" role="alert">{error}</p>}
          <div className="row end">
            <button onClick={() => setAsking(false)}>Cancel</button>
            <button className="primary" data-testid="confirm" onClick={go} disabled={busy} autoFocus>
              {busy ? "Working…" : "Confirm"}
            </button>
          </div>
        </Modal>
      )}
    </>
  );
}

// --- threads -----------------------------------------------------------------

/**
 * AllThreads is the landing page: every online machine's newest threads in
 * one table, with a note for the offline machines and an error per machine
 * that did not answer.
 */
export function AllThreads() {
  const eps = useApi(gateway.endpoints, [], 5000);
  const split = eps.data ? splitEndpoints(eps.data) : null;
  const online = split?.online ?? [];
  const key = online.join("\n");
  const q = useApi(async () => (split ? mergeThreads(await loadMachines(online)) : null), [key, !!split], 5000);
  const data = q.data;
  const [sort, setSort] = useState<Sort>(DEFAULT_SORT);
  return (
    <section aria-labelledby="all-title" data-testid="all-threads">
      <h1 id="all-title">Threads on all machines</h1>
      {eps.error && <ErrorBox error={eps.error} retry={eps.reload} />}
      {!eps.data && eps.loading && <Loading what="machines" />}
      {split && split.online.length + split.offline.length === 0 && (
        <p className="empty muted">No machines yet. Start <code>uncaged-workflow connect</code> on one.</p>
      )}
      {split && split.online.length > 0 && (
        <p className="muted machines-up" data-testid="machines-up">
          Online: {split.online.map((m, i) => (
            <span key={m}>{i > 0 && ", "}<a href={href.threads(m)}>{m}</a></span>
          ))}
        </p>
      )}
      {split && split.offline.length > 0 && (
        <ul className="offline-note muted" data-testid="offline-note">
          {split.offline.map((m) => <li key={m} data-machine={m}>{m} offline — its threads are not shown</li>)}
        </ul>
      )}
      {data?.failed.map((f) => (
        <div key={f.machine} className="error-box" role="alert" data-failed={f.machine}>
          <strong>{f.machine}:</strong> could not list its threads: {f.error.message}
          <button className="link" onClick={q.reload}>Retry</button>
        </div>
      ))}
      {split && online.length > 0 && !data && q.loading && <Loading what="threads" />}
      {data && online.length > 0 && data.rows.length === 0 && data.loaded.length > 0 && <p className="empty muted">No threads yet on any online machine.</p>}
      {data && data.rows.length > 0 && (
        <ThreadTable
          rows={data.rows}
          sort={sort}
          onSort={setSort}
          caption={data.loaded.some((l) => l.total > l.shown)
            ? `The newest ${ALL_LIMIT} threads of each machine (${data.loaded.filter((l) => l.total > l.shown).map((l) => `${l.machine} has ${l.total}`).join(", ")}); sorting orders these rows only.`
            : undefined}
        />
      )}
    </section>
  );
}

const STATUSES: ThreadStatus[] = ["running", "paused", "completed", "failed", "killed", "interrupted"];
const PAGE = 20;

export function ThreadList({ machine: m }: { machine: string }) {
  const [status, setStatus] = useState("");
  const [workflow, setWorkflow] = useState("");
  const [offset, setOffset] = useState(0);
  const [running, setRunning] = useState(false);
  const [sort, setSort] = useState<Sort>(DEFAULT_SORT);
  const api = useMemo(() => machine(m), [m]);
  const q = useApi(() => api.threads({ limit: PAGE, offset, status: status || undefined, workflow: workflow || undefined }), [m, status, workflow, offset], 5000);
  const wfs = useApi(api.workflows, [m]);
  const total = q.data?.total ?? 0;
  return (
    <section aria-labelledby="threads-title">
      <div className="row between wrap">
        <h1 id="threads-title">Threads on {m}</h1>
        <div className="row wrap">
          <label className="inline">
            Status{" "}
            <select value={status} onChange={(e) => { setStatus(e.target.value); setOffset(0); }} aria-label="status filter">
              <option value="">all</option>
              {STATUSES.map((s) => <option key={s} value={s}>{s}</option>)}
            </select>
          </label>
          <label className="inline">
            Workflow{" "}
            <select value={workflow} onChange={(e) => { setWorkflow(e.target.value); setOffset(0); }} aria-label="workflow filter">
              <option value="">all</option>
              {wfs.data?.workflows.map((w) => <option key={w.name} value={w.name}>{w.name}</option>)}
            </select>
          </label>
          <button className="primary" onClick={() => setRunning(true)} data-testid="run-open">
            Run…
          </button>
        </div>
      </div>
      {q.error && <ErrorBox error={q.error} retry={q.reload} />}
      {!q.data && q.loading && <Loading what="threads" />}
      {q.data && q.data.threads.length === 0 && <p className="empty muted">No threads{status ? ` with status ${status}` : ""}{workflow ? ` of ${workflow}` : ""} yet.</p>}
      {q.data && q.data.threads.length > 0 && (
        <ThreadTable
          rows={q.data.threads}
          machine={m}
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
      {running && <RunDialog machine={m} onClose={() => setRunning(false)} />}
    </section>
  );
}

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

function RunDialog({ machine: m, onClose }: { machine: string; onClose: () => void }) {
  const api = useMemo(() => machine(m), [m]);
  const wfs = useApi(api.workflows, [m]);
  const [wf, setWf] = useState("");
  const [prompt, setPrompt] = useState("");
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const list = wfs.data?.workflows ?? [];
  const chosen = wf || list[0]?.name || "";
  const submit = async (e: FormEvent) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      const { threadId } = await api.run(chosen, prompt);
      onClose();
      navigate(href.thread(m, threadId));
    } catch (err) {
      setError((err as Error).message);
      setBusy(false);
    }
  };
  return (
    <Modal title={`Run a workflow on ${m}`} onClose={onClose}>
      <form onSubmit={submit} className="stack">
        {wfs.error && <ErrorBox error={wfs.error} retry={wfs.reload} />}
        {!wfs.data && wfs.loading && <Loading what="workflows" />}
        {wfs.data && list.length === 0 && <p className="muted">This machine has no workflows. Add one with <code>uncaged-workflow workflow add</code>.</p>}
        <label htmlFor="run-wf">Workflow</label>
        <select id="run-wf" value={chosen} onChange={(e) => setWf(e.target.value)} disabled={list.length === 0}>
          {list.map((w) => <option key={w.name} value={w.name}>{w.name}</option>)}
        </select>
        <label htmlFor="run-prompt">Prompt</label>
        <textarea id="run-prompt" rows={5} value={prompt} onChange={(e) => setPrompt(e.target.value)} />
        {error && <p className="error" role="alert">{error}</p>}
        <div className="row end">
          <button type="button" onClick={onClose}>Cancel</button>
          <button type="submit" className="primary" disabled={busy || !chosen} data-testid="run-submit">
            {busy ? "Starting…" : "Run"}
          </button>
        </div>
      </form>
    </Modal>
  );
}

export function ThreadDetail({ machine: m, id }: { machine: string; id: string }) {
  const api = useMemo(() => machine(m), [m]);
  const [gen, setGen] = useState(0);
  const [finished, setFinished] = useState(false);
  const snap = useApi(() => api.thread(id), [m, id], finished ? undefined : 2000);
  // No stream for a thread the machine does not know (the snapshot says 404).
  const gone = snap.error instanceof ApiError && snap.error.status === 404;
  const live = useLive(gone ? null : api.livePath(id), gen);
  const start = snap.data?.records.find((r) => r.type === "thread-start");
  const status = start?.type === "thread-start" ? start.status : undefined;
  useEffect(() => {
    if (status && TERMINAL.includes(status)) setFinished(true);
  }, [status]);
  useEffect(() => {
    if (live.done) snap.reload();
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [live.done]);
  // The stream is the newer source; the snapshot covers a stream that is not up yet.
  const records: ThreadRecord[] = live.records.length >= (snap.data?.records.length ?? 0) ? live.records : snap.data!.records;
  const act = async (verb: "pause" | "resume" | "kill") => {
    await api.act(id, verb);
    if (verb === "resume") setGen((g) => g + 1);
    snap.reload();
  };
  const fork = async (fromRole?: string) => {
    const { threadId } = await api.fork(id, fromRole);
    navigate(href.thread(m, threadId));
  };
  const steps = records.filter((r): r is RoleRecord => r.type === "role");
  return (
    <section aria-labelledby="thread-title" data-status={status ?? ""}>
      <div className="row between wrap">
        <h1 id="thread-title" className="mono">
          {id} {status && <Status s={status} />}
        </h1>
        <div className="row wrap actions">
          {status === "running" && <ConfirmButton testid="pause" label="Pause" question="Pause this thread after its current step?" action={() => act("pause")} />}
          {(status === "paused" || status === "interrupted") && <ConfirmButton testid="resume" label="Resume" question="Resume this thread?" action={() => act("resume")} />}
          {(status === "running" || status === "paused" || status === "interrupted") && (
            <ConfirmButton testid="kill" className="danger" label="Kill" question="Kill this thread? It ends with return code 130." action={() => act("kill")} />
          )}
        </div>
      </div>
      <p className="muted live-state" aria-live="polite">
        {gone ? "" : live.done ? `Stream ended (${live.done}).` : live.connected ? "● live" : live.error ?? "connecting…"}
      </p>
      {snap.error && !snap.data && <ErrorBox error={snap.error} retry={snap.reload} />}
      {!snap.data && !live.records.length && snap.loading && <Loading what="thread" />}
      {start?.type === "thread-start" && start.workflow !== "unknown" && (
        <ThreadGraph
          m={m}
          workflow={start.workflow}
          bundleHash={start.bundleHash}
          active={status && !TERMINAL.includes(status) ? steps[steps.length - 1]?.role : null}
          visited={visitedEdges(steps.map((r) => r.role), records.some((r) => r.type === "workflow-result"))}
        />
      )}
      <ol className="records">
        {records.map((r, i) => (
          <li key={i}>
            <RecordCard m={m} r={r} onFork={fork} />
          </li>
        ))}
      </ol>
      {records.length > 0 && steps.length === 0 && !live.done && <p className="muted">Waiting for the first step…</p>}
      {live.info.length > 0 && (
        <details className="card">
          <summary>Debug log ({live.info.length} lines)</summary>
          <pre className="log">{live.info.join("\n")}</pre>
        </details>
      )}
    </section>
  );
}

/**
 * ThreadGraph shows the workflow's role graph on demand: the latest step's
 * role highlighted, the edges the thread went along drawn bold and green.
 */
function ThreadGraph({ m, workflow, bundleHash, active, visited }: { m: string; workflow: string; bundleHash: string; active?: string | null; visited: string[] }) {
  const [open, setOpen] = useState(false);
  return (
    <details className="card" onToggle={(e) => setOpen((e.currentTarget as HTMLDetailsElement).open)}>
      <summary>Role graph of {workflow}{active ? ` (at ${active})` : ""}</summary>
      {open && <ThreadGraphBody m={m} workflow={workflow} bundleHash={bundleHash} active={active} visited={visited} />}
    </details>
  );
}
function ThreadGraphBody({ m, workflow, bundleHash, active, visited }: { m: string; workflow: string; bundleHash: string; active?: string | null; visited: string[] }) {
  const q = useApi(() => threadGraphSource(m, workflow, bundleHash), [m, workflow, bundleHash]);
  const d = q.data?.descriptor;
  if (q.error) return <ErrorBox error={q.error} retry={q.reload} />;
  if (!q.data) return <Loading what="the graph" />;
  if (!d) return <p className="muted">The version this thread ran has no descriptor.</p>;
  return (
    <>
      {q.data.current && (
        <p className="muted" data-testid="graph-stand-in">
          The version this thread ran ({bundleHash}) is no longer registered; this is the graph of the current version.
        </p>
      )}
      <p className="muted legend">
        <span className="legend-visited" aria-hidden="true" /> the path this thread took
        {active ? <> · <span className="legend-active" aria-hidden="true" /> its current role</> : null}
      </p>
      <div className="graph">
        <Suspense fallback={<Loading what="the graph" />}>
          <Graph edges={d.graph?.edges ?? []} roles={d.roles ?? {}} active={active} visited={visited} />
        </Suspense>
      </div>
    </>
  );
}

export function RecordCard({ m, r, onFork }: { m: string; r: ThreadRecord; onFork: (fromRole?: string) => Promise<void> }) {
  if (r.type === "thread-start") {
    return (
      <article className="card rec rec-start" aria-label="thread start">
        <header className="row between wrap">
          <strong>▶ {r.workflow}</strong>
          <time>{fmtTime(r.timestamp)}</time>
        </header>
        {r.prompt ? <div className="md"><Markdown>{r.prompt}</Markdown></div> : <p className="muted">No prompt.</p>}
        <footer className="hashes">
          <HashLink m={m} hash={r.bundleHash} label="bundle" />
          <HashLink m={m} hash={r.start} label="start" />
          <HashLink m={m} hash={r.head} label="head" />
        </footer>
      </article>
    );
  }
  if (r.type === "workflow-result") {
    return (
      <article className={`card rec rec-result ${r.returnCode === 0 ? "ok" : "bad"}`} aria-label="thread result">
        <header className="row between wrap">
          <strong>■ result: return code {r.returnCode}</strong>
          <time>{fmtTime(r.timestamp)}</time>
        </header>
        {r.content && <div className="md"><Markdown>{r.content}</Markdown></div>}
        <footer className="hashes"><HashLink m={m} hash={r.stateHash} label="state" /></footer>
      </article>
    );
  }
  return (
    <article className="card rec rec-role" data-role={r.role} aria-label={`step ${r.role}`}>
      <header className="row between wrap">
        <strong className="role">{r.role}</strong>
        <span className="row">
          <time>{fmtTime(r.timestamp)}</time>
          <ConfirmButton label="Fork from here" question={`Start a new thread replaying this one up to its first "${r.role}" step?`} action={() => onFork(r.role)} className="small" />
        </span>
      </header>
      {r.content ? <div className="md"><Markdown>{r.content}</Markdown></div> : <p className="muted">(no content)</p>}
      {r.meta !== undefined && r.meta !== null && (
        <details>
          <summary>meta</summary>
          <pre>{JSON.stringify(r.meta, null, 2)}</pre>
        </details>
      )}
      <footer className="hashes">
        <HashLink m={m} hash={r.contentHash} label="content" />
        <HashLink m={m} hash={r.stateHash} label="state" />
        <HashLink m={m} hash={r.childThread} label="child thread" />
      </footer>
    </article>
  );
}

// --- workflows ---------------------------------------------------------------

export function WorkflowList({ machine: m }: { machine: string }) {
  const api = useMemo(() => machine(m), [m]);
  const q = useApi(api.workflows, [m]);
  return (
    <section aria-labelledby="wf-title">
      <h1 id="wf-title">Workflows on {m}</h1>
      {q.error && <ErrorBox error={q.error} retry={q.reload} />}
      {!q.data && q.loading && <Loading what="workflows" />}
      {q.data && q.data.workflows.length === 0 && <p className="empty muted">No workflows registered on this machine.</p>}
      <ul className="list">
        {q.data?.workflows.map((w) => (
          <li key={w.name} className="card">
            <a href={href.workflow(m, w.name)} data-workflow={w.name}><strong>{w.name}</strong></a>
            <span className="muted"> · <span className="mono">{w.hash}</span> · {fmtTime(w.timestamp)}</span>
          </li>
        ))}
      </ul>
    </section>
  );
}

export function WorkflowDetailView({ machine: m, name }: { machine: string; name: string }) {
  const api = useMemo(() => machine(m), [m]);
  const q = useApi(() => api.workflow(name), [m, name]);
  const d = q.data?.descriptor;
  const current = q.data?.hash;
  return (
    <section aria-labelledby="wfd-title">
      <p><a href={href.workflows(m)}>← Workflows</a></p>
      <h1 id="wfd-title">{name}</h1>
      {q.error && <ErrorBox error={q.error} retry={q.reload} />}
      {!q.data && q.loading && <Loading what="the workflow" />}
      {q.data && (
        <>
          {d?.description && <p className="lead">{d.description}</p>}
          <dl className="kv">
            <dt>Hash</dt><dd className="mono">{q.data.hash}</dd>
            <dt>Registered</dt><dd>{fmtTime(q.data.timestamp)}</dd>
          </dl>
          {!d && <p className="muted">This version has no descriptor, so there is no graph to show.</p>}
          {d && (
            <>
              <h2>Graph</h2>
              <div className="graph" data-testid="graph">
                <Suspense fallback={<Loading what="the graph" />}>
                  <Graph edges={d.graph?.edges ?? []} roles={d.roles ?? {}} />
                </Suspense>
              </div>
              <h2>Roles</h2>
              {Object.keys(d.roles ?? {}).length === 0 && <p className="muted">No roles.</p>}
              {Object.entries(d.roles ?? {}).map(([rn, r]) => (
                <article key={rn} className="card">
                  <h3>{rn}</h3>
                  {r.description && <p>{r.description}</p>}
                  <details>
                    <summary>System prompt</summary>
                    {r.systemPrompt ? <pre className="wrap">{r.systemPrompt}</pre> : <p className="muted">(empty)</p>}
                  </details>
                  <details>
                    <summary>Meta schema</summary>
                    <pre>{JSON.stringify(r.schema ?? {}, null, 2)}</pre>
                  </details>
                </article>
              ))}
            </>
          )}
          <h2>History</h2>
          {q.data.history.length === 0 ? (
            <p className="muted">No earlier versions.</p>
          ) : (
            <ul className="list">
              {q.data.history.map((h) => (
                <li key={h.hash + h.timestamp} data-hash={h.hash}>
                  <span className="mono">{h.hash}</span> <span className="muted">{fmtTime(h.timestamp)}</span>{" "}
                  {h.hash === current ? (
                    <span className="muted">(same bundle as the current version)</span>
                  ) : (
                    <ConfirmButton
                      testid="rollback"
                      className="small"
                      label="Make current"
                      question={`Make version ${h.hash} (registered ${fmtTime(h.timestamp)}) the current version of "${name}"? The current version ${current} moves into the history; new runs use ${h.hash}.`}
                      action={async () => {
                        await api.rollback(name, h.hash);
                        q.reload();
                      }}
                    />
                  )}
                </li>
              ))}
            </ul>
          )}
        </>
      )}
    </section>
  );
}

// --- CAS ---------------------------------------------------------------------

/** topLevel returns the text of a top-level YAML key: inline, or its indented block. */
function topLevel(content: string, key: string): string | null {
  const m = content.match(new RegExp(`^${key}:(.*)$`, "m"));
  if (!m || m.index === undefined) return null;
  const inline = m[1].trim();
  if (inline) return inline;
  const rest = content.slice(m.index + m[0].length + 1);
  const end = rest.search(/^\S/m); // the next top-level key
  const block = (end >= 0 ? rest.slice(0, end) : rest).replace(/\s+$/, "");
  const indent = Math.min(...block.split("\n").filter((l) => l.trim()).map((l) => l.match(/^ */)![0].length));
  return block.split("\n").map((l) => l.slice(Number.isFinite(indent) ? indent : 0)).join("\n");
}

/** casParts reads a node's type, payload and the hashes it refers to. */
export function casParts(content: string): { type: string | null; payload: string | null; refs: string[] } {
  const type = topLevel(content, "type")?.replace(/^["']|["']$/g, "") ?? null;
  const payload = topLevel(content, "payload");
  const refs = [...new Set(topLevel(content, "refs")?.match(HASH_RE) ?? [])];
  return { type, payload, refs };
}

export function CasView({ machine: m, hash }: { machine: string; hash: string }) {
  const api = useMemo(() => machine(m), [m]);
  const q = useApi(() => api.cas(hash), [m, hash]);
  const parts = q.data ? casParts(q.data.content) : null;
  return (
    <section aria-labelledby="cas-title">
      <h1 id="cas-title">CAS node <span className="mono">{hash}</span></h1>
      {q.error && <ErrorBox error={q.error} retry={q.reload} />}
      {!q.data && q.loading && <Loading what="the node" />}
      {q.data && parts && (
        <>
          <dl className="kv">
            <dt>Type</dt><dd data-testid="cas-type">{parts.type ?? "–"}</dd>
            <dt>Payload</dt>
            <dd>{parts.payload === null ? <span className="muted">–</span> : <pre className="wrap" data-testid="cas-payload"><Linkify m={m} text={parts.payload} /></pre>}</dd>
            <dt>Refs</dt>
            <dd>
              {parts.refs.length === 0 ? <span className="muted">none</span> : (
                <ul className="inline-list" data-testid="cas-refs">
                  {parts.refs.map((h) => <li key={h}><a href={href.cas(m, h)} className="hash">{h}</a></li>)}
                </ul>
              )}
            </dd>
          </dl>
          <h2>Raw node</h2>
          <pre className="wrap" data-testid="cas-content"><Linkify m={m} text={q.data.content} /></pre>
        </>
      )}
    </section>
  );
}
