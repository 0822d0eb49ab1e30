import { useEffect, useMemo, useState } from "react";
import Markdown from "react-markdown";
import { Answered, ApiError, duration, fmtTime, FleetThread, isOffline, machine, TERMINAL, ThreadRecord, useApi, useLive } from "../api";
import { ANSWER_OFFLINE, AnsweredNote, OfflineQuestion, QuestionPanel } from "../answer/QuestionPanel";
import { ActionButton } from "../common/ActionButton";
import { ConfirmButton } from "../common/ConfirmButton";
import { ErrorBox } from "../common/ErrorBox";
import { Loading } from "../common/Loading";
import { OFFLINE_REASON, OfflineNote } from "../common/Offline";
import { forkAtStep, lastKnownThread, stepHref } from "./threads";
import { hashQuery, href, navigate, useHashChange } from "../route";
import { DebugLog } from "./DebugLog";
import { parseLogLine } from "./logFormat";
import { RecordCard } from "./RecordCard";
import { Status } from "./Status";
import { streamText } from "./streamText";
import { ThreadGraph } from "./ThreadGraph";
import { Timeline } from "./Timeline";
import { pausedSpans, stepFromQuery, stepTimings } from "./timing";
import { readUsage, usageText, withUsage } from "./usage";
import "./threadview.css";

/** PAUSING_WHY is why Pause is off while a thread is pausing. */
const PAUSING_WHY = "a pause is already asked for: the thread pauses once its role finishes the step";

/** useStepParam follows ?step=N in the address (a deep link to one step; it survives a reload). */
function useStepParam(): number | null {
  const [step, setStep] = useState(() => stepFromQuery(hashQuery()));
  useHashChange(() => setStep(stepFromQuery(hashQuery())));
  return step;
}

/** SNAPSHOT_POLL_MS is how often the thread's snapshot is read while its live stream is not up. */
export const SNAPSHOT_POLL_MS = 2000;

/** useNow ticks every second while on, so a running step's bar grows. */
function useNow(on: boolean): number {
  const [now, setNow] = useState(() => Date.now());
  useEffect(() => {
    if (!on) return;
    const t = setInterval(() => setNow(Date.now()), 1000);
    return () => clearInterval(t);
  }, [on]);
  return now;
}

export function ThreadDetail({ machine: m, id }: { machine: string; id: string }) {
  const api = useMemo(() => machine(m), [m]);
  const [gen, setGen] = useState(0);
  const [finished, setFinished] = useState(false);
  // While the live stream is up it carries every step, status and usage:
  // the snapshot is polled only while it is not (not open yet, an older
  // connector's, an offline machine's), and read again when it ends.
  const [streaming, setStreaming] = useState(false);
  const snap = useApi(() => api.thread(id), [m, id], finished || streaming ? undefined : SNAPSHOT_POLL_MS);
  // No stream for a thread the machine does not know (the snapshot says 404).
  const gone = snap.error instanceof ApiError && snap.error.status === 404;
  // An offline machine: what the gateway remembers of the thread, no stream,
  // no actions. The snapshot keeps polling, so the page comes back to life
  // with the machine.
  const offline = !!snap.error && isOffline(snap.error);
  const known = useApi(() => (offline ? lastKnownThread(m, id) : Promise.resolve(null)), [m, id, offline]);
  const live = useLive(gone || offline ? null : api.livePath(id), gen);
  useEffect(() => setStreaming(live.connected), [live.connected]);
  // The stream is the newer source; the snapshot covers a stream that is not up yet.
  // Usage comes with the snapshot too, for a stream from an older connector.
  const streamed: ThreadRecord[] = live.records.length >= (snap.data?.records.length ?? 0) ? live.records : snap.data!.records;
  const records = useMemo(() => withUsage(streamed, snap.data?.records), [streamed, snap.data]);
  // The stream's start record follows the head and status (its start
  // events); the snapshot's, polled, covers a stream that is not up.
  const liveStart = live.records[0]?.type === "thread-start" ? live.records[0] : undefined;
  const snapStart = snap.data?.records.find((r) => r.type === "thread-start");
  const start = liveStart ?? snapStart;
  const status = start?.type === "thread-start" ? start.status : offline ? known.data?.status : undefined;
  useEffect(() => {
    if (status && TERMINAL.includes(status)) setFinished(true);
  }, [status]);
  useEffect(() => {
    if (live.done) snap.reload();
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [live.done]);
  // Our answer, once taken: said on after the thread stops waiting (the panel goes then).
  const [answered, setAnswered] = useState<Answered | null>(null);
  const act = async (verb: "pause" | "resume" | "kill") => {
    await api.act(id, verb);
    if (verb === "resume") setGen((g) => g + 1);
    snap.reload();
  };
  const fork = async (step: number) => {
    const { threadId } = await forkAtStep(m, id, step);
    navigate(href.thread(m, threadId));
  };
  const log = useMemo(() => live.info.map(parseLogLine), [live.info]);
  // The clock moves a running step's bar, and a paused span that is still open.
  const now = useNow(status === "running" || status === "waiting" || status === "pausing" || status === "paused");
  const timings = useMemo(() => stepTimings(records, status, log, now), [records, status, log, now]);
  const paused = useMemo(() => pausedSpans(records, status, log, now), [records, status, log, now]);
  const current = useStepParam();
  const linkTo = (n: number) => stepHref(href.thread(m, id), n);
  let stepNo = 0;
  const stepCount = timings.filter((t) => !t.running && !t.ended).length;
  // A deep link to a step scrolls to it once its card is there.
  useEffect(() => {
    if (current === null || current > stepCount) return;
    document.getElementById(`step-${current}`)?.scrollIntoView?.({ block: "center" });
  }, [current, stepCount]);
  const usage = readUsage((snap.data as { usage?: unknown } | undefined)?.usage);
  return (
    <section aria-labelledby="thread-title" data-status={status ?? ""}>
      <div className="row between wrap">
        <h1 id="thread-title" className="mono">
          {id} {status && <Status s={status} />}
        </h1>
        <div className="row wrap actions">
          {offline && status && !TERMINAL.includes(status) && <span className="muted" data-testid="actions-offline">No pause, resume or kill: {OFFLINE_REASON}.</span>}
          {!offline && (status === "running" || status === "pausing") && (
            <ActionButton testid="pause" label="Pause" busyLabel="Pausing…" action={() => act("pause")} disabledWhy={status === "pausing" ? PAUSING_WHY : null} />
          )}
          {/* Resume of a pausing thread cancels the pause it waits for. */}
          {!offline && (status === "pausing" || status === "paused" || status === "interrupted") && <ActionButton testid="resume" label="Resume" busyLabel="Resuming…" action={() => act("resume")} />}
          {!offline && (status === "running" || status === "waiting" || status === "pausing" || status === "paused" || status === "interrupted") && (
            <ConfirmButton testid="kill" className="danger" label="Kill" question="Kill this thread? It ends with return code 130." action={() => act("kill")} />
          )}
        </div>
      </div>
      <p className="muted live-state" aria-live="polite" data-testid="live-state">
        {gone || offline ? "" : streamText(live, records, status)}
      </p>
      {offline && <OfflineNote machine={m} lastSeen={known.data?.lastSeen} shown={snap.data ? "this thread's steps are shown as this page last loaded them" : "this thread is shown as the gateway last saw it"} />}
      {offline && !snap.data && known.data && <KnownThread t={known.data} />}
      {offline && !snap.data && known.data === null && <p className="empty muted">The gateway has no record of this thread.</p>}
      {offline && !snap.data && known.error && <ErrorBox error={known.error} retry={known.reload} />}
      {offline && !snap.data && known.loading && !known.data && <Loading what="the last-known state" />}
      {snap.error && !snap.data && !offline && <ErrorBox error={snap.error} retry={snap.reload} />}
      {!snap.data && !live.records.length && snap.loading && <Loading what="thread" />}
      {status === "waiting" && !offline && (
        <QuestionPanel
          machine={m}
          id={id}
          onAnswered={(a) => {
            setAnswered(a);
            snap.reload();
          }}
        />
      )}
      {status === "waiting" && offline && known.data?.waiting && <OfflineQuestion {...known.data.waiting} why={ANSWER_OFFLINE} />}
      {status !== "waiting" && answered && <AnsweredNote by={answered.answeredBy} at={answered.answeredAt} />}
      {usage && <p className="usage" data-testid="thread-usage-total">This thread's model usage: <b>{usageText(usage)}</b></p>}
      {start?.type === "thread-start" && start.workflow !== "unknown" && (
        <ThreadGraph
          m={m}
          workflow={start.workflow}
          bundleHash={start.bundleHash}
          records={records}
          status={status}
        />
      )}
      <Timeline steps={timings} paused={paused} current={current} stepHref={linkTo} />
      <ol className="records">
        {records.map((r, i) => {
          const n = r.type === "role" ? ++stepNo : undefined;
          return (
            <li key={i}>
              <RecordCard m={m} r={r} step={n} timing={n ? timings[n - 1] : undefined} current={n !== undefined && n === current} stepHref={linkTo} onFork={offline ? undefined : fork} />
            </li>
          );
        })}
      </ol>
      {records.length > 0 && stepCount === 0 && !live.done && <p className="muted">Waiting for the first step…</p>}
      {log.length > 0 && <DebugLog lines={log} />}
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
      <KnownUsage t={t} />
    </article>
  );
}

/** KnownUsage is a remembered thread's model usage, as the gateway last knew it. */
function KnownUsage({ t }: { t: FleetThread & { tokens?: number; cost?: number } }) {
  const u = readUsage(t.usage) ?? readUsage({ tokens: t.tokens, cost: t.cost });
  if (!u) return null;
  return <p className="usage" data-testid="thread-usage">Model usage: <b>{usageText(u)}</b></p>;
}
