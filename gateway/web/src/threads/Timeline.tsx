import { duration } from "../api";
import { PausedSpan, place, Span, StepTiming, threadSpan } from "./timing";

/** Row is a line of the timeline: a step, or a stretch the thread was paused. */
type Row = { kind: "step"; s: StepTiming } | { kind: "paused"; p: PausedSpan };

/**
 * Timeline draws a thread's steps as a Gantt chart: a bar from each step's
 * start to its end, with the stretches the debug log shows the model or the
 * agent at work underneath, and each stretch the thread was paused as its
 * own grey line (in no step's duration). A step a kill or a failure cut
 * short is drawn up to the thread's end, marked. A fork's replayed steps
 * are listed, not drawn: they ran before this thread.
 */
export function Timeline({ steps, paused = [], current, stepHref }: { steps: StepTiming[]; paused?: PausedSpan[]; current: number | null; stepHref: (n: number) => string }) {
  const whole = threadSpan(steps, paused);
  if (!steps.length && !paused.length) return null;
  const waits = steps.some((s) => s.model || s.agent);
  // A pause is taken between two steps: it sits before the step that began when it ended.
  const rows: Row[] = [...steps.map((s): Row => ({ kind: "step", s })), ...paused.map((p): Row => ({ kind: "paused", p }))].sort(
    (a, b) => (a.kind === "step" ? a.s.from : a.p.from) - (b.kind === "step" ? b.s.from : b.p.from) || (a.kind === "paused" ? -1 : 1),
  );
  const pausedMs = paused.reduce((n, p) => n + (p.to - p.from), 0);
  return (
    <details className="card" data-testid="timeline" open>
      <summary>
        Timeline{whole ? ` (${duration(whole.to - whole.from)}${pausedMs > 0 ? `, ${duration(pausedMs)} of it paused` : ""})` : ""}
      </summary>
      <ol className="timeline">
        {rows.map((r) => (r.kind === "step" ? <StepRow key={`s${r.s.step}`} s={r.s} whole={whole} current={current} stepHref={stepHref} /> : <PausedRow key={`p${r.p.from}`} p={r.p} whole={whole} />))}
      </ol>
      <p className="tl-legend">
        <span><i style={{ background: "var(--accent)" }} />step</span>
        {paused.length > 0 && <span><i className="tl-pause" />paused (in no step)</span>}
        {steps.some((s) => s.ended) && <span><i className="tl-ended-key" />cut short (killed or failed)</span>}
        {waits && <span><i style={{ background: "var(--warn)" }} />model at work (debug log)</span>}
        {waits && <span><i style={{ background: "var(--ok)" }} />agent at work (debug log)</span>}
      </p>
    </details>
  );
}

function StepRow({ s, whole, current, stepHref }: { s: StepTiming; whole: Span | null; current: number | null; stepHref: (n: number) => string }) {
  const what = s.role || (s.running ? "current step" : "step");
  const cls = `tl-row${s.running ? " running" : ""}${s.replayed ? " replayed" : ""}${s.ended ? ` ended ${s.ended}` : ""}${current === s.step ? " current" : ""}`;
  return (
    <li className={cls} data-step={s.step} data-ms={s.ms} data-ended={s.ended}>
      {s.ended ? <span className="tl-no">#{s.step}</span> : <a href={stepHref(s.step)} className="tl-no">#{s.step}</a>}
      <span className="tl-role" title={s.role}>
        {s.role || <span className="muted">{s.running ? "running…" : "role unknown"}</span>}
        {s.ended && <span className={`badge st-${s.ended}`}>{s.ended}</span>}
      </span>
      <span className="tl-track">
        {whole && !s.replayed && (
          <Bar span={s} whole={whole} className={`tl-bar${s.ended ? " tl-ended" : ""}`} title={`${what}: ${duration(s.ms)}${s.ended ? `, then ${s.ended}` : ""}`} />
        )}
        {whole && s.model && <Bar span={s.model} whole={whole} className="tl-wait model" title={`model at work: ${duration(s.model.to - s.model.from)}`} />}
        {whole && s.agent && <Bar span={s.agent} whole={whole} className="tl-wait agent" title={`agent at work: ${duration(s.agent.to - s.agent.from)}`} />}
        {s.replayed && <span className="muted">replayed from the forked thread</span>}
      </span>
      <span className="tl-dur">{duration(s.ms)}</span>
    </li>
  );
}

function PausedRow({ p, whole }: { p: PausedSpan; whole: Span | null }) {
  const ms = p.to - p.from;
  return (
    <li className={`tl-row paused${p.open ? " open" : ""}`} data-paused={p.open ? "open" : "closed"} data-ms={ms}>
      <span className="tl-no" aria-hidden="true" />
      <span className="tl-role muted">{p.open ? "paused now" : "paused"}</span>
      <span className="tl-track">{whole && <Bar span={p} whole={whole} className="tl-pause" title={`paused ${duration(ms)}${p.open ? " so far" : ""}`} />}</span>
      <span className="tl-dur">{duration(ms)}</span>
    </li>
  );
}

function Bar({ span, whole, className, title }: { span: Span; whole: Span; className: string; title: string }) {
  const { left, width } = place(span, whole);
  return <span className={className} style={{ left: `${left}%`, width: `${width}%` }} title={title} />;
}
