import { Suspense, useEffect, useMemo, useState } from "react";
import "./fleet.css";
import { duration, noMemory, useApi } from "../api";
import { ErrorBox } from "../common/ErrorBox";
import { Loading } from "../common/Loading";
import { hashQuery, href, replaceQuery, useHashChange } from "../route";
import { formatCost } from "../threads/usage";
import { COLORS, compact, dayRange, fleetStats, FleetGroupStats, OUTCOMES, series } from "./fleetApi";
import { StatsChart } from "./LazyStatsChart";

/** RANGES are the glance's choices of how many days back it looks. */
export const RANGES = [7, 14, 30, 90];

/** GlanceState is the view's state, kept in the hash's query (#/fleet?by=workflow&days=30). */
export type GlanceState = { by: "machine" | "workflow"; days: number };

/** glanceFromHash reads the state from the hash; anything unknown falls back to machines over 14 days. */
export function glanceFromHash(hash = window.location.hash): GlanceState {
  const p = hashQuery(hash);
  const days = Number(p.get("days"));
  return { by: p.get("by") === "workflow" ? "workflow" : "machine", days: RANGES.includes(days) ? days : 14 };
}

/** statsRange is the range of the last n days, today (UTC) included. */
export function statsRange(days: number, now = Date.now()): { since: string; until: string } {
  const tomorrow = Math.floor(now / 86_400_000) * 86_400_000 + 86_400_000;
  return { since: new Date(tomorrow - days * 86_400_000).toISOString(), until: new Date(tomorrow).toISOString() };
}

/**
 * FleetGlance is the whole fleet at a glance: a card per machine or per
 * workflow with its threads per day by outcome (a small chart), success
 * rate, median duration, tokens and cost over the chosen days, each
 * linking to the matching search.
 */
export function FleetGlance() {
  const [state, setState] = useState<GlanceState>(() => glanceFromHash());
  const set = (next: GlanceState) => {
    setState(next);
    const p = new URLSearchParams();
    if (next.by !== "machine") p.set("by", next.by);
    if (next.days !== 14) p.set("days", String(next.days));
    replaceQuery(p);
  };
  // The range is fixed when the choice is made, so polling does not move the days under the charts.
  const [range, setRange] = useState(() => statsRange(state.days));
  // A link to another choice (the top bar's Fleet: none) replaces this one.
  useHashChange(() => {
      const next = glanceFromHash();
      setState(next);
      setRange(statsRange(next.days));
    });
  const stats = useApi(() => fleetStats({ by: state.by, ...range }), [state.by, range], 30000);
  const days = useMemo(() => dayRange(range.since, range.until), [range]);
  const groups = stats.data?.groups ?? [];
  return (
    <section aria-labelledby="fleet-title" data-testid="fleet-glance">
      <div className="row between wrap">
        <h1 id="fleet-title">Fleet at a glance</h1>
        <div className="row wrap filters">
          <label className="inline">
            Per{" "}
            <select value={state.by} aria-label="group by" data-testid="fleet-by" onChange={(e) => set({ ...state, by: e.target.value === "workflow" ? "workflow" : "machine" })}>
              <option value="machine">machine</option>
              <option value="workflow">workflow</option>
            </select>
          </label>
          <label className="inline">
            Last{" "}
            <select
              value={state.days}
              aria-label="days"
              data-testid="fleet-days"
              onChange={(e) => {
                const n = Number(e.target.value);
                setRange(statsRange(n));
                set({ ...state, days: n });
              }}
            >
              {RANGES.map((n) => <option key={n} value={n}>{n} days</option>)}
            </select>
          </label>
        </div>
      </div>
      <p className="muted small legend" aria-hidden="true">
        {OUTCOMES.map((o) => (
          <span key={o} className="legend-item"><span className="swatch" style={{ background: COLORS[o] }} /> {o === "other" ? "running / other" : o}</span>
        ))}
      </p>
      {stats.error && noMemory(stats.error) && <p className="empty muted">This gateway keeps no history: start it with --data-dir or --database-url.</p>}
      {stats.error && !noMemory(stats.error) && <ErrorBox error={stats.error} retry={stats.reload} />}
      {!stats.data && stats.loading && <Loading what="the fleet's numbers" />}
      {stats.data && groups.length === 0 && <p className="empty muted" data-testid="fleet-empty">No threads in the last {state.days} days.</p>}
      <div className="fleet-grid">
        {groups.map((g) => <GroupCard key={g.key} g={g} by={state.by} days={days} />)}
      </div>
    </section>
  );
}

function GroupCard({ g, by, days }: { g: FleetGroupStats; by: "machine" | "workflow"; days: string[] }) {
  const search = `${href.all()}?${new URLSearchParams({ [by]: g.key })}`;
  const counts = useMemo(() => series(g, days), [g, days]);
  const rate = g.successRate === null ? "–" : `${Math.round(g.successRate * 100)}%`;
  return (
    <article className="fleet-card" data-testid="fleet-card" data-key={g.key} aria-label={`${by} ${g.key}`}>
      <h2 className="fleet-key"><a href={search}>{g.key || <span className="muted">unnamed</span>}</a></h2>
      <dl className="fleet-numbers">
        <div><dt>Threads</dt><dd data-stat="threads">{g.threads}</dd></div>
        <div><dt>Success</dt><dd data-stat="success" title={`${g.completed} of ${g.ended} ended threads completed`}>{rate}</dd></div>
        <div><dt>Median</dt><dd data-stat="median">{g.medianDurationMs === null ? "–" : duration(g.medianDurationMs)}</dd></div>
        <div><dt>Tokens</dt><dd data-stat="tokens" title={String(g.tokens)}>{compact(g.tokens)}</dd></div>
        <div><dt>Cost</dt><dd data-stat="cost">{formatCost(g.cost)}</dd></div>
      </dl>
      <Suspense fallback={<div className="fleet-chart muted small">Loading chart…</div>}>
        <StatsChart days={days} counts={counts} label={`${g.key}: threads per day by outcome`} />
      </Suspense>
    </article>
  );
}
