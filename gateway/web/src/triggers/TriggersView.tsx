import { useEffect, useId, useRef, useState } from "react";
import { ago, ApiError, CreatedTrigger, fmtTime, gateway, noMemory, Trigger, TRIGGER_RUN_STATES, TriggerRun, until, useApi } from "../api";
import { ErrorBox } from "../common/ErrorBox";
import { Loading } from "../common/Loading";
import { ActionButton } from "../common/ActionButton";
import { ConfirmButton } from "../common/ConfirmButton";
import { ScrollBox } from "../common/ScrollBox";
import { useActionBlock } from "../machines/scope";
import { href, replaceQuery, useHashChange } from "../route";
import { Copyable } from "./Copyable";
import { NewTriggerDialog } from "./NewTriggerDialog";
import { END_PREVIOUS, RotateButton, RotatedSecret } from "./RotateSecret";
import { CLI_EXAMPLES, shortDuration, triggersFromHash } from "./triggerForm";
import "./triggers.css";

/**
 * TRIGGERS_POLL_MS is how often the view asks the gateway again (runs move
 * as machines come and go) while the gateway does not push trigger changes.
 */
export const TRIGGERS_POLL_MS = 10_000;
/** RUNS_PAGE is how many of a trigger's runs its opened row shows. */
export const RUNS_PAGE = 20;

function triggersToHash(open: string) {
  const p = new URLSearchParams();
  if (open) p.set("trigger", open);
  replaceQuery(p);
}

/**
 * SecretNote is an answer that holds what the gateway shows once: a new
 * trigger (a webhook's URL and secret), or a webhook's rotated secret with
 * how long its old one was kept (keepPrevious).
 */
type SecretNote = { answer: CreatedTrigger; rotated?: { keepPrevious: string } };

/**
 * TriggersView is the webhooks and schedules that start threads by
 * themselves (GET /api/gateway/triggers), oldest first: what fires each,
 * which workflow it starts on which machine, and how its last runs went; a
 * row opens to all its runs. Triggers are paused, resumed and removed here,
 * and made with the New trigger form, whose answer shows a webhook's
 * secret once; a webhook's secret is rotated here too, the new one shown
 * once the same way.
 */
export function TriggersView() {
  const [open, setOpenState] = useState(() => triggersFromHash().open);
  useHashChange(() => setOpenState(triggersFromHash().open));
  const list = useApi(gateway.triggers, [], TRIGGERS_POLL_MS, { topic: "triggers" });
  const [creating, setCreating] = useState(false);
  // Every secret shown stays until dismissed: a second answer does not
  // replace the first one's secret, except a newer one of the same trigger.
  const [notes, setNotes] = useState<SecretNote[]>([]);
  const show = (n: SecretNote) => setNotes((ns) => [n, ...ns.filter((o) => o.answer.trigger.id !== n.answer.trigger.id)]);
  const rotated = (r: RotatedSecret, keepPrevious: string) => {
    show({ answer: r, rotated: { keepPrevious } });
    list.reload();
  };
  const block = useActionBlock();
  const toggle = (id: string) => {
    const next = open === id ? "" : id;
    setOpenState(next);
    triggersToHash(next);
  };
  const rows = list.data?.triggers ?? [];
  const unavailable = noMemory(list.error);
  const cannotCreate = unavailable ? "this gateway keeps no triggers" : block;
  const now = Date.now();
  return (
    <section aria-labelledby="triggers-title" data-testid="triggers">
      <div className="row between wrap">
        <h1 id="triggers-title">Triggers</h1>
        <button className="primary" data-testid="new-trigger" onClick={() => setCreating(true)} disabled={!!cannotCreate} title={cannotCreate ?? undefined}>
          New trigger
        </button>
      </div>
      <p className="muted lead-in">Webhooks and schedules that start a workflow's thread on a machine; a run for an offline machine waits for it.</p>
      {notes.map((n) => (
        <CreatedNote
          key={`${n.answer.trigger.id} ${n.answer.secret ?? ""}`}
          n={n}
          now={now}
          onDone={() => setNotes((ns) => ns.filter((o) => o !== n))}
        />
      ))}
      {unavailable && <NoTriggers error={list.error as ApiError} />}
      {list.error && !unavailable && <ErrorBox error={list.error} retry={list.reload} />}
      {!list.data && list.loading && <Loading what="the triggers" />}
      {list.data && rows.length === 0 && <EmptyTriggers />}
      {rows.length > 0 && (
        <ScrollBox>
          <table className="triggers">
            <caption className="caption">{rows.length === 1 ? "One trigger." : `${rows.length} triggers, the oldest first.`}</caption>
            <thead>
              <tr>
                <th scope="col">Kind</th>
                <th scope="col">Machine</th>
                <th scope="col">Workflow</th>
                <th scope="col">When</th>
                <th scope="col">State</th>
                <th scope="col">Note</th>
                <th scope="col">Last run</th>
                <th scope="col"><span className="sr-only">Actions</span></th>
              </tr>
            </thead>
            <tbody>
              {rows.map((t) => (
                <TriggerRow key={t.id} t={t} now={now} open={open === t.id} toggle={() => toggle(t.id)} changed={list.reload} rotated={rotated} />
              ))}
            </tbody>
          </table>
        </ScrollBox>
      )}
      {creating && (
        <NewTriggerDialog
          onClose={() => setCreating(false)}
          onCreated={(c) => {
            setCreating(false);
            show({ answer: c });
            list.reload();
          }}
        />
      )}
    </section>
  );
}

/** NoTriggers says why this gateway has no triggers: it keeps no store (503), or it predates them. */
function NoTriggers({ error }: { error: ApiError }) {
  return (
    <p className="empty muted" data-testid="no-triggers">
      {error.status === 503
        ? `This gateway keeps no store, and triggers live in it: ${error.message}.`
        : `This gateway has no triggers (it is older than they are): ${error.message}.`}
    </p>
  );
}

/** EmptyTriggers says what a trigger is, and how to make one from the command line. */
function EmptyTriggers() {
  return (
    <div className="empty" data-testid="triggers-empty">
      <p>
        No triggers yet. A trigger starts a thread of a workflow on a machine by itself: when a webhook delivery signed with its secret reaches the gateway
        (as GitHub signs them), or at the times of a cron schedule. Make one with <strong>New trigger</strong>, or from the command line:
      </p>
      <pre className="wrap">{CLI_EXAMPLES.join("\n")}</pre>
    </div>
  );
}

/**
 * CreatedNote is the answer to New trigger, or to a webhook's rotation. For
 * a webhook it holds the URL and the secret, which the gateway shows this
 * once: it stays until dismissed, so a stray click cannot lose it, and it
 * takes the focus, as it shows at the top of the page while a rotation is
 * asked for in a row that may be far below.
 */
function CreatedNote({ n, now, onDone }: { n: SecretNote; now: number; onDone: () => void }) {
  const c = n.answer;
  const t = c.trigger;
  const url = c.url ?? t.url ?? "";
  const title = useId();
  const ref = useRef<HTMLDivElement>(null);
  useEffect(() => ref.current?.focus(), []);
  const testid = n.rotated ? "trigger-rotated" : "trigger-created";
  return (
    <div className="card trigger-created" role="region" aria-labelledby={title} data-testid={testid} data-trigger={t.id} tabIndex={-1} ref={ref}>
      <h2 id={title}>
        {n.rotated ? (
          <>New secret of webhook <span className="mono">{t.id}</span></>
        ) : (
          <>{t.kind === "webhook" ? "Webhook" : "Schedule"} <span className="mono">{t.id}</span> created</>
        )}
      </h2>
      {c.secret ? (
        <>
          <p className="secret-warning" role="alert">
            <strong>Copy the secret now: it will not be shown again.</strong>{" "}
            {n.rotated ? (
              <>Paste it into the webhook settings of what delivers to the URL (GitHub: secret), in place of the old one.</>
            ) : (
              <>
                Paste the URL and the secret into the webhook settings of what will deliver to it (GitHub: payload URL, content type application/json,
                secret).
              </>
            )}{" "}
            Deliveries must be signed with it, in X-Hub-Signature-256 or X-Uncaged-Signature.
          </p>
          {n.rotated && <OldSecret keepPrevious={n.rotated.keepPrevious} until={t.previousSecretUntil} now={now} />}
          <dl className="kv">
            <dt>URL</dt>
            <dd><Copyable text={url} testid="trigger-url" label={`Copy the URL of webhook ${t.id}`} /></dd>
            <dt>Secret</dt>
            <dd><Copyable text={c.secret} testid="trigger-secret" label={`Copy the secret of webhook ${t.id}`} /></dd>
          </dl>
        </>
      ) : (
        <p>
          {t.workflow} starts on {t.machine} at <code>{t.schedule}</code> ({t.timezone || "UTC"}){t.nextAt ? <>, next <When at={t.nextAt} now={now} /></> : ""}.
        </p>
      )}
      <div className="row end">
        <button className="primary" onClick={onDone} data-testid={`${testid}-done`}>{c.secret ? "I have saved the secret" : "Done"}</button>
      </div>
    </div>
  );
}

/**
 * OldSecret says how long a rotated webhook's old secret is still accepted:
 * until the time the gateway answered, or no longer when it was ended at
 * once. A kept secret the answer gives no time for (an older gateway) is
 * not guessed at.
 */
function OldSecret({ keepPrevious, until: at, now }: { keepPrevious: string; until?: string; now: number }) {
  if (keepPrevious === END_PREVIOUS) return <p data-testid="trigger-old-secret">The old secret is refused from now on.</p>;
  if (!at) return null;
  return (
    <p data-testid="trigger-old-secret">
      The old secret is still accepted until <LocalTime at={at} now={now} />: deliveries signed with either one are taken until then.
    </p>
  );
}

/** LocalTime is a time in the browser's own zone, with how far it is ahead (or "… ago") beside it. */
function LocalTime({ at, now }: { at: string; now: number }) {
  const t = Date.parse(at);
  return (
    <>
      <time dateTime={at}>{fmtTime(at)}</time>
      {Number.isFinite(t) && ` (${t > now ? until(t, now) : ago(t, now)})`}
    </>
  );
}

/** When is a time as "… ago" (or "in …" ahead), with the full time on hover. */
function When({ at, now }: { at?: string; now: number }) {
  const t = at ? Date.parse(at) : NaN;
  if (!at || !Number.isFinite(t)) return <span className="muted">–</span>;
  return <time dateTime={at} title={fmtTime(at)}>{t > now ? until(t, now) : ago(t, now)}</time>;
}

/** RUN_CLASS is each run state's badge colour (the thread statuses' classes). */
const RUN_CLASS: Record<string, string> = { queued: "st-paused", sending: "st-running", started: "st-completed", expired: "st-interrupted", failed: "st-failed" };

function RunBadge({ r }: { r: TriggerRun }) {
  return <span className={`badge ${RUN_CLASS[r.state] ?? ""}`}>{r.state}</span>;
}

function TriggerRow({ t, now, open, toggle, changed, rotated }: {
  t: Trigger;
  now: number;
  open: boolean;
  toggle: () => void;
  changed: () => void;
  rotated: (r: RotatedSecret, keepPrevious: string) => void;
}) {
  const panel = `runs-${t.id}`;
  const last = t.runs?.[0];
  return (
    <>
      <tr className={`trigger-row${t.paused ? " paused-row" : ""}`} data-testid="trigger-row" data-trigger={t.id} data-kind={t.kind} data-paused={t.paused ? "true" : "false"}>
        <td>
          {t.kind}
          <div className="mono muted trigger-id">{t.id}</div>
        </td>
        <td className="wrap"><a href={href.threads(t.machine)}>{t.machine}</a></td>
        <td className="wrap">{t.workflow}</td>
        <td className="when-cell"><TriggerWhen t={t} now={now} /></td>
        <td><span className={`badge ${t.paused ? "st-paused" : "st-running"}`} data-testid="trigger-state">{t.paused ? "paused" : "active"}</span></td>
        <td className="wrap note">{t.note || <span className="muted">–</span>}</td>
        <td className="last-run">{last ? <><RunBadge r={last} /> <When at={last.createdAt} now={now} /></> : <span className="muted">none yet</span>}</td>
        <td>
          <div className="row trigger-actions">
            <button type="button" className="small" data-testid="trigger-runs" aria-expanded={open} aria-controls={panel} aria-label={`${open ? "Hide runs" : "Runs"} of trigger ${t.id}`} onClick={toggle}>
              {open ? "Hide runs" : "Runs"}
            </button>
            <PauseButton t={t} done={changed} />
            {t.kind === "webhook" && <RotateButton t={t} onRotated={rotated} />}
            <RemoveButton t={t} done={changed} />
          </div>
        </td>
      </tr>
      {open && (
        <tr className="runs-row" id={panel}>
          <td colSpan={8} className="runs-cell">
            <RunsPanel t={t} now={now} />
          </td>
        </tr>
      )}
    </>
  );
}

/**
 * TriggerWhen says what fires a trigger: a webhook's URL (and, after a
 * rotation, until when its previous secret is still accepted), or a
 * schedule, its zone and its next time.
 */
function TriggerWhen({ t, now }: { t: Trigger; now: number }) {
  // The list may be older than the previous secret's end: a past one is not shown.
  const previous = t.previousSecretUntil && Date.parse(t.previousSecretUntil) > now ? t.previousSecretUntil : "";
  return (
    <div className="stack when">
      {t.kind === "webhook" ? (
        <>
          <Copyable text={t.url ?? ""} testid="trigger-url" label={`Copy the URL of webhook ${t.id}`} />
          {previous && (
            <span className="small muted" data-testid="trigger-previous-until">
              previous secret accepted until <LocalTime at={previous} now={now} />
            </span>
          )}
        </>
      ) : (
        <>
          <span>
            <code data-testid="trigger-schedule">{t.schedule}</code> <span className="muted">{t.timezone || "UTC"}</span>
          </span>
          <span className="small">{t.paused ? <span className="muted">no next time while paused</span> : <>next <When at={t.nextAt} now={now} /></>}</span>
        </>
      )}
      {t.lastFired && <span className="small muted">last fired <When at={t.lastFired} now={now} /></span>}
    </div>
  );
}

/**
 * PauseButton pauses or resumes a trigger at once (it can be undone); its
 * label names the trigger, as a row's buttons are many alike.
 */
function PauseButton({ t, done }: { t: Trigger; done: () => void }) {
  const verb = t.paused ? "Resume" : "Pause";
  return (
    <ActionButton
      label={verb}
      className="small"
      testid={t.paused ? "trigger-resume" : "trigger-pause"}
      ariaLabel={`${verb} trigger ${t.id}`}
      action={async () => {
        await gateway.pauseTrigger(t.id, !t.paused);
        done();
      }}
    />
  );
}

/** RemoveButton asks first, as the dashboard's other actions that cannot be undone do. */
function RemoveButton({ t, done }: { t: Trigger; done: () => void }) {
  return (
    <ConfirmButton
      label="Remove"
      title="Remove the trigger"
      confirmLabel="Remove"
      className="small danger"
      testid="trigger-remove"
      ariaLabel={`Remove trigger ${t.id}`}
      question={
        <>
          Remove the {t.kind} <span className="mono">{t.id}</span> that starts {t.workflow} on {t.machine}? Its runs are removed with it
          {t.kind === "webhook" ? ", and its URL refuses deliveries from then on" : ""}. This cannot be undone: Pause stops it for a while instead.
        </>
      }
      action={async () => {
        await gateway.removeTrigger(t.id);
        done();
      }}
    />
  );
}

/**
 * RunsPanel is an opened trigger: its details and its runs, newest first,
 * paged and filtered by state. Until the runs are loaded, the recent ones
 * the list carries show.
 */
function RunsPanel({ t, now }: { t: Trigger; now: number }) {
  const [state, setState] = useState("");
  const [offset, setOffset] = useState(0);
  const runs = useApi(() => gateway.triggerRuns(t.id, { state: state || undefined, limit: RUNS_PAGE, offset }), [t.id, state, offset], TRIGGERS_POLL_MS, { topic: "triggers", trigger: t.id });
  const rows = runs.data?.runs ?? (!state && offset === 0 ? t.runs ?? [] : []);
  const total = runs.data?.total ?? rows.length;
  const filter = (s: string) => {
    setState(s);
    setOffset(0);
  };
  return (
    <div className="trigger-runs" data-testid="trigger-runs-panel">
      <dl className="kv trigger-details">
        <dt>Prompt</dt>
        <dd>{t.prompt ? <pre className="wrap">{t.prompt}</pre> : <span className="muted">{t.kind === "webhook" ? "the delivery's body" : "the trigger, machine, workflow and time, as JSON"}</span>}</dd>
        <dt>A run waits</dt>
        <dd>{shortDuration(t.expire)} for {t.machine} to be online</dd>
        {t.kind === "schedule" && (
          <>
            <dt>Missed times</dt>
            <dd>{t.missed === "skip" ? "skipped" : "run once when a gateway starts"}</dd>
          </>
        )}
        <dt>Created</dt>
        <dd>
          <When at={t.createdAt} now={now} />
          {t.createdBy ? ` by ${t.createdBy}` : ""}
        </dd>
      </dl>
      <div className="row wrap filters">
        <label className="inline">
          State{" "}
          <select value={state} onChange={(e) => filter(e.target.value)} aria-label={`run state filter of trigger ${t.id}`} data-testid="run-state">
            <option value="">all</option>
            {TRIGGER_RUN_STATES.map((s) => <option key={s} value={s}>{s}</option>)}
          </select>
        </label>
      </div>
      {runs.error && <ErrorBox error={runs.error} retry={runs.reload} />}
      {rows.length === 0 && !runs.error && (runs.data || !runs.loading) && <p className="muted" data-testid="runs-empty">No runs{state ? ` ${state}` : " yet"}.</p>}
      {rows.length === 0 && !runs.data && runs.loading && <Loading what="the runs" />}
      {rows.length > 0 && (
        <table className="runs">
          <caption className="caption">Runs of {t.id}, {offset + 1}–{offset + rows.length} of {total}, the newest first.</caption>
          <thead>
            <tr>
              <th scope="col">State</th>
              <th scope="col">Fired</th>
              <th scope="col">Outcome</th>
              <th scope="col">Attempts</th>
            </tr>
          </thead>
          <tbody>
            {rows.map((r) => <RunRow key={r.id} r={r} now={now} />)}
          </tbody>
        </table>
      )}
      {total > RUNS_PAGE && (
        <nav className="row pager" aria-label={`pages of the runs of trigger ${t.id}`}>
          <button disabled={offset === 0} onClick={() => setOffset(Math.max(0, offset - RUNS_PAGE))} data-testid="runs-newer">← Newer</button>
          <span>{offset + 1}–{Math.min(offset + RUNS_PAGE, total)} of {total}</span>
          <button disabled={offset + RUNS_PAGE >= total} onClick={() => setOffset(offset + RUNS_PAGE)} data-testid="runs-older">Older →</button>
        </nav>
      )}
    </div>
  );
}

function RunRow({ r, now }: { r: TriggerRun; now: number }) {
  return (
    <tr data-testid="run-row" data-run={r.id} data-state={r.state}>
      <td><RunBadge r={r} /></td>
      <td>
        <When at={r.createdAt} now={now} />
        {r.scheduledFor && <div className="small muted">for {fmtTime(r.scheduledFor)}</div>}
      </td>
      <td className="wrap outcome"><RunOutcome r={r} now={now} /></td>
      <td>{r.attempts}</td>
    </tr>
  );
}

/** RunOutcome is what became of a run: its thread, why it ended without one, or what it waits for. */
function RunOutcome({ r, now }: { r: TriggerRun; now: number }) {
  // A state this dashboard does not know yet (a newer gateway's) shows its error, if any.
  const other = r.error || "–";
  switch (r.state) {
    case "started":
      return r.threadId ? <a className="mono" href={href.thread(r.machine, r.threadId)}>{r.threadId}</a> : <span>started</span>;
    case "queued":
    case "sending": {
      const expires = Date.parse(r.expiresAt);
      return (
        <span>
          {r.state === "queued" ? `waiting for ${r.machine}` : `sending to ${r.machine}`}
          {Number.isFinite(expires) && <span className="muted"> (gives up {expires > now ? until(expires, now) : "now"})</span>}
          {r.error && <span className="muted small run-last-error"> last try: {r.error}</span>}
        </span>
      );
    }
    case "expired":
      return <span className="error">{r.error || `${r.machine} was not online before the run expired`}</span>;
    case "failed":
      return <span className="error">{r.error || "failed"}</span>;
    default:
      return <span className="muted">{other}</span>;
  }
}
