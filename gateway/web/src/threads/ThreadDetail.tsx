import { useEffect, useMemo, useState } from "react";
import Markdown from "react-markdown";
import { ApiError, duration, fmtTime, FleetThread, isOffline, machine, RoleRecord, TERMINAL, ThreadRecord, useApi, useLive } from "../api";
import { ConfirmButton } from "../common/ConfirmButton";
import { ErrorBox } from "../common/ErrorBox";
import { Loading } from "../common/Loading";
import { OFFLINE_REASON, OfflineNote } from "../common/Offline";
import { lastKnownThread } from "./threads";
import { href, navigate } from "../route";
import { RecordCard } from "./RecordCard";
import { Status } from "./Status";
import { ThreadGraph } from "./ThreadGraph";

export function ThreadDetail({ machine: m, id }: { machine: string; id: string }) {
  const api = useMemo(() => machine(m), [m]);
  const [gen, setGen] = useState(0);
  const [finished, setFinished] = useState(false);
  const snap = useApi(() => api.thread(id), [m, id], finished ? undefined : 2000);
  // No stream for a thread the machine does not know (the snapshot says 404).
  const gone = snap.error instanceof ApiError && snap.error.status === 404;
  // An offline machine: what the gateway remembers of the thread, no stream,
  // no actions. The snapshot keeps polling, so the page comes back to life
  // with the machine.
  const offline = !!snap.error && isOffline(snap.error);
  const known = useApi(() => (offline ? lastKnownThread(m, id) : Promise.resolve(null)), [m, id, offline]);
  const live = useLive(gone || offline ? null : api.livePath(id), gen);
  const start = snap.data?.records.find((r) => r.type === "thread-start");
  const status = start?.type === "thread-start" ? start.status : offline ? known.data?.status : undefined;
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
          {offline && status && !TERMINAL.includes(status) && <span className="muted" data-testid="actions-offline">No pause, resume or kill: {OFFLINE_REASON}.</span>}
          {!offline && status === "running" && <ConfirmButton testid="pause" label="Pause" question="Pause this thread after its current step?" action={() => act("pause")} />}
          {!offline && (status === "paused" || status === "interrupted") && <ConfirmButton testid="resume" label="Resume" question="Resume this thread?" action={() => act("resume")} />}
          {!offline && (status === "running" || status === "paused" || status === "interrupted") && (
            <ConfirmButton testid="kill" className="danger" label="Kill" question="Kill this thread? It ends with return code 130." action={() => act("kill")} />
          )}
        </div>
      </div>
      <p className="muted live-state" aria-live="polite">
        {gone || offline ? "" : live.done ? `Stream ended (${live.done}).` : live.connected ? "● live" : live.error ?? "connecting…"}
      </p>
      {offline && <OfflineNote machine={m} lastSeen={known.data?.lastSeen} shown={snap.data ? "this thread's steps are shown as this page last loaded them" : "this thread is shown as the gateway last saw it"} />}
      {offline && !snap.data && known.data && <KnownThread t={known.data} />}
      {offline && !snap.data && known.data === null && <p className="empty muted">The gateway has no record of this thread.</p>}
      {offline && !snap.data && known.error && <ErrorBox error={known.error} retry={known.reload} />}
      {offline && !snap.data && known.loading && !known.data && <Loading what="the last-known state" />}
      {snap.error && !snap.data && !offline && <ErrorBox error={snap.error} retry={snap.reload} />}
      {!snap.data && !live.records.length && snap.loading && <Loading what="thread" />}
      {start?.type === "thread-start" && start.workflow !== "unknown" && (
        <ThreadGraph
          m={m}
          workflow={start.workflow}
          bundleHash={start.bundleHash}
          records={records}
          status={status}
        />
      )}
      <ol className="records">
        {records.map((r, i) => (
          <li key={i}>
            <RecordCard m={m} r={r} onFork={offline ? undefined : fork} />
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

/** KnownThread is a thread's summary as the gateway last knew it (its machine is offline). */
function KnownThread({ t }: { t: FleetThread }) {
  return (
    <article className="card rec rec-known" aria-label="last-known summary" data-testid="known-thread">
      <dl className="kv">
        <dt>Workflow</dt>
        <dd>{t.workflow ?? <span className="muted">unknown</span>}</dd>
        <dt>Started</dt>
        <dd>{fmtTime(t.startedAt)}</dd>
        <dt>Updated</dt>
        <dd>{fmtTime(t.updatedAt)}</dd>
        {typeof t.durationMs === "number" && (<><dt>Duration</dt><dd>{duration(t.durationMs)}</dd></>)}
        {typeof t.steps === "number" && (<><dt>Steps</dt><dd>{t.steps}</dd></>)}
        {typeof t.returnCode === "number" && (<><dt>Return code</dt><dd>{t.returnCode}</dd></>)}
      </dl>
      <h3>Prompt</h3>
      {t.prompt ? <div className="md"><Markdown>{t.prompt}</Markdown></div> : <p className="muted">No prompt.</p>}
      {t.summary && (<><h3>Summary</h3><div className="md"><Markdown>{t.summary}</Markdown></div></>)}
      {t.usage != null && (
        <details>
          <summary>LLM usage</summary>
          <pre>{JSON.stringify(t.usage, null, 2)}</pre>
        </details>
      )}
    </article>
  );
}
