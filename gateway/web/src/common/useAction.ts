import { useState } from "react";

/**
 * useAction runs an action a button starts: busy while it runs, its error
 * kept to show beside the button; done runs after it succeeds.
 */
export function useAction(action: () => Promise<unknown>, done?: () => void) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const run = async () => {
    setBusy(true);
    setError(null);
    try {
      await action();
      done?.();
    } catch (e) {
      setError((e as Error).message);
    } finally {
      setBusy(false);
    }
  };
  return { busy, error, run };
}
