import { ago, fmtTime } from "../api";

/** OFFLINE_REASON is why actions on an offline machine are disabled. */
export const OFFLINE_REASON = "the machine is offline: actions need it online";

/**
 * OfflineNote marks what is shown as the gateway's last-known state of a
 * machine that is offline, with since when.
 */
export function OfflineNote({ machine, lastSeen, shown = "its threads are shown as the gateway last saw them" }: { machine: string; lastSeen?: string; shown?: string }) {
  const t = lastSeen ? Date.parse(lastSeen) : NaN;
  return (
    <p className="offline-banner" data-testid="offline-banner" role="status">
      <span className="badge st-offline">last known</span>{" "}
      {machine} is offline{Number.isFinite(t) ? <> since <time dateTime={lastSeen} title={fmtTime(lastSeen)}>{fmtTime(lastSeen)}</time> ({ago(t)})</> : ""}: {shown}; actions need the machine online.
    </p>
  );
}
