import { useActionBlock } from "../machines/scope";
import { useAction } from "./useAction";

/**
 * ActionButton acts at once, for what can be undone (pause, resume): no
 * question first, only a busy state and the action's error. Kill and fork
 * ask first (ConfirmButton). It is disabled, saying why, where no action
 * can work (useActionBlock) or when disabledWhy says so.
 */
export function ActionButton({ label, action, className, testid, ariaLabel, busyLabel = "Working…", disabledWhy = null }: { label: string; action: () => Promise<unknown>; className?: string; testid?: string; ariaLabel?: string; busyLabel?: string; disabledWhy?: string | null }) {
  const { busy, error, run: go } = useAction(action);
  const why = useActionBlock() ?? disabledWhy;
  return (
    <>
      <button className={className} data-testid={testid} aria-label={ariaLabel} onClick={go} disabled={busy || !!why} aria-busy={busy} title={why ?? undefined}>
        {busy ? busyLabel : label}
      </button>
      {error && <span className="error" role="alert">{error}</span>}
    </>
  );
}
