import { FormEvent, useEffect, useState } from "react";
import { ago, Answered, fmtTime, gateway, InboxThread, noMemory, Push, useApi } from "../api";
import { ANSWER_OFFLINE, AnsweredNote, Deadline, OfflineQuestion, QuestionPanel } from "../answer/QuestionPanel";
import { ErrorBox } from "../common/ErrorBox";
import { Loading } from "../common/Loading";
import { ScrollBox } from "../common/ScrollBox";
import { hashQuery, href, replaceQuery, useHashChange } from "../route";
import { onInboxChange } from "../answer/inboxEvents";
import "./inbox.css";

/** INBOX_PAGE is how many waiting threads a page shows. */
export const INBOX_PAGE = 50;
/** INBOX_POLL_MS is how often the inbox asks the gateway again while the gateway does not push thread changes. */
export const INBOX_POLL_MS = 10_000;
/**
 * INBOX_PUSH is the change hints the inbox reloads on: a thread waiting
 * for a person, or no longer, is a change to its machine's threads; each
 * row says whether its machine is online, which a machine coming or going
 * changes.
 */
export const INBOX_PUSH: Push[] = [{ topic: "threads" }, { topic: "machines" }];
/** QUESTION_LINES is how many of a question's lines a row shows. */
export const QUESTION_LINES = 3;

/** inboxFromHash reads the assignee filter and the page from the hash's query (#/inbox?assignee=bob&offset=50). */
export function inboxFromHash(hash = window.location.hash): { assignee: string; offset: number } {
  const p = hashQuery(hash);
  const offset = Number(p.get("offset"));
  return { assignee: p.get("assignee") ?? "", offset: Number.isInteger(offset) && offset > 0 ? offset : 0 };
}

function inboxToHash(assignee: string, offset: number) {
  const p = new URLSearchParams();
  if (assignee) p.set("assignee", assignee);
  if (offset) p.set("offset", String(offset));
  replaceQuery(p);
}

/** firstLines is a question's first lines (n of them), "…" when there is more. */
export function firstLines(text: string, n = QUESTION_LINES): string {
  const lines = text.split("\n");
  const head = lines.slice(0, n).join("\n").trimEnd();
  return lines.length > n ? head + " …" : head;
}

/**
 * InboxView is every thread waiting for a person's answer, on every
 * machine, oldest wait first (GET /api/gateway/inbox): an offline machine's
 * threads too, marked, as the gateway last saw them. A row opens to the
 * question and its form, answered there; an offline machine's cannot be
 * answered until it is back.
 */
export function InboxView() {
  const [initial] = useState(() => inboxFromHash());
  const [assignee, setAssignee] = useState(initial.assignee);
  const [draft, setDraft] = useState(initial.assignee);
  const [offset, setOffsetState] = useState(initial.offset);
  const [open, setOpen] = useState<string | null>(null);
  // A link to another filter (the top bar's Inbox: none) replaces this one.
  useHashChange(() => {
    const next = inboxFromHash();
    setAssignee(next.assignee);
    setDraft(next.assignee);
    setOffsetState(next.offset);
  });
  const list = useApi(() => gateway.inbox({ assignee: assignee || undefined, limit: INBOX_PAGE, offset }), [assignee, offset], INBOX_POLL_MS, INBOX_PUSH);
  // An answer taken here, or found given by someone else: the list is asked again at once.
  useEffect(() => onInboxChange(list.reload), [list.reload]);
  // The last answer taken here, said on after its row leaves the list.
  const [last, setLast] = useState<(Answered & { machine: string }) | null>(null);
  const setOffset = (n: number) => {
    setOffsetState(n);
    inboxToHash(assignee, n);
  };
  const apply = (a: string) => {
    setAssignee(a);
    setDraft(a);
    setOffsetState(0);
    inboxToHash(a, 0);
  };
  const submit = (e: FormEvent) => {
    e.preventDefault();
    apply(draft.trim());
  };
  const total = list.data?.total ?? 0;
  const rows = list.data?.threads ?? [];
  const unavailable = noMemory(list.error);
  const now = Date.now();
  return (
    <section aria-labelledby="inbox-title" data-testid="inbox">
      <div className="row between wrap">
        <h1 id="inbox-title">Inbox</h1>
        <form className="row wrap filters" onSubmit={submit} role="search">
          <label className="inline">
            Assignee{" "}
            <input type="search" value={draft} onChange={(e) => setDraft(e.target.value)} aria-label="assignee filter" placeholder="anyone" />
          </label>
          <button type="submit">Filter</button>
          {assignee && <button type="button" className="link" onClick={() => apply("")}>Clear</button>}
        </form>
      </div>
      <p className="muted lead-in">Threads waiting for a person's answer, the longest waiting first.</p>
      {last && (
        <div className="inbox-last" data-testid="inbox-last">
          <a className="mono" href={href.thread(last.machine, last.threadId)}>{last.threadId}</a> on {last.machine}: <AnsweredNote by={last.answeredBy} at={last.answeredAt} />
        </div>
      )}
      {unavailable && <p className="empty muted" data-testid="no-inbox">This gateway keeps no inbox: {list.error?.message}.</p>}
      {list.error && !unavailable && <ErrorBox error={list.error} retry={list.reload} />}
      {!list.data && list.loading && <Loading what="the inbox" />}
      {list.data && rows.length === 0 && <p className="empty muted" data-testid="inbox-empty">Nothing is waiting{assignee ? ` for ${assignee}` : ""}.</p>}
      {rows.length > 0 && (
        <ScrollBox>
          <table className="inbox">
            <caption className="caption">Waiting threads {offset + 1}–{offset + rows.length} of {total}, the longest waiting first.</caption>
            <thead>
              <tr>
                <th scope="col">Machine</th>
                <th scope="col">Workflow</th>
                <th scope="col">Thread</th>
                <th scope="col">Role</th>
                <th scope="col">Question</th>
                <th scope="col">Asked</th>
                <th scope="col">Since</th>
                <th scope="col">Deadline</th>
                <th scope="col"><span className="sr-only">Answer</span></th>
              </tr>
            </thead>
            <tbody>
              {rows.map((t) => {
                const key = `${t.machine}/${t.threadId}`;
                return (
                  <InboxRow
                    key={key}
                    t={t}
                    now={now}
                    open={open === key}
                    toggle={() => setOpen(open === key ? null : key)}
                    onAnswered={(a) => setLast({ ...a, machine: t.machine })}
                  />
                );
              })}
            </tbody>
          </table>
        </ScrollBox>
      )}
      {total > INBOX_PAGE && (
        <nav className="row pager" aria-label="pages">
          <button disabled={offset === 0} onClick={() => setOffset(Math.max(0, offset - INBOX_PAGE))} data-testid="earlier">← Longer waiting</button>
          <span>{offset + 1}–{Math.min(offset + INBOX_PAGE, total)} of {total}</span>
          <button disabled={offset + INBOX_PAGE >= total} onClick={() => setOffset(offset + INBOX_PAGE)} data-testid="later">Newer →</button>
        </nav>
      )}
    </section>
  );
}

/** InboxRow is one waiting thread and, opened, its question and form (the question as last seen, if its machine is offline). */
function InboxRow({ t, now, open, toggle, onAnswered }: { t: InboxThread; now: number; open: boolean; toggle: () => void; onAnswered: (a: Answered) => void }) {
  const since = Date.parse(t.since);
  const offline = !t.online;
  const panel = `answer-${t.machine}-${t.threadId}`;
  return (
    <>
      <tr className={`inbox-row${offline ? " offline-row" : ""}`} data-testid="inbox-row" data-machine={t.machine} data-thread={t.threadId} data-online={t.online ? "true" : "false"}>
        <td className="wrap">
          <a href={href.threads(t.machine)}>{t.machine}</a>
          {offline && <span className="badge st-offline offline-mark" data-testid="inbox-offline" title="the machine is offline: this is what the gateway last saw"> offline</span>}
        </td>
        <td className="wrap">{t.workflow || <span className="muted">unknown</span>}</td>
        <td className="mono"><a href={href.thread(t.machine, t.threadId)}>{t.threadId}</a></td>
        <td className="role">{t.role}</td>
        <td className="question-cell" title={t.question}>
          <div className="question-lines">{firstLines(t.question)}</div>
        </td>
        <td className="wrap">{t.assignee || <span className="muted">anyone</span>}</td>
        <td title={fmtTime(t.since)}>{Number.isFinite(since) ? ago(since, now) : t.since}</td>
        <td><Deadline at={t.deadline} now={now} /></td>
        <td>
          <button type="button" className="small" data-testid="inbox-expand" aria-expanded={open} aria-controls={panel} onClick={toggle}>
            {open ? "Close" : "Answer…"}
          </button>
        </td>
      </tr>
      {open && (
        <tr className="inbox-answer-row" id={panel}>
          <td colSpan={9} className="inbox-answer-cell">
            {offline ? (
              <OfflineQuestion role={t.role} question={t.question} assignee={t.assignee} since={t.since} deadline={t.deadline} why={ANSWER_OFFLINE} />
            ) : (
              <QuestionPanel machine={t.machine} id={t.threadId} onAnswered={onAnswered} />
            )}
          </td>
        </tr>
      )}
    </>
  );
}
