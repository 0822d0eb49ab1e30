import { href } from "../route";

export function HashLink({ m, hash, label }: { m: string; hash?: string | null; label: string }) {
  if (!hash) return null;
  return (
    <span className="hashlink">
      {label} <a href={href.cas(m, hash)} className="hash" data-cas={hash}>{hash}</a>
    </span>
  );
}
