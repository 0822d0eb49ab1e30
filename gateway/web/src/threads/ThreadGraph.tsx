import { Suspense, useState } from "react";
import { threadGraphSource, useApi } from "../api";
import { ErrorBox } from "../common/ErrorBox";
import { Loading } from "../common/Loading";
import { Graph } from "../workflows/LazyGraph";

/**
 * ThreadGraph shows the workflow's role graph on demand: the latest step's
 * role highlighted, the edges the thread went along drawn bold and green.
 */
export function ThreadGraph({ m, workflow, bundleHash, active, visited }: { m: string; workflow: string; bundleHash: string; active?: string | null; visited: string[] }) {
  const [open, setOpen] = useState(false);
  return (
    <details className="card" onToggle={(e) => setOpen((e.currentTarget as HTMLDetailsElement).open)}>
      <summary>Role graph of {workflow}{active ? ` (at ${active})` : ""}</summary>
      {open && <ThreadGraphBody m={m} workflow={workflow} bundleHash={bundleHash} active={active} visited={visited} />}
    </details>
  );
}
function ThreadGraphBody({ m, workflow, bundleHash, active, visited }: { m: string; workflow: string; bundleHash: string; active?: string | null; visited: string[] }) {
  const q = useApi(() => threadGraphSource(m, workflow, bundleHash), [m, workflow, bundleHash]);
  const d = q.data?.descriptor;
  if (q.error) return <ErrorBox error={q.error} retry={q.reload} />;
  if (!q.data) return <Loading what="the graph" />;
  if (!d) return <p className="muted">The version this thread ran has no descriptor.</p>;
  return (
    <>
      {q.data.current && (
        <p className="muted" data-testid="graph-stand-in">
          The version this thread ran ({bundleHash}) is no longer registered; this is the graph of the current version.
        </p>
      )}
      <p className="muted legend">
        <span className="legend-visited" aria-hidden="true" /> the path this thread took
        {active ? <> · <span className="legend-active" aria-hidden="true" /> its current role</> : null}
      </p>
      <div className="graph">
        <Suspense fallback={<Loading what="the graph" />}>
          <Graph edges={d.graph?.edges ?? []} roles={d.roles ?? {}} active={active} visited={visited} />
        </Suspense>
      </div>
    </>
  );
}
