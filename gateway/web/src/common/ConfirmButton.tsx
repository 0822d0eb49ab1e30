import { useState, type ReactNode } from "react";
import { useActionBlock } from "../machines/scope";
import { Modal } from "./Modal";
import { useAction } from "./useAction";

/**
 * ConfirmButton asks before it acts, and shows the action's error. Where no
 * action can work (useActionBlock) it is disabled, saying why, and so is
 * the Confirm of a question already open.
 */
export function ConfirmButton({ label, question, action, className, testid, ariaLabel, title = label, confirmLabel = "Confirm" }: {
  label: string;
  question: ReactNode;
  action: () => Promise<unknown>;
  className?: string;
  testid?: string;
  /** ariaLabel names the button where its label alone is one of many alike (a table's rows). */
  ariaLabel?: string;
  /** title heads the question (default: the label). */
  title?: string;
  /** confirmLabel is the button that acts (default: Confirm). */
  confirmLabel?: string;
}) {
  const [asking, setAsking] = useState(false);
  const { busy, error, run: go } = useAction(action, () => setAsking(false));
  const why = useActionBlock();
  return (
    <>
      <button className={className} data-testid={testid} aria-label={ariaLabel} onClick={() => setAsking(true)} disabled={!!why} title={why ?? undefined}>
        {label}
      </button>
      {asking && (
        <Modal title={title} onClose={() => setAsking(false)}>
          <p>{question}</p>
          {why && <p className="error" role="alert">Not now: {why}.</p>}
          {error && <p className="error" role="alert">{error}</p>}
          <div className="row end">
            <button onClick={() => setAsking(false)}>Cancel</button>
            <button className="primary" data-testid="confirm" onClick={go} disabled={busy || !!why} autoFocus>
              {busy ? "Working…" : confirmLabel}
            </button>
          </div>
        </Modal>
      )}
    </>
  );
}
