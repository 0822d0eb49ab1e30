import { HASH_RE } from "../api";

/** topLevel returns the text of a top-level YAML key: inline, or its indented block. */
function topLevel(content: string, key: string): string | null {
  const m = content.match(new RegExp(`^${key}:(.*)$`, "m"));
  if (!m || m.index === undefined) return null;
  const inline = m[1].trim();
  if (inline) return inline;
  const rest = content.slice(m.index + m[0].length + 1);
  const end = rest.search(/^\S/m); // the next top-level key
  const block = (end >= 0 ? rest.slice(0, end) : rest).replace(/\s+$/, "");
  const indent = Math.min(...block.split("\n").filter((l) => l.trim()).map((l) => l.match(/^ */)![0].length));
  return block.split("\n").map((l) => l.slice(Number.isFinite(indent) ? indent : 0)).join("\n");
}

/** casParts reads a node's type, payload and the hashes it refers to. */
export function casParts(content: string): { type: string | null; payload: string | null; refs: string[] } {
  const type = topLevel(content, "type")?.replace(/^["']|["']$/g, "") ?? null;
  const payload = topLevel(content, "payload");
  const refs = [...new Set(topLevel(content, "refs")?.match(HASH_RE) ?? [])];
  return { type, payload, refs };
}
