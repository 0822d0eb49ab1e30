import { ReactNode } from "react";
import { HASH_RE } from "../api";
import { href } from "../route";

/** Linkify turns CAS hashes in text into links to the CAS viewer. */
export function Linkify({ m, text }: { m: string; text: string }) {
  const out: ReactNode[] = [];
  let last = 0;
  for (const match of text.matchAll(HASH_RE)) {
    const i = match.index ?? 0;
    out.push(text.slice(last, i));
    out.push(
      <a key={i} href={href.cas(m, match[0])} className="hash">
        {match[0]}
      </a>,
    );
    last = i + match[0].length;
  }
  out.push(text.slice(last));
  return <>{out}</>;
}
