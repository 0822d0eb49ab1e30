import { useState } from "react";
import { Modal } from "./Modal";
import { useAction } from "./useAction";

/** ConfirmButton asks before it acts, and shows the action's error. */
export function ConfirmButton({ label, question, action, className, testid }: { label: string; question: string; action: () => Promise<unknown>; className?: string; testid?: string }) {
  const [asking, setAsking] = useState(false);
  const { busy, error, run: go } = useAction(action, () => setAsking(false));
  return (
    <>
      <button className={className} data-testid={testid} onClick={() => setAsking(true)}>
        {label}
      </button>
      {asking && (
        <Modal title={label} onClose={() => setAsking(false)}>
          <p>{question}</p>
          {error && <p className="error" role="alert">{error}</p>}
          <div className="row end">
            <button onClick={() => setAsking(false)}>Cancel</button>
            <button className="primary" data-testid="confirm" onClick={go} disabled={busy} autoFocus>
              {busy ? "Working…" : "Confirm"}
            </button>
          </div>
        </Modal>
      )}
    </>
  );
}
