import { useEffect, useRef } from "react";
import { gateway, noMemory, useApi } from "../api";
import { onInboxChange } from "../answer/inboxEvents";
import { href } from "../route";
import "./inbox.css";

/** INBOX_COUNT_MS is how often the top bar asks how many threads wait, at most this long apart. */
export const INBOX_COUNT_MS = 15_000;

/**
 * InboxLink is the top bar's link to the inbox, with how many threads wait
 * for an answer (none: no count). The count is asked again when the
 * gateway says a machine's threads changed (every INBOX_COUNT_MS while it
 * cannot say), when an answer is taken here, and when the machines the
 * top bar lists change (fleet is the key of who is online: a machine that
 * comes or goes changes what waits). A gateway without an inbox shows no count.
 */
export function InboxLink({ current, fleet }: { current: boolean; fleet: string }) {
  const count = useApi(() => gateway.inbox({ limit: 1, offset: 0 }), [], INBOX_COUNT_MS, { topic: "threads" });
  const reload = count.reload;
  useEffect(() => onInboxChange(reload), [reload]);
  const seen = useRef(fleet);
  useEffect(() => {
    if (seen.current === fleet) return;
    seen.current = fleet;
    reload();
  }, [fleet, reload]);
  // A refresh that failed keeps the last count; a gateway that keeps no inbox has none.
  const n = noMemory(count.error) ? 0 : (count.data?.total ?? 0);
  return (
    <a className="all-link inbox-link" data-testid="inbox-link" href={href.inbox()} aria-current={current ? "page" : undefined}>
      Inbox
      {n > 0 && (
        <span className="count-badge" data-testid="inbox-count" title={`${n} thread${n === 1 ? "" : "s"} waiting for an answer`}>
          {n}
          <span className="sr-only"> waiting</span>
        </span>
      )}
    </a>
  );
}
