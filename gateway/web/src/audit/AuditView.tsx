import { useEffect, useState } from "react";
import { ago, AuditEntry, AuditQuery, fmtTime, gateway, noMemory, useApi } from "../api";
import { dayStart } from "../common/days";
import { ErrorBox } from "../common/ErrorBox";
import { Loading } from "../common/Loading";
import { ScrollBox } from "../common/ScrollBox";
import { loadAllMachines } from "../machines/machines";
import { hashQuery, href, replaceQuery, useHashChange } from "../route";
import "./audit.css";

/**
 * ACTIONS are the actions the gateway records, for the filter: exactly the
 * gateway's own list (a Go test, TestTheDashboardFiltersOnEveryAuditAction,
 * holds the two together).
 */
export const ACTIONS = ["start", "answer", "kill", "pause", "resume", "fork", "rollback", "cas-delete", "cas-put", "gc", "login", "logout", "token-create", "token-revoke", "connect", "replace", "takeover", "connect-refused", "register", "unregister", "refused", "trigger-create", "trigger-pause", "trigger-resume", "trigger-rotate-secret", "trigger-delete", "trigger-run", "other"];
/** AUDIT_PAGE is how many entries a page shows. */
export const AUDIT_PAGE = 50;

export type AuditFilters = { action: string; machine: string; token: string; since: string; until: string };
const NONE: AuditFilters = { action: "", machine: "", token: "", since: "", until: "" };
const KEYS: (keyof AuditFilters)[] = ["action", "machine", "token", "since", "until"];

/**
 * auditQuery turns the filters into the gateway's query; since and until
 * are days in the browser's time zone, both included.
 */
export function auditQuery(f: AuditFilters, offset: number, limit = AUDIT_PAGE): AuditQuery & { token?: string } {
  return { action: f.action || undefined, machine: f.machine || undefined, token: f.token || undefined, since: dayStart(f.since), until: dayStart(f.until, 1), limit, offset };
}

/** auditFromHash reads the filters and the page from the hash's query (#/audit?action=kill&offset=50), so a filtered log can be linked to and survives a reload. */
export function auditFromHash(hash = window.location.hash): { filters: AuditFilters; offset: number } {
  const p = hashQuery(hash);
  const filters = { ...NONE };
  for (const k of KEYS) filters[k] = p.get(k) ?? "";
  if (filters.action && !ACTIONS.includes(filters.action)) filters.action = "";
  const offset = Number(p.get("offset"));
  return { filters, offset: Number.isInteger(offset) && offset > 0 ? offset : 0 };
}

function auditToHash(f: AuditFilters, offset: number) {
  const p = new URLSearchParams();
  for (const k of KEYS) if (f[k]) p.set(k, f[k]);
  if (offset) p.set("offset", String(offset));
  replaceQuery(p);
}

/**
 * AuditView is the gateway's audit log, newest first: who (token note and
 * id, or the shared secret) did what, from where, on which machine and
 * thread, and how it ended.
 */
export function AuditView() {
  const [initial] = useState(() => auditFromHash());
  const [f, setF] = useState<AuditFilters>(initial.filters);
  const [offset, setOffsetState] = useState(initial.offset);
  const setOffset = (n: number) => {
    setOffsetState(n);
    auditToHash(f, n);
  };
  // A link to another filter (the top bar's Audit: none) replaces this one.
  useHashChange(() => {
      const next = auditFromHash();
      setF(next.filters);
      setOffsetState(next.offset);
    });
  const log = useApi(() => gateway.audit(auditQuery(f, offset)), [f, offset], 10000);
  const machines = useApi(loadAllMachines, []);
  const apply = (next: AuditFilters) => {
    setF(next);
    setOffsetState(0);
    auditToHash(next, 0);
  };
  const set = (k: keyof AuditFilters) => (v: string) => apply({ ...f, [k]: v });
  const filtered = KEYS.some((k) => f[k]);
  const total = log.data?.total ?? 0;
  const entries = log.data?.entries ?? [];
  const unavailable = noMemory(log.error);
  const now = Date.now();
  return (
    <section aria-labelledby="audit-title" data-testid="audit">
      <div className="row between wrap">
        <div className="row wrap">
          <h1 id="audit-title">Audit log</h1>
          <a className="small" href={href.notifications()} data-testid="notifications-link">Webhook notifications →</a>
        </div>
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
            <input type="date" value={f.since} max={f.until || undefined} onChange={(e) => set("since")(e.target.value)} aria-label="since" />
          </label>
          <label className="inline">
            Until{" "}
            <input type="date" value={f.until} min={f.since || undefined} onChange={(e) => set("until")(e.target.value)} aria-label="until" />
          </label>
          {f.token && (
            <span className="chip" data-testid="token-filter">
              token <span className="mono">{f.token}</span>{" "}
              <button type="button" className="link" aria-label="any token" onClick={() => set("token")("")}>×</button>
            </span>
          )}
          {filtered && <button type="button" className="link" onClick={() => apply(NONE)}>Clear</button>}
        </div>
      </div>
      {unavailable && <p className="empty muted" data-testid="no-audit">This gateway keeps no audit log: {log.error?.message}.</p>}
      {log.error && !unavailable && <ErrorBox error={log.error} retry={log.reload} />}
      {!log.data && log.loading && <Loading what="the audit log" />}
      {log.data && entries.length === 0 && <p className="empty muted">No entries{filtered ? " match" : " yet"}.</p>}
      {entries.length > 0 && (
        <ScrollBox>
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
              {entries.map((e) => <AuditRow key={e.id} e={e} now={now} onToken={set("token")} />)}
            </tbody>
          </table>
        </ScrollBox>
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

function AuditRow({ e, now, onToken }: { e: AuditEntry; now: number; onToken: (id: string) => void }) {
  const ok = e.status >= 200 && e.status < 400;
  const t = Date.parse(e.time);
  return (
    <tr data-audit={e.id} data-action={e.action}>
      <td title={fmtTime(e.time)}>{Number.isFinite(t) ? ago(t, now) : e.time}</td>
      <td><span className="mono">{e.action}</span></td>
      <td><span className={`badge ${ok ? "st-completed" : "st-failed"}`} title={`HTTP ${e.status}`}>{e.status || "–"}</span></td>
      <td className="wrap">{e.machine ? <a href={href.threads(e.machine)}>{e.machine}</a> : <span className="muted">–</span>}</td>
      <td className="mono wrap">
        {e.target && e.machine && THREAD_RE.test(e.target) ? <a href={href.thread(e.machine, e.target)}>{e.target}</a> : e.target || <span className="muted">–</span>}
      </td>
      <td className="wrap">
        {e.actor || <span className="muted">{e.tokenId ? "a token without a note" : "unknown"}</span>}
        {e.tokenId && (
          <>
            {" "}
            <button type="button" className="link mono small" title="only what this token did" data-token={e.tokenId} onClick={() => onToken(e.tokenId!)}>{e.tokenId}</button>
          </>
        )}
      </td>
      <td className="mono from" title={e.source || undefined}>{e.source || "–"}</td>
    </tr>
  );
}
