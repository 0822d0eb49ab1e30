import { useMemo, useState } from "react";
import { fmtTime } from "../api";
import { filterLog, LogLine, logTags, logTime, tagName } from "./logFormat";

/**
 * DebugLog shows a thread's debug log as `live --debug` prints it (time,
 * tag, text), each line wrapping instead of running off the page, and
 * filters it by tag and by text.
 */
export function DebugLog({ lines }: { lines: LogLine[] }) {
  const [shown, setShown] = useState<Set<string>>(() => new Set());
  const [query, setQuery] = useState("");
  const tags = useMemo(() => logTags(lines), [lines]);
  const visible = useMemo(() => filterLog(lines, shown, query), [lines, shown, query]);
  const toggle = (tag: string) =>
    setShown((s) => {
      const next = new Set(s);
      if (next.has(tag)) next.delete(tag);
      else next.add(tag);
      return next;
    });
  return (
    <details className="card debug-log" data-testid="debug-log">
      <summary>
        Debug log ({visible.length === lines.length ? lines.length : `${visible.length} of ${lines.length}`} lines)
      </summary>
      <div className="row wrap log-filter" role="group" aria-label="filter the debug log by tag">
        <span className="muted">Tags:</span>
        {tags.map(({ tag, count }) => (
          <label key={tag}>
            <input type="checkbox" checked={shown.has(tag)} onChange={() => toggle(tag)} data-log-tag={tag} />
            <code title={tag}>{tagName(tag)}</code> <span className="muted">{count}</span>
          </label>
        ))}
        {shown.size > 0 && (
          <button className="link" onClick={() => setShown(new Set())} data-testid="log-all-tags">
            all tags
          </button>
        )}
        <input type="search" placeholder="find in the log" value={query} onChange={(e) => setQuery(e.target.value)} aria-label="find in the debug log" data-testid="log-query" />
      </div>
      <ol className="log-lines">
        {visible.map((l, i) => (
          <li key={i} className="log-line" data-tag={l.tag}>
            <time className="log-time" title={l.time === null ? undefined : fmtTime(l.time)}>{logTime(l.time)}</time>
            <span className="log-tag" title={l.tag}>{tagName(l.tag)}</span>
            <span className="log-text">{l.text}</span>
          </li>
        ))}
      </ol>
      {visible.length === 0 && <p className="muted">No line matches.</p>}
    </details>
  );
}
