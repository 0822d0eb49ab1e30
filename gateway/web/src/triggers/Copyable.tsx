import { useEffect, useRef, useState } from "react";

/** COPIED_MS is how long "Copied" stays beside the button. */
export const COPIED_MS = 2000;

/**
 * Copyable is a value to paste elsewhere (a webhook's URL, its secret) with
 * a button that copies it. The clipboard API exists only in a secure
 * context: a gateway reached over plain HTTP on another host has none, so
 * then the value is selected instead, for the person to copy by hand.
 */
export function Copyable({ text, label, testid }: { text: string; label: string; testid?: string }) {
  const ref = useRef<HTMLElement>(null);
  const [said, setSaid] = useState<string | null>(null);
  useEffect(() => {
    if (said !== "Copied") return;
    const t = setTimeout(() => setSaid(null), COPIED_MS);
    return () => clearTimeout(t);
  }, [said]);
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(text);
      setSaid("Copied");
    } catch {
      if (ref.current) window.getSelection()?.selectAllChildren(ref.current);
      setSaid("Selected: copy it with Ctrl+C (⌘C)");
    }
  };
  return (
    <span className="copyable">
      <code className="copy-text" data-testid={testid} ref={ref}>{text}</code>
      <button type="button" className="small" aria-label={label} onClick={copy}>Copy</button>
      <span className="small muted" role="status">{said}</span>
    </span>
  );
}
