import { useMemo, useState } from "react";
import Markdown from "react-markdown";
import { ago, Answered, ApiError, fmtTime, machine, until, useApi } from "../api";
import { ErrorBox } from "../common/ErrorBox";
import { Loading } from "../common/Loading";
import { useActionBlock } from "../machines/scope";
import { AnswerForm } from "./AnswerForm";
import { inboxChanged } from "./inboxEvents";
import "./answer.css";

/** ANSWER_OFFLINE is why a question cannot be answered while its machine is offline. */
export const ANSWER_OFFLINE = "its machine is offline, and an answer needs it online";

/**
 * QuestionPanel is what a waiting thread asks (its machine's
 * GET .../question) with the form to answer it; once someone answered, the
 * answer, read-only, with who and when. A 409 (someone else was first, or
 * the question changed) says so in the connector's words and loads the
 * question again. onAnswered runs after an answer of ours was taken.
 */
export function QuestionPanel({ machine: m, id, onAnswered, disabledWhy = null }: { machine: string; id: string; onAnswered?: (a: Answered) => void; disabledWhy?: string | null }) {
  const api = useMemo(() => machine(m), [m]);
  const q = useApi(() => api.question(id), [m, id]);
  const [conflict, setConflict] = useState<string | null>(null);
  const [taken, setTaken] = useState<Answered | null>(null);
  const block = useActionBlock();
  const why = disabledWhy ?? block;
  const gone = q.error instanceof ApiError && q.error.status === 404;
  const data = q.data;
  return (
    <section className="card question" data-testid="question" aria-label="question">
      <h2 className="question-title">Waiting for an answer</h2>
      {conflict && <p className="error-box" role="alert" data-testid="answer-conflict">{conflict}</p>}
      {taken && !data?.answered && <AnsweredNote by={taken.answeredBy} at={taken.answeredAt} />}
      {gone && !taken && <p className="muted" data-testid="question-gone">This thread waits for no answer now.</p>}
      {q.error && !gone && <ErrorBox error={q.error} retry={q.reload} />}
      {!data && q.loading && <Loading what="the question" />}
      {data && (
        <>
          <QuestionHead role={data.role} assignee={data.assignee} since={data.askedAt} deadline={data.deadline} />
          <div className="md question-text" data-testid="question-text">
            <Markdown>{data.question}</Markdown>
          </div>
          {data.answered ? (
            <>
              <AnsweredNote by={data.answeredBy} at={data.answeredAt ?? undefined} />
              <pre className="wrap answer-given" data-testid="answer-given">{JSON.stringify(data.answer ?? null, null, 2)}</pre>
            </>
          ) : (
            !taken && (
              <AnswerForm
                // A question asked again (a new hash) is a new form.
                key={data.questionHash}
                machine={m}
                question={data}
                disabledWhy={why}
                onAnswered={(a) => {
                  setConflict(null);
                  setTaken(a);
                  inboxChanged();
                  q.reload();
                  onAnswered?.(a);
                }}
                onConflict={(msg) => {
                  setConflict(msg);
                  inboxChanged();
                  q.reload();
                }}
              />
            )
          )}
        </>
      )}
    </section>
  );
}

/** QuestionHead says which role asks whom, since when and until when (an overdue deadline marked). */
export function QuestionHead({ role, assignee, since, deadline }: { role: string; assignee: string; since: string; deadline?: string | null }) {
  const t = Date.parse(since);
  return (
    <dl className="kv question-head">
      <dt>Role</dt>
      <dd className="role">{role}</dd>
      <dt>Asked</dt>
      <dd data-testid="question-assignee">{assignee || <span className="muted">anyone</span>}</dd>
      <dt>Since</dt>
      <dd title={fmtTime(since)}>{Number.isFinite(t) ? `${fmtTime(since)} (${ago(t)})` : since || "–"}</dd>
      {deadline && (
        <>
          <dt>Deadline</dt>
          <dd><Deadline at={deadline} /></dd>
        </>
      )}
    </dl>
  );
}

/** Deadline is how far off a deadline is, or by how much it passed (marked overdue). */
export function Deadline({ at, now = Date.now() }: { at: string | null | undefined; now?: number }) {
  if (!at) return <span className="muted">none</span>;
  const t = Date.parse(at);
  if (!Number.isFinite(t)) return <span>{at}</span>;
  const over = t < now;
  return (
    <time dateTime={at} title={fmtTime(at)} className={over ? "overdue" : undefined} data-overdue={over ? "true" : undefined}>
      {until(t, now)}
    </time>
  );
}

/** AnsweredNote says who answered and when. */
export function AnsweredNote({ by, at }: { by?: string; at?: string }) {
  return (
    <p className="answered" data-testid="answered" role="status">
      Answered by <b>{by || "someone"}</b>
      {at ? <> at <time dateTime={at}>{fmtTime(at)}</time></> : null}.
    </p>
  );
}

/**
 * OfflineQuestion is a question as the gateway last saw it, for a thread
 * whose machine is offline: the question (cut short), and why it cannot be
 * answered now.
 */
export function OfflineQuestion({ role, question, assignee, since, deadline, why }: { role: string; question: string; assignee: string; since: string; deadline?: string | null; why: string }) {
  return (
    <section className="card question" data-testid="question" aria-label="question">
      <h2 className="question-title">Waiting for an answer</h2>
      <QuestionHead role={role} assignee={assignee} since={since} deadline={deadline} />
      <div className="md question-text" data-testid="question-text">
        <Markdown>{question}</Markdown>
      </div>
      <p className="offline-banner" data-testid="answer-off" role="status">No answer now: {why}.</p>
      <button type="button" className="primary answer-submit" data-testid="answer-submit" disabled title={why}>Send answer</button>
    </section>
  );
}
