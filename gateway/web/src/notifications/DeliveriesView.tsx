import { useState } from "react";
import { ago, Delivery, fmtTime, gateway, noMemory, until, useApi } from "../api";
import { ErrorBox } from "../common/ErrorBox";
import { Loading } from "../common/Loading";
import { ScrollBox } from "../common/ScrollBox";
import { hashQuery, href, replaceQuery, useHashChange } from "../route";
import { Status } from "../threads/Status";
import "./notifications.css";

/** STATES are a delivery's states, for the filter. */
export const STATES = ["pending", "delivered", "failed"] as const;
/** DELIVERY_PAGE is how many deliveries a page shows. */
export const DELIVERY_PAGE = 50;
/** NOTIFY_FLAGS are the gateway's flags that set up notifications, named when none are. */
export const NOTIFY_FLAGS = ["--notify-url", "--notify-on", "--notify-secret-file"];

/** deliveriesFromHash reads the state filter and the page from the hash's query (#/notifications?state=failed&offset=50). */
export function deliveriesFromHash(hash = window.location.hash): { state: string; offset: number } {
  const p = hashQuery(hash);
  const state = p.get("state") ?? "";
  const offset = Number(p.get("offset"));
  return { state: (STATES as readonly string[]).includes(state) ? state : "", offset: Number.isInteger(offset) && offset > 0 ? offset : 0 };
}

function deliveriesToHash(state: string, offset: number) {
  const p = new URLSearchParams();
  if (state) p.set("state", state);
  if (offset) p.set("offset", String(offset));
  replaceQuery(p);
}

/**
 * DeliveriesView is the webhook notifications the gateway sent (or still
 * tries to send), newest first: to which receiver, about which thread and
 * status, and how sending went. A gateway with no receiver configured says
 * so, naming the flags that configure one.
 */
export function DeliveriesView() {
  const [initial] = useState(() => deliveriesFromHash());
  const [state, setStateFilter] = useState(initial.state);
  const [offset, setOffsetState] = useState(initial.offset);
  useHashChange(() => {
    const next = deliveriesFromHash();
    setStateFilter(next.state);
    setOffsetState(next.offset);
  });
  const list = useApi(() => gateway.notifications({ state: state || undefined, limit: DELIVERY_PAGE, offset }), [state, offset], 10_000);
  const setOffset = (n: number) => {
    setOffsetState(n);
    deliveriesToHash(state, n);
  };
  const filter = (s: string) => {
    setStateFilter(s);
    setOffsetState(0);
    deliveriesToHash(s, 0);
  };
  const total = list.data?.total ?? 0;
  const rows = list.data?.notifications ?? [];
  const unavailable = noMemory(list.error);
  const now = Date.now();
  return (
    <section aria-labelledby="notifications-title" data-testid="notifications">
      <div className="row between wrap">
        <div className="row wrap">
          <h1 id="notifications-title">Webhook notifications</h1>
          <a className="small" href={href.audit()}>← Audit log</a>
        </div>
        <div className="row wrap filters">
          <label className="inline">
            State{" "}
            <select value={state} onChange={(e) => filter(e.target.value)} aria-label="state filter">
              <option value="">all</option>
              {STATES.map((s) => <option key={s} value={s}>{s}</option>)}
            </select>
          </label>
        </div>
      </div>
      {list.data && list.data.enabled === false && (
        <p className="offline-banner" data-testid="notify-off" role="status">
          Notifications are not configured on this gateway: start it with {NOTIFY_FLAGS.map((f, i) => <span key={f}>{i > 0 ? (i === NOTIFY_FLAGS.length - 1 ? " and " : ", ") : ""}<code>{f}</code></span>)} to send a webhook when a thread needs a look.
        </p>
      )}
      {unavailable && <p className="empty muted" data-testid="no-notifications">This gateway keeps no notifications: {list.error?.message}.</p>}
      {list.error && !unavailable && <ErrorBox error={list.error} retry={list.reload} />}
      {!list.data && list.loading && <Loading what="the notifications" />}
      {list.data && rows.length === 0 && <p className="empty muted" data-testid="notifications-empty">No notifications{state ? ` ${state}` : list.data.enabled === false ? "" : " yet"}.</p>}
      {rows.length > 0 && (
        <ScrollBox>
          <table className="deliveries">
            <caption className="caption">Notifications {offset + 1}–{offset + rows.length} of {total}, newest first.</caption>
            <thead>
              <tr>
                <th scope="col">Created</th>
                <th scope="col">Receiver</th>
                <th scope="col">Machine</th>
                <th scope="col">Thread</th>
                <th scope="col">Workflow</th>
                <th scope="col">Status</th>
                <th scope="col">State</th>
                <th scope="col">Attempts</th>
                <th scope="col">Last result</th>
                <th scope="col">Next / finished</th>
              </tr>
            </thead>
            <tbody>
              {rows.map((d) => <DeliveryRow key={d.id} d={d} now={now} />)}
            </tbody>
          </table>
        </ScrollBox>
      )}
      {total > DELIVERY_PAGE && (
        <nav className="row pager" aria-label="pages">
          <button disabled={offset === 0} onClick={() => setOffset(Math.max(0, offset - DELIVERY_PAGE))}>← Newer</button>
          <span>{offset + 1}–{Math.min(offset + DELIVERY_PAGE, total)} of {total}</span>
          <button disabled={offset + DELIVERY_PAGE >= total} onClick={() => setOffset(offset + DELIVERY_PAGE)} data-testid="older">Older →</button>
        </nav>
      )}
    </section>
  );
}

/** STATE_CLASS is each state's badge colour (the thread statuses' classes). */
const STATE_CLASS: Record<string, string> = { pending: "st-paused", delivered: "st-completed", failed: "st-failed" };

/** When is a time as "… ago" (or "in …" ahead), with the full time on hover. */
function When({ at, now }: { at?: string; now: number }) {
  const t = at ? Date.parse(at) : NaN;
  if (!at || !Number.isFinite(t)) return <span className="muted">–</span>;
  return <time dateTime={at} title={fmtTime(at)}>{t > now ? until(t, now) : ago(t, now)}</time>;
}

function DeliveryRow({ d, now }: { d: Delivery; now: number }) {
  const result = [d.lastCode ? `HTTP ${d.lastCode}` : "", d.lastError ?? ""].filter(Boolean).join(": ");
  return (
    <tr data-testid="delivery-row" data-delivery={d.id} data-state={d.state}>
      <td><When at={d.createdAt} now={now} /></td>
      <td className="mono wrap">{d.receiver}</td>
      <td className="wrap">{d.machine ? <a href={href.threads(d.machine)}>{d.machine}</a> : <span className="muted">–</span>}</td>
      <td className="mono">{d.machine && d.thread ? <a href={href.thread(d.machine, d.thread)}>{d.thread}</a> : d.thread || <span className="muted">–</span>}</td>
      <td className="wrap">{d.workflow || <span className="muted">–</span>}</td>
      <td>{d.status ? <Status s={d.status} /> : <span className="muted">–</span>}</td>
      <td><span className={`badge ${STATE_CLASS[d.state] ?? ""}`}>{d.state}</span></td>
      <td>{d.attempts}</td>
      <td className="wrap last-result" title={result || undefined}>{result || <span className="muted">–</span>}</td>
      <td>
        {d.state === "pending" ? (
          <>next <When at={d.nextAt} now={now} /></>
        ) : (
          <When at={d.finishedAt} now={now} />
        )}
      </td>
    </tr>
  );
}
