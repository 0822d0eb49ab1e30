// The debug log as `uncaged-workflow live --debug` prints it: each line's
// time, tag and text, one line per record (the text wraps on screen), and
// filters by tag.

/** LogLine is one debug-log record: when (ms, null when unknown), tag, text. */
export type LogLine = { time: number | null; tag: string; text: string };

/**
 * parseLogLine reads one info event's data: a {tag, content, timestamp}
 * object as JSON text, or already parsed. Anything else is kept whole as
 * its text, with no tag and no time, so nothing the server sent is lost.
 */
export function parseLogLine(raw: unknown): LogLine {
  let v = raw;
  if (typeof raw === "string") {
    try {
      v = JSON.parse(raw);
    } catch {
      return { time: null, tag: "", text: raw };
    }
  }
  if (!v || typeof v !== "object" || Array.isArray(v)) return { time: null, tag: "", text: typeof raw === "string" ? raw : JSON.stringify(raw) };
  const o = v as Record<string, unknown>;
  const tag = typeof o.tag === "string" ? o.tag : "";
  const text = typeof o.content === "string" ? o.content : o.content === undefined ? "" : JSON.stringify(o.content);
  const time = typeof o.timestamp === "number" && Number.isFinite(o.timestamp) && o.timestamp > 0 ? o.timestamp : null;
  if (!tag && !text && time === null) return { time: null, tag: "", text: typeof raw === "string" ? raw : JSON.stringify(raw) };
  return { time, tag, text };
}

const pad = (n: number) => String(n).padStart(2, "0");

/** logTime is a record's time as live prints it, 15:04:05 (local time); "--:--:--" unknown. */
export function logTime(ms: number | null): string {
  if (ms === null) return "--:--:--";
  const d = new Date(ms);
  return `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

/**
 * formatLogLine is the line `live --debug` prints: "[15:04:05] [TAG] text",
 * the text's own newlines turned into spaces.
 */
export function formatLogLine(l: LogLine): string {
  return `[${logTime(l.time)}] [${l.tag}] ${l.text.replace(/\r?\n/g, " ")}`;
}

/**
 * TAG_NAMES names the engine's coded tags (8 Crockford characters, as the
 * original's log tags, which `live --debug` prints as they are); other tags
 * (model, react, agent.out, …) are words already.
 */
export const TAG_NAMES: Record<string, string> = {
  T9HQ2KHM: "started",
  N7BW4YHQ: "step",
  R2XK8MDA: "finished",
  Q3MN8YKW: "error",
  V8JX4NP2: "killed",
  S5DT2WQH: "summarizer",
  Z8KM5QWT: "supervisor",
  K6PW9NYT: "supervisor skipped",
  M4QX8VHN: "supervisor killed",
};

/** tagName is a tag's name for people: its word for a coded tag, else the tag. */
export function tagName(tag: string): string {
  return TAG_NAMES[tag] ?? tag;
}

/** NO_TAG names, in a filter, the lines that carry no tag. */
export const NO_TAG = "(none)";

/** logTags lists the tags that occur, with how many lines each, most frequent first, then by name. */
export function logTags(lines: LogLine[]): { tag: string; count: number }[] {
  const counts = new Map<string, number>();
  for (const l of lines) {
    const t = l.tag || NO_TAG;
    counts.set(t, (counts.get(t) ?? 0) + 1);
  }
  return [...counts].map(([tag, count]) => ({ tag, count })).sort((a, b) => b.count - a.count || a.tag.localeCompare(b.tag));
}

/**
 * filterLog keeps the lines whose tag is among shown (an empty set shows
 * every line) and, with a query, whose text or tag holds it (any case).
 */
export function filterLog(lines: LogLine[], shown: ReadonlySet<string>, query = ""): LogLine[] {
  const q = query.trim().toLowerCase();
  return lines.filter((l) => (shown.size === 0 || shown.has(l.tag || NO_TAG)) && (!q || l.text.toLowerCase().includes(q) || l.tag.toLowerCase().includes(q)));
}
