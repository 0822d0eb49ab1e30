import { useEffect, useState } from "react";
import { ago, useApi } from "../api";
import { href } from "../route";
import { loadMachineList, MachineEntry } from "./machines";

/**
 * Sidebar lists every machine the gateway knows (polled every 5 s): the
 * online ones with their last heartbeat and version, the offline ones
 * greyed with when they were last seen. While the gateway's store does
 * not answer it says the list may be short.
 */
export function Sidebar({ current, open }: { current: string | null; open: boolean }) {
  const list = useApi(loadMachineList, [], 5000);
  const eps = { ...list, data: list.data?.machines };
  const [now, setNow] = useState(Date.now());
  useEffect(() => {
    const t = setInterval(() => setNow(Date.now()), 1000);
    return () => clearInterval(t);
  }, []);
  return (
    <aside id="sidebar" className={`sidebar${open ? " open" : ""}`} aria-label="machines">
      <h2>Machines</h2>
      {eps.error && <p className="error" role="alert">{eps.error.message}</p>}
      {list.data?.degraded && (
        <p className="degraded muted" role="status" title={list.data.degraded}>
          The gateway's store does not answer: machines online now are listed, the others as last known.
        </p>
      )}
      {!eps.data && eps.loading && <p className="muted">Loading…</p>}
      {eps.data && eps.data.length === 0 && <p className="muted">No machines yet. Start <code>uncaged-workflow connect</code> on one.</p>}
      <ul className="machines">
        {(eps.data ?? []).map((m) => (
          <MachineItem key={m.name} m={m} now={now} current={current === m.name} />
        ))}
      </ul>
    </aside>
  );
}

function MachineItem({ m, now, current }: { m: MachineEntry; now: number; current: boolean }) {
  return (
    <li className={`machine ${m.status}`} data-machine={m.name} data-status={m.status}>
      <a href={href.threads(m.name)} aria-current={current ? "page" : undefined} title={m.lastSeen ? `last seen ${new Date(m.lastSeen).toLocaleString()}` : undefined}>
        <span className={`dot ${m.status}`} aria-hidden="true" />
        <span className="mname">{m.name}</span>
        <span className="sr-only"> ({m.status})</span>
        <span className="mmeta">
          {m.status === "online" ? `online · ${ago(m.lastSeen, now)}` : m.lastSeen ? `offline · last seen ${ago(m.lastSeen, now)}` : "offline"}
          {m.version ? ` · ${/^\d/.test(m.version) ? "v" : ""}${m.version}` : ""}
        </span>
      </a>
    </li>
  );
}
