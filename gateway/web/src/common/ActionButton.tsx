import { useAction } from "./useAction";

/**
 * ActionButton acts at once, for what can be undone (pause, resume): no
 * question first, only a busy state and the action's error. Kill and fork
 * ask first (ConfirmButton).
 */
export function ActionButton({ label, action, className, testid, busyLabel = "Working…" }: { label: string; action: () => Promise<unknown>; className?: string; testid?: string; busyLabel?: string }) {
  const { busy, error, run: go } = useAction(action);
  return (
    <>
      <button className={className} data-testid={testid} onClick={go} disabled={busy} aria-busy={busy}>
        {busy ? busyLabel : label}
      </button>
      {error && <span className="error" role="alert">{error}</span>}
    </>
  );
}
