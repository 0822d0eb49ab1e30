import Markdown from "react-markdown";
import { fmtTime, ThreadRecord } from "../api";
import { HashLink } from "../cas/HashLink";
import { ConfirmButton } from "../common/ConfirmButton";

/** RecordCard shows one record of a thread; without onFork (its machine offline) there is no fork button. */
export function RecordCard({ m, r, onFork }: { m: string; r: ThreadRecord; onFork?: (fromRole?: string) => Promise<void> }) {
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
          {onFork && <ConfirmButton label="Fork from here" question={`Start a new thread replaying this one up to its first "${r.role}" step?`} action={() => onFork(r.role)} className="small" />}
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
