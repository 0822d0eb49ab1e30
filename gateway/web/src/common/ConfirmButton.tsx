import { useState } from "react";
import { useActionBlock } from "../machines/scope";
import { Modal } from "./Modal";
import { useAction } from "./useAction";

/**
 * ConfirmButton asks before it acts, and shows the action's error. Where no
 * action can work (useActionBlock) it is disabled, saying why, and so is
 * the Confirm of a question already open.
 */
export function ConfirmButton({ label, question, action, className, testid }: { label: string; question: string; action: () => Promise<unknown>; className?: string; testid?: string }) {
  const [asking, setAsking] = useState(false);
  const { busy, error, run: go } = useAction(action, () => setAsking(false));
  const why = useActionBlock();
  return (
    <>
      <button className={className} data-testid={testid} onClick={() => setAsking(true)} disabled={!!why} title={why ?? undefined}>
        {label}
      </button>
      {asking && (
        <Modal title={label} onClose={() => setAsking(false)}>
          <p>{question}</p>
          {why && <p className="error" role="alert">Not now: {why}.</p>}
          {error && <p className="error" role="alert">{error}</p>}
          <div className="row end">
            <button onClick={() => setAsking(false)}>Cancel</button>
            <button className="primary" data-testid="confirm" onClick={go} disabled={busy || !!why} autoFocus>
              {busy ? "Working…" : "Confirm"}
            </button>
          </div>
        </Modal>
      )}
    </>
  );
}
