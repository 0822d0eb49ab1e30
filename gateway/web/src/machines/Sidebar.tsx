import { useEffect, useState } from "react";
import { ago, Endpoint, gateway, useApi } from "../api";
import { href } from "../route";

export function Sidebar({ current, open }: { current: string | null; open: boolean }) {
  const eps = useApi(gateway.endpoints, [], 5000);
  const [now, setNow] = useState(Date.now());
  useEffect(() => {
    const t = setInterval(() => setNow(Date.now()), 1000);
    return () => clearInterval(t);
  }, []);
  return (
    <aside id="sidebar" className={`sidebar${open ? " open" : ""}`} aria-label="machines">
      <h2>Machines</h2>
      {eps.error && <p className="error" role="alert">{eps.error.message}</p>}
      {!eps.data && eps.loading && <p className="muted">Loading…</p>}
      {eps.data && eps.data.length === 0 && <p className="muted">No machines yet. Start <code>uncaged-workflow connect</code> on one.</p>}
      <ul className="machines">
        {[...(eps.data ?? [])]
          .sort((a, b) => a.name.localeCompare(b.name))
          .map((ep) => (
            <MachineItem key={ep.name} ep={ep} now={now} current={current === ep.name} />
          ))}
      </ul>
    </aside>
  );
}

function MachineItem({ ep, now, current }: { ep: Endpoint; now: number; current: boolean }) {
  return (
    <li className={`machine ${ep.status}`} data-machine={ep.name} data-status={ep.status}>
      <a href={href.threads(ep.name)} aria-current={current ? "page" : undefined}>
        <span className={`dot ${ep.status}`} aria-hidden="true" />
        <span className="mname">{ep.name}</span>
        <span className="sr-only"> ({ep.status})</span>
        <span className="mmeta">
          {ep.status} · {ago(ep.lastHeartbeat, now)}
          {ep.version ? ` · ${/^\d/.test(ep.version) ? "v" : ""}${ep.version}` : ""}
        </span>
      </a>
    </li>
  );
}
