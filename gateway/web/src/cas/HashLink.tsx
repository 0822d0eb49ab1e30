import { href } from "../route";

/** HashLink links a hash to the CAS view, or to `to` when the hash is not a CAS node (a bundle's). */
export function HashLink({ m, hash, label, to }: { m: string; hash?: string | null; label: string; to?: string }) {
  if (!hash) return null;
  return (
    <span className="hashlink">
      {label} <a href={to ?? href.cas(m, hash)} className="hash" data-cas={to ? undefined : hash} data-hash={hash}>{hash}</a>
    </span>
  );
}
