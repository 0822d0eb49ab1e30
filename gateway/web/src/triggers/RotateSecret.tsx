import { useState } from "react";
import { gateway, Trigger } from "../api";
import { Modal } from "../common/Modal";
import { useAction } from "../common/useAction";
import { useActionBlock } from "../machines/scope";

/** RotatedSecret is the answer to a rotation: the new secret, which the gateway shows this once. */
export type RotatedSecret = { trigger: Trigger; secret: string };

/** KEEP_PREVIOUS is how long the old secret is still accepted by default: time to update the sender without a delivery refused. */
export const KEEP_PREVIOUS = "24h";
/** END_PREVIOUS ends the old secret at once, for one that may have leaked. */
export const END_PREVIOUS = "0s";

/**
 * RotateButton gives a webhook a new secret, asking first how long the old
 * one stays accepted: a day by default, so the sender can be updated
 * without a delivery refused, or not at all when it may have leaked. The
 * answer goes to onRotated, which shows the secret (it is never shown
 * again); a refusal shows in the dialog, as ConfirmButton's do.
 */
export function RotateButton({ t, onRotated }: { t: Trigger; onRotated: (r: RotatedSecret, keepPrevious: string) => void }) {
  const [asking, setAsking] = useState(false);
  const [keep, setKeep] = useState(KEEP_PREVIOUS);
  const why = useActionBlock();
  const { busy, error, run: go } = useAction(async () => {
    const r = await gateway.rotateSecret(t.id, keep);
    // The dialog closes in the same render as the secret shows, so that the
    // focus the dialog gives back does not land after the secret's own.
    setAsking(false);
    onRotated(r, keep);
  });
  const open = () => {
    setKeep(KEEP_PREVIOUS);
    setAsking(true);
  };
  const name = `rotate-keep-${t.id}`;
  return (
    <>
      <button className="small" data-testid="trigger-rotate" aria-label={`Rotate the secret of webhook ${t.id}`} onClick={open} disabled={!!why} title={why ?? undefined}>
        Rotate secret
      </button>
      {asking && (
        <Modal title="Rotate the secret" onClose={() => setAsking(false)}>
          <p>
            The webhook <span className="mono">{t.id}</span> gets a new secret, shown once. Deliveries signed with the old one are refused once it ends, so
            the sender needs the new one by then.
          </p>
          <fieldset className="rotate-choice">
            <legend>The old secret</legend>
            <label className="inline">
              <input type="radio" name={name} value={KEEP_PREVIOUS} checked={keep === KEEP_PREVIOUS} onChange={() => setKeep(KEEP_PREVIOUS)} /> keeps working for 24 hours
            </label>
            <label className="inline">
              <input type="radio" name={name} value={END_PREVIOUS} checked={keep === END_PREVIOUS} onChange={() => setKeep(END_PREVIOUS)} /> ends now (it may have leaked)
            </label>
          </fieldset>
          {why && <p className="error" role="alert">Not now: {why}.</p>}
          {error && <p className="error" role="alert">{error}</p>}
          <div className="row end">
            <button onClick={() => setAsking(false)}>Cancel</button>
            <button className="primary" data-testid="confirm" onClick={go} disabled={busy || !!why}>
              {busy ? "Working…" : "Rotate"}
            </button>
          </div>
        </Modal>
      )}
    </>
  );
}
