import { useEffect, useState } from "react";
import { ago, Loadable, useApi } from "../api";
import { usePushes } from "../changes";
import { useReach } from "../reach";
import { href } from "../route";
import { loadMachineList, MACHINES_PUSH, MachineEntry, MachineList } from "./machines";

/**
 * Sidebar lists every machine the gateway knows (loaded again when the
 * gateway says its machines changed, else every 5 s): the
 * online ones with their last heartbeat and version, the offline ones
 * greyed with when they were last seen. While the gateway's store does
 * not answer it says the list may be short.
 */
export function Sidebar({ current, open }: { current: string | null; open: boolean }) {
  const list = useApi(loadMachineList, [], 5000, MACHINES_PUSH);
  return <SidebarView current={current} open={open} list={list} />;
}

/**
 * SidebarView is the sidebar of a machine list loaded elsewhere (the shell
 * loads it once, for the sidebar and for the pages that ask whether a
 * machine is known). While the gateway does not answer, no machine is
 * shown online or offline: their presence is unknown. While the gateway
 * pushes machine changes the list is not polled, so an online machine's
 * heartbeat as last loaded would only grow old: it shows since when it is
 * connected instead, which a reconnection (a machine change) moves.
 */
export function SidebarView({ current, open, list }: { current: string | null; open: boolean; list: Loadable<MachineList> }) {
  const machines = list.data?.machines;
  const reach = useReach();
  const pushed = usePushes([MACHINES_PUSH.topic]);
  const [now, setNow] = useState(Date.now());
  useEffect(() => {
    const t = setInterval(() => setNow(Date.now()), 1000);
    return () => clearInterval(t);
  }, []);
  return (
    <aside id="sidebar" className={`sidebar${open ? " open" : ""}`} aria-label="machines">
      <h2>Machines</h2>
      {list.error && reach.reachable && <p className="error" role="alert">{list.error.message}</p>}
      {list.data?.degraded && (
        <p className="degraded muted" role="status" title={list.data.degraded}>
          The gateway's store does not answer: machines online now are listed, the others as last known.
        </p>
      )}
      {!reach.reachable && machines && (
        <p className="degraded muted" data-testid="presence-unknown">
          The gateway does not answer: whether these machines are online is unknown.
        </p>
      )}
      {!machines && list.loading && <p className="muted">Loading…</p>}
      {machines && machines.length === 0 && <p className="muted">No machines yet. Start <code>uncaged-workflow connect</code> on one.</p>}
      <ul className="machines">
        {(machines ?? []).map((m) => (
          <MachineItem key={m.name} m={m} now={now} current={current === m.name} unknown={!reach.reachable} pushed={pushed} />
        ))}
      </ul>
    </aside>
  );
}

function MachineItem({ m, now, current, unknown, pushed }: { m: MachineEntry; now: number; current: boolean; unknown: boolean; pushed: boolean }) {
  const status = unknown ? "unknown" : m.status;
  const meta = unknown
    ? `presence unknown${m.lastSeen ? ` · heard from ${ago(m.lastSeen, now)}` : ""}`
    : m.status === "online"
      ? pushed
        ? m.connectedAt
          ? `online · connected ${ago(m.connectedAt, now)}`
          : "online"
        : `online · ${ago(m.lastSeen, now)}`
      : m.lastSeen
        ? `offline · last seen ${ago(m.lastSeen, now)}`
        : "offline";
  return (
    <li className={`machine ${status}`} data-machine={m.name} data-status={status}>
      <a href={href.threads(m.name)} aria-current={current ? "page" : undefined} title={m.lastSeen ? `last seen ${new Date(m.lastSeen).toLocaleString()}` : undefined}>
        <span className={`dot ${status}`} aria-hidden="true" />
        <span className="mname">{m.name}</span>
        <span className="sr-only"> ({unknown ? "presence unknown" : m.status})</span>
        <span className="mmeta">
          {meta}
          {m.version ? ` · ${/^\d/.test(m.version) ? "v" : ""}${m.version}` : ""}
        </span>
      </a>
    </li>
  );
}
