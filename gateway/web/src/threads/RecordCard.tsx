import { memo } from "react";
import Markdown from "react-markdown";
import { duration, fmtTime, ThreadRecord } from "../api";
import { HashLink } from "../cas/HashLink";
import { ConfirmButton } from "../common/ConfirmButton";
import { href } from "../route";
import { endedAs } from "./streamText";
import { StepTiming } from "./timing";
import { readUsage, usageText } from "./usage";

type Props = {
  m: string;
  r: ThreadRecord;
  onFork?: (step: number, role: string) => Promise<void>;
  /** step is the 1-based role step this record is (role records only) */
  step?: number;
  timing?: StepTiming;
  current?: boolean;
  stepHref?: (n: number) => string;
};

/** sameCard: a card draws again only when what it shows changed, not on each tick of a running step's clock. */
const sameTiming = (a?: StepTiming, b?: StepTiming) => a === b || (!!a && !!b && a.ms === b.ms && a.from === b.from && a.to === b.to && a.replayed === b.replayed);
const sameCard = (a: Props, b: Props) =>
  a.m === b.m && a.r === b.r && a.step === b.step && a.current === b.current && !a.onFork === !b.onFork && sameTiming(a.timing, b.timing);

/**
 * RecordCard shows one record of a thread. A step card carries its number
 * (a link that keeps ?step=N in the address), how long it took and its model
 * usage; without onFork (its machine offline) there is no fork button.
 *
 * It draws again only when its record, number, timing or marking changed.
 */
export const RecordCard = memo(RecordCardView, sameCard);

function RecordCardView({ m, r, onFork, step, timing, current, stepHref }: Props) {
  const usage = readUsage((r as { usage?: unknown }).usage);
  if (r.type === "thread-start") {
    return (
      <article className="card rec rec-start" aria-label="thread start">
        <header className="row between wrap">
          <strong>▶ {r.workflow}</strong>
          <time>{fmtTime(r.timestamp)}</time>
        </header>
        {r.prompt ? <div className="md"><Markdown>{r.prompt}</Markdown></div> : <p className="muted">No prompt.</p>}
        <footer className="hashes">
          <HashLink m={m} hash={r.bundleHash} label="bundle" to={r.bundleHash ? href.bundle(m, r.bundleHash) : undefined} />
          <HashLink m={m} hash={r.start} label="start" />
          <span data-testid="head"><HashLink m={m} hash={r.head} label="head" /></span>
        </footer>
      </article>
    );
  }
  if (r.type === "workflow-result") {
    return (
      <article className={`card rec rec-result ${r.returnCode === 0 ? "ok" : "bad"}`} aria-label="thread result">
        <header className="row between wrap">
          <strong>■ {endedAs([r], undefined)}: return code {r.returnCode}</strong>
          <time>{fmtTime(r.timestamp)}</time>
        </header>
        {r.content ? <div className="md" data-testid="result-summary"><Markdown>{r.content}</Markdown></div> : <p className="muted">No summary.</p>}
        {usage && <p className="usage" data-testid="result-usage">Model usage while ending (the summary): <b>{usageText(usage)}</b></p>}
        <footer className="hashes"><HashLink m={m} hash={r.stateHash} label="state" /></footer>
      </article>
    );
  }
  return (
    <article className={`card rec rec-role${current ? " current" : ""}`} data-role={r.role} data-step={step} id={step ? `step-${step}` : undefined} aria-label={`step ${step ?? ""} ${r.role}`.replace("  ", " ")}>
      <header className="row between wrap">
        <span>
          {step !== undefined && (
            <a className="step-no" href={stepHref ? stepHref(step) : undefined} title="link to this step">#{step}</a>
          )}
          <strong className="role">{r.role}</strong>
        </span>
        <span className="row">
          {timing && (
            <span className="step-dur" data-testid="step-duration" title={timing.replayed ? "replayed by the fork from the thread it forked" : `${fmtTime(timing.from)} → ${fmtTime(timing.to)}`}>
              {timing.replayed ? "replayed" : duration(timing.ms)}
            </span>
          )}
          <time>{fmtTime(r.timestamp)}</time>
          {onFork && step !== undefined && (
            <ConfirmButton
              testid="fork"
              label="Fork from here"
              question={`Start a new thread that replays this one up to step ${step} (${r.role}) and runs on from there?`}
              action={() => onFork(step, r.role)}
              className="small"
            />
          )}
        </span>
      </header>
      {r.content ? <div className="md"><Markdown>{r.content}</Markdown></div> : <p className="muted">(no content)</p>}
      {usage && <p className="usage" data-testid="step-usage">Model usage: <b>{usageText(usage)}</b></p>}
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
