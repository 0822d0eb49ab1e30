import { useState } from "react";
import { ago, AuditEntry, AuditQuery, fmtTime, gateway, noMemory, useApi } from "../api";
import { ErrorBox } from "../common/ErrorBox";
import { Loading } from "../common/Loading";
import { loadAllMachines } from "../machines/machines";
import { href } from "../route";

/** ACTIONS are the actions the gateway records, for the filter. */
export const ACTIONS = ["start", "kill", "pause", "resume", "fork", "rollback", "cas-delete", "cas-put", "gc", "login", "logout", "token-create", "token-revoke", "other"];
/** AUDIT_PAGE is how many entries a page shows. */
export const AUDIT_PAGE = 50;

export type AuditFilters = { action: string; machine: string; since: string };

/** auditQuery turns the filters into the gateway's query; since is a day, from its start in the browser's time zone. */
export function auditQuery(f: AuditFilters, offset: number, limit = AUDIT_PAGE): AuditQuery {
  let since: string | undefined;
  if (f.since) {
    const d = new Date(`${f.since}T00:00:00`);
    if (!Number.isNaN(d.getTime())) since = d.toISOString();
  }
  return { action: f.action || undefined, machine: f.machine || undefined, since, limit, offset };
}

/**
 * AuditView is the gateway's audit log, newest first: who (token note and
 * id, or the shared secret) did what, from where, on which machine and
 * thread, and how it ended.
 */
export function AuditView() {
  const [f, setF] = useState<AuditFilters>({ action: "", machine: "", since: "" });
  const [offset, setOffset] = useState(0);
  const log = useApi(() => gateway.audit(auditQuery(f, offset)), [f, offset], 10000);
  const machines = useApi(loadAllMachines, []);
  const set = (k: keyof AuditFilters) => (v: string) => {
    setF((cur) => ({ ...cur, [k]: v }));
    setOffset(0);
  };
  const total = log.data?.total ?? 0;
  const entries = log.data?.entries ?? [];
  const unavailable = noMemory(log.error);
  const now = Date.now();
  return (
    <section aria-labelledby="audit-title" data-testid="audit">
      <div className="row between wrap">
        <h1 id="audit-title">Audit log</h1>
        <div className="row wrap filters">
          <label className="inline">
            Action{" "}
            <select value={f.action} onChange={(e) => set("action")(e.target.value)} aria-label="action filter">
              <option value="">all</option>
              {ACTIONS.map((a) => <option key={a} value={a}>{a}</option>)}
            </select>
          </label>
          <label className="inline">
            Machine{" "}
            <select value={f.machine} onChange={(e) => set("machine")(e.target.value)} aria-label="machine filter">
              <option value="">all</option>
              {(machines.data ?? []).map((m) => <option key={m.name} value={m.name}>{m.name}</option>)}
            </select>
          </label>
          <label className="inline">
            Since{" "}
            <input type="date" value={f.since} onChange={(e) => set("since")(e.target.value)} aria-label="since" />
          </label>
        </div>
      </div>
      {unavailable && <p className="empty muted" data-testid="no-audit">This gateway keeps no audit log: {log.error?.message}.</p>}
      {log.error && !unavailable && <ErrorBox error={log.error} retry={log.reload} />}
      {!log.data && log.loading && <Loading what="the audit log" />}
      {log.data && entries.length === 0 && <p className="empty muted">No entries{f.action || f.machine || f.since ? " match" : " yet"}.</p>}
      {entries.length > 0 && (
        <div className="table-wrap">
          <table className="audit">
            <caption className="caption">Entries {offset + 1}–{offset + entries.length} of {total}, newest first.</caption>
            <thead>
              <tr>
                <th scope="col">Time</th>
                <th scope="col">Action</th>
                <th scope="col">Result</th>
                <th scope="col">Machine</th>
                <th scope="col">Target</th>
                <th scope="col">Who</th>
                <th scope="col">From</th>
              </tr>
            </thead>
            <tbody>
              {entries.map((e) => <AuditRow key={e.id} e={e} now={now} />)}
            </tbody>
          </table>
        </div>
      )}
      {total > AUDIT_PAGE && (
        <nav className="row pager" aria-label="pages">
          <button disabled={offset === 0} onClick={() => setOffset(Math.max(0, offset - AUDIT_PAGE))}>← Newer</button>
          <span>{offset + 1}–{Math.min(offset + AUDIT_PAGE, total)} of {total}</span>
          <button disabled={offset + AUDIT_PAGE >= total} onClick={() => setOffset(offset + AUDIT_PAGE)} data-testid="older">Older →</button>
        </nav>
      )}
    </section>
  );
}

/** a thread id: the target of start, kill, pause, resume and fork */
const THREAD_RE = /^[0-9A-HJKMNP-TV-Z]{26}$/;

function AuditRow({ e, now }: { e: AuditEntry; now: number }) {
  const ok = e.status >= 200 && e.status < 400;
  const t = Date.parse(e.time);
  return (
    <tr data-audit={e.id} data-action={e.action}>
      <td title={fmtTime(e.time)}>{Number.isFinite(t) ? ago(t, now) : e.time}</td>
      <td><span className="mono">{e.action}</span></td>
      <td><span className={`badge ${ok ? "st-completed" : "st-failed"}`} title={`HTTP ${e.status}`}>{e.status || "–"}</span></td>
      <td>{e.machine ? <a href={href.threads(e.machine)}>{e.machine}</a> : <span className="muted">–</span>}</td>
      <td className="mono">
        {e.target && e.machine && THREAD_RE.test(e.target) ? <a href={href.thread(e.machine, e.target)}>{e.target}</a> : e.target || <span className="muted">–</span>}
      </td>
      <td>
        {e.actor || <span className="muted">{e.tokenId ? "a token without a note" : "unknown"}</span>}
        {e.tokenId && <span className="muted mono small" title="token id"> {e.tokenId}</span>}
      </td>
      <td className="mono">{e.source || "–"}</td>
    </tr>
  );
}
