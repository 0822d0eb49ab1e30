import { useState } from "react";
import { gateway, useApi } from "../api";
import { ErrorBox } from "../common/ErrorBox";
import { Loading } from "../common/Loading";
import { MACHINES_PUSH } from "../machines/machines";
import { useReach } from "../reach";
import { href } from "../route";
import { DEFAULT_SORT, ThreadTable } from "./ThreadTable";
import { ALL_LIMIT, loadMachines, mergeThreads, Sort, splitEndpoints } from "./threads";

/**
 * MergedThreads is the landing page of a gateway that keeps no memory (an
 * older one): every online machine's newest threads in one table, asked of
 * each machine, with a note for the offline machines and an error per
 * machine that did not answer.
 */
export function MergedThreads() {
  const eps = useApi(gateway.endpoints, [], 5000, MACHINES_PUSH);
  const split = eps.data ? splitEndpoints(eps.data) : null;
  const online = split?.online ?? [];
  const key = online.join("\n");
  // A machine coming or going changes key (through eps), which loads this again.
  const q = useApi(async () => (split ? mergeThreads(await loadMachines(online)) : null), [key, !!split], 5000, { topic: "threads" });
  const data = q.data;
  const [sort, setSort] = useState<Sort>(DEFAULT_SORT);
  const reach = useReach();
  return (
    <section aria-labelledby="all-title" data-testid="all-threads">
      <h1 id="all-title">Threads on all machines</h1>
      {eps.error && <ErrorBox error={eps.error} retry={eps.reload} />}
      {!eps.data && eps.loading && <Loading what="machines" />}
      {split && split.online.length + split.offline.length === 0 && (
        <p className="empty muted">No machines yet. Start <code>uncaged-workflow connect</code> on one.</p>
      )}
      {!reach.reachable && split && split.online.length + split.offline.length > 0 && (
        <p className="muted machines-up" data-testid="presence-unknown">Which machines are online is unknown while the gateway does not answer.</p>
      )}
      {reach.reachable && split && split.online.length > 0 && (
        <p className="muted machines-up" data-testid="machines-up">
          Online: {split.online.map((m, i) => (
            <span key={m}>{i > 0 && ", "}<a href={href.threads(m)}>{m}</a></span>
          ))}
        </p>
      )}
      {reach.reachable && split && split.offline.length > 0 && (
        <ul className="offline-note muted" data-testid="offline-note">
          {split.offline.map((m) => <li key={m} data-machine={m}>{m} offline — its threads are not shown</li>)}
        </ul>
      )}
      {data?.failed.map((f) => (
        <div key={f.machine} className="error-box" role="alert" data-failed={f.machine}>
          <strong>{f.machine}:</strong> could not list its threads: {f.error.message}
          <button className="link" onClick={q.reload}>Retry</button>
        </div>
      ))}
      {split && online.length > 0 && !data && q.loading && <Loading what="threads" />}
      {data && online.length > 0 && data.rows.length === 0 && data.loaded.length > 0 && <p className="empty muted">No threads yet on any online machine.</p>}
      {data && data.rows.length > 0 && (
        <ThreadTable
          rows={data.rows}
          sort={sort}
          onSort={setSort}
          caption={data.loaded.some((l) => l.total > l.shown)
            ? `The newest ${ALL_LIMIT} threads of each machine (${data.loaded.filter((l) => l.total > l.shown).map((l) => `${l.machine} has ${l.total}`).join(", ")}); sorting orders these rows only.`
            : undefined}
        />
      )}
    </section>
  );
}
