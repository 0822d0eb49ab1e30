import { duration } from "../api";
import { place, Span, StepTiming, threadSpan } from "./timing";

/**
 * Timeline draws a thread's steps as a Gantt chart: a bar from each step's
 * start to its end, with the stretches the debug log shows the model or the
 * agent at work underneath. A fork's replayed steps are listed, not drawn:
 * they ran before this thread.
 */
export function Timeline({ steps, current, stepHref }: { steps: StepTiming[]; current: number | null; stepHref: (n: number) => string }) {
  const whole = threadSpan(steps);
  if (!steps.length) return null;
  const waits = steps.some((s) => s.model || s.agent);
  return (
    <details className="card" data-testid="timeline" open>
      <summary>
        Timeline{whole ? ` (${duration(whole.to - whole.from)})` : ""}
      </summary>
      <ol className="timeline">
        {steps.map((s) => (
          <li key={s.step} className={`tl-row${s.running ? " running" : ""}${s.replayed ? " replayed" : ""}${current === s.step ? " current" : ""}`} data-step={s.step} data-ms={s.ms}>
            <a href={stepHref(s.step)} className="tl-no">#{s.step}</a>
            <span className="tl-role" title={s.role}>{s.role || <span className="muted">running…</span>}</span>
            <span className="tl-track">
              {whole && !s.replayed && <Bar span={s} whole={whole} className="tl-bar" title={`${s.role || "current step"}: ${duration(s.ms)}`} />}
              {whole && s.model && <Bar span={s.model} whole={whole} className="tl-wait model" title={`model at work: ${duration(s.model.to - s.model.from)}`} />}
              {whole && s.agent && <Bar span={s.agent} whole={whole} className="tl-wait agent" title={`agent at work: ${duration(s.agent.to - s.agent.from)}`} />}
              {s.replayed && <span className="muted">replayed from the forked thread</span>}
            </span>
            <span className="tl-dur">{duration(s.ms)}</span>
          </li>
        ))}
      </ol>
      <p className="tl-legend">
        <span><i style={{ background: "var(--accent)" }} />step</span>
        {waits && <span><i style={{ background: "var(--warn)" }} />model at work (debug log)</span>}
        {waits && <span><i style={{ background: "var(--ok)" }} />agent at work (debug log)</span>}
      </p>
    </details>
  );
}

function Bar({ span, whole, className, title }: { span: Span; whole: Span; className: string; title: string }) {
  const { left, width } = place(span, whole);
  return <span className={className} style={{ left: `${left}%`, width: `${width}%` }} title={title} />;
}
