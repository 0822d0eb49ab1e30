import { FormEvent, useEffect, useState } from "react";
import { ago, FleetQuery, noMemory, Push, useApi } from "../api";
import { dayStart } from "../common/days";
import { ErrorBox } from "../common/ErrorBox";
import { Loading } from "../common/Loading";
import { searchFleet } from "../fleet/fleetApi";
import { loadAllMachines, MACHINES_PUSH } from "../machines/machines";
import { useReach } from "../reach";
import { hashQuery, href, replaceQuery, useHashChange } from "../route";
import { MergedThreads } from "./AllThreads";
import { THREAD_STATUSES } from "./Status";
import { ThreadTable } from "./ThreadTable";
import { fleetRow, Sort } from "./threads";

/** FLEET_PAGE is how many threads a page of the fleet view shows. */
export const FLEET_PAGE = 50;

/**
 * FLEET_SORT is the order the gateway pages its threads in, the last change
 * first, so the rows on screen keep that order until a header is clicked.
 */
export const FLEET_SORT: Sort = { key: "updated", dir: "desc" };

/** Filters are the fleet view's search; empty fields do not filter. */
export type Filters = { q: string; machine: string; workflow: string; status: string; since: string; until: string };
const NONE: Filters = { q: "", machine: "", workflow: "", status: "", since: "", until: "" };

/**
 * fleetQuery turns the filters into the gateway's query. since and until
 * are days (the date inputs' yyyy-mm-dd) in the browser's time zone, both
 * included: since from its start, until to its end.
 */
export function fleetQuery(f: Filters, offset: number, limit = FLEET_PAGE): FleetQuery {
  return {
    q: f.q.trim() || undefined,
    machine: f.machine || undefined,
    workflow: f.workflow.trim() || undefined,
    status: f.status || undefined,
    since: dayStart(f.since),
    until: dayStart(f.until, 1),
    limit,
    offset,
  };
}

/** FLEET_PUSH is the change hints the fleet's threads reload on: any machine's threads, and machines coming or going. */
export const FLEET_PUSH: Push[] = [{ topic: "threads" }, MACHINES_PUSH];

const KEYS: (keyof Filters)[] = ["q", "machine", "workflow", "status", "since", "until"];

/**
 * Place is where the list is in the results: offset is the first row's
 * position (for the caption), after the cursor the page continues from
 * (keyset paging; none on the first page, or in an older link that pages
 * by offset), trail the cursors of the pages before it, for Newer.
 */
export type Place = { offset: number; after?: string; trail: string[] };
const TOP: Place = { offset: 0, trail: [] };

/** fromHash reads a search and its page from the hash's query (#/threads?q=...&after=…&offset=50). */
export function fromHash(): { filters: Filters; place: Place } {
  const p = hashQuery();
  const filters = { ...NONE };
  for (const k of KEYS) filters[k] = p.get(k) ?? "";
  const offset = Number(p.get("offset"));
  return { filters, place: { offset: Number.isInteger(offset) && offset > 0 ? offset : 0, after: p.get("after") || undefined, trail: [] } };
}

function toHash(f: Filters, place: Place) {
  const p = new URLSearchParams();
  for (const k of KEYS) if (f[k]) p.set(k, f[k]);
  if (place.after) p.set("after", place.after);
  if (place.offset) p.set("offset", String(place.offset));
  replaceQuery(p);
}

/**
 * AllThreads is the landing page: every machine's threads, online or not,
 * from the gateway's memory (GET /api/gateway/threads), with full-text
 * search over prompts and summaries, filters and paging. An offline
 * machine's threads are its last-known state, marked. A gateway that keeps
 * no memory (404) gets the older view, asked of each online machine.
 */
export function AllThreads() {
  // The search lives in the hash's query too, so Back from a thread returns to it.
  const [initial] = useState(() => fromHash());
  const [applied, setApplied] = useState<Filters>(initial.filters);
  const [draft, setDraft] = useState<Filters>(initial.filters);
  const [place, setPlaceState] = useState<Place>(initial.place);
  const setPlace = (p: Place) => {
    setPlaceState(p);
    toHash(applied, p);
  };
  const offset = place.offset;
  // A link to another search (the "All machines" link: none) replaces this one.
  useHashChange(() => {
      const next = fromHash();
      setApplied(next.filters);
      setDraft(next.filters);
      setPlaceState(next.place);
    });
  const [sort, setSort] = useState<Sort>(FLEET_SORT);
  const reach = useReach();
  // legacy: the gateway keeps no memory (an older one: 404; one without a store: 503); then nothing here polls.
  const [legacy, setLegacy] = useState(false);
  const machines = useApi(loadAllMachines, [], legacy ? undefined : 5000, legacy ? undefined : MACHINES_PUSH);
  const q = useApi(
    () =>
      searchFleet({ ...fleetQuery(applied, offset), after: place.after }).catch((e: unknown) => {
        if (noMemory(e)) setLegacy(true);
        throw e;
      }),
    [applied, place],
    legacy ? undefined : 5000,
    // Each row says whether its machine is online: a machine coming or going changes rows too.
    legacy ? undefined : FLEET_PUSH,
  );
  if (legacy) return <MergedThreads />;
  const apply = (f: Filters) => {
    setApplied(f);
    setDraft(f);
    setPlaceState(TOP);
    toHash(f, TOP);
  };
  const submit = (e: FormEvent) => {
    e.preventDefault();
    apply(draft);
  };
  const set = (k: keyof Filters) => (v: string) => setDraft((d) => ({ ...d, [k]: v }));
  // A select or a date applies at once; the text fields on Search (Enter).
  const pick = (k: keyof Filters) => (v: string) => apply({ ...draft, [k]: v });
  const total = q.data?.total ?? 0;
  // Older continues after this page's last thread (keyset paging: as fast
  // deep in a long history as on top); Newer goes back the way it came,
  // or to the top after a reload, which forgot the way.
  const next = q.data?.nextCursor;
  const older = () => next && setPlace({ offset: offset + FLEET_PAGE, after: next, trail: [...place.trail, place.after ?? ""] });
  const newer = () => {
    if (place.trail.length > 0) {
      const trail = place.trail.slice(0, -1);
      setPlace({ offset: Math.max(0, offset - FLEET_PAGE), after: place.trail[place.trail.length - 1] || undefined, trail });
    } else if (place.after) setPlace(TOP);
    else setPlace({ offset: Math.max(0, offset - FLEET_PAGE), trail: [] });
  };
  const rows = (q.data?.threads ?? []).map(fleetRow);
  const list = machines.data ?? [];
  const online = list.filter((m) => m.status === "online");
  const offline = list.filter((m) => m.status !== "online");
  const filtered = JSON.stringify(applied) !== JSON.stringify(NONE);
  const now = Date.now();
  return (
    <section aria-labelledby="all-title" data-testid="all-threads">
      <h1 id="all-title">Threads on all machines</h1>
      <form className="row wrap filters" role="search" aria-label="search threads" onSubmit={submit}>
        <input type="search" aria-label="search prompts and summaries" placeholder="Search prompts and summaries" value={draft.q} onChange={(e) => set("q")(e.target.value)} data-testid="search-q" className="grow" />
        <label className="inline">
          Machine{" "}
          <select value={draft.machine} onChange={(e) => pick("machine")(e.target.value)} aria-label="machine filter">
            <option value="">all</option>
            {list.map((m) => <option key={m.name} value={m.name}>{m.name}{m.status === "online" ? "" : " (offline)"}</option>)}
          </select>
        </label>
        <label className="inline">
          Workflow{" "}
          <input type="text" size={12} value={draft.workflow} onChange={(e) => set("workflow")(e.target.value)} aria-label="workflow filter" placeholder="any" />
        </label>
        <label className="inline">
          Status{" "}
          <select value={draft.status} onChange={(e) => pick("status")(e.target.value)} aria-label="status filter">
            <option value="">all</option>
            {THREAD_STATUSES.map((s) => <option key={s} value={s}>{s}</option>)}
          </select>
        </label>
        <label className="inline">
          Updated from{" "}
          <input type="date" value={draft.since} max={draft.until || undefined} onChange={(e) => pick("since")(e.target.value)} aria-label="updated since" />
        </label>
        <label className="inline">
          to{" "}
          <input type="date" value={draft.until} min={draft.since || undefined} onChange={(e) => pick("until")(e.target.value)} aria-label="updated until" />
        </label>
        <button type="submit" className="primary" data-testid="search-submit">Search</button>
        {filtered && <button type="button" className="link" onClick={() => apply(NONE)}>Clear</button>}
      </form>
      {!reach.reachable && list.length > 0 && (
        <p className="muted machines-up" data-testid="presence-unknown">Which machines are online is unknown while the gateway does not answer.</p>
      )}
      {reach.reachable && online.length > 0 && (
        <p className="muted machines-up" data-testid="machines-up">
          Online: {online.map((m, i) => (
            <span key={m.name}>{i > 0 && ", "}<a href={href.threads(m.name)}>{m.name}</a></span>
          ))}
        </p>
      )}
      {reach.reachable && offline.length > 0 && (
        <ul className="offline-note muted" data-testid="offline-note">
          {offline.map((m) => (
            <li key={m.name} data-machine={m.name}>
              {m.name} offline{m.lastSeen ? ` (last seen ${ago(m.lastSeen, now)})` : ""} — its threads are shown as last known
            </li>
          ))}
        </ul>
      )}
      {q.error && <ErrorBox error={q.error} retry={q.reload} />}
      {!q.data && q.loading && <Loading what="threads" />}
      {q.data && rows.length === 0 && (
        <p className="empty muted" data-testid="no-results">
          {filtered ? "No thread matches." : list.length === 0 ? <>No machines yet. Start <code>uncaged-workflow connect</code> on one.</> : "No threads yet on any machine."}
        </p>
      )}
      {rows.length > 0 && (
        <ThreadTable
          rows={rows}
          sort={sort}
          onSort={setSort}
          prompts
          caption={`Threads ${offset + 1}–${offset + rows.length} of ${q.data?.totalCapped ? `more than ${total}` : total}${total > FLEET_PAGE ? ", paged by last update; sorting orders the rows on this page only" : ""}.`}
        />
      )}
      {(next || offset > 0) && (
        <nav className="row pager" aria-label="pages">
          <button disabled={offset === 0 && !place.after} onClick={newer} data-testid="newer">← Newer</button>
          <span>{offset + 1}–{offset + rows.length} of {q.data?.totalCapped ? `more than ${total}` : total}</span>
          <button disabled={!next} onClick={older} data-testid="older">Older →</button>
        </nav>
      )}
    </section>
  );
}
