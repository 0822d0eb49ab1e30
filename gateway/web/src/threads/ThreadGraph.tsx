import { Suspense, useMemo, useState } from "react";
import { threadGraphSource, useApi, type ThreadRecord, type ThreadStatus } from "../api";
import { ErrorBox } from "../common/ErrorBox";
import { Loading } from "../common/Loading";
import { href } from "../route";
import { Graph } from "../workflows/LazyGraph";
import { pathSteps, threadPath } from "../workflows/path";

type Props = { m: string; workflow: string; bundleHash: string; records: ThreadRecord[]; status?: ThreadStatus };

/**
 * ThreadGraph shows the workflow's role graph on demand, with the path the
 * thread took (from the statuses its steps recorded, up to where it
 * stopped) bold and green, and the role in flight ringed.
 */
export function ThreadGraph(p: Props) {
  const [open, setOpen] = useState(false);
  return (
    <details className="card" data-testid="thread-graph" onToggle={(e) => setOpen((e.currentTarget as HTMLDetailsElement).open)}>
      <summary>Role graph of {p.workflow}</summary>
      {open && <ThreadGraphBody {...p} />}
    </details>
  );
}

function ThreadGraphBody({ m, workflow, bundleHash, records, status }: Props) {
  const q = useApi(() => threadGraphSource(m, workflow, bundleHash), [m, workflow, bundleHash]);
  const d = q.data?.descriptor;
  const edges = d?.graph?.edges;
  const steps = pathSteps(records);
  const skey = steps.map((s) => `${s.role}:${s.status ?? ""}`).join("\n");
  // eslint-disable-next-line react-hooks/exhaustive-deps
  const path = useMemo(() => threadPath(edges ?? [], steps, status), [edges, skey, status]);
  if (q.error) return <ErrorBox error={q.error} retry={q.reload} />;
  if (!q.data) return <Loading what="the graph" />;
  if (!d) return <p className="muted">The version this thread ran has no descriptor.</p>;
  // A pausing thread's role is still at work: it is not waiting yet. A
  // thread waiting for a person's answer is at work too, at that person's role.
  const asking = status === "waiting";
  const running = status === "running" || status === "pausing" || asking;
  const waiting = !running;
  return (
    <>
      {q.data.current ? (
        <p className="muted" data-testid="graph-stand-in">
          The version this thread ran ({bundleHash}) is no longer registered; this is the graph of the current version.
        </p>
      ) : (
        <p className="muted">
          This thread ran version <a className="mono" href={href.workflowVersion(m, workflow, bundleHash)}>{bundleHash}</a> of {workflow}.
        </p>
      )}
      <p className="muted legend" data-testid="graph-legend">
        <span className="legend-visited" aria-hidden="true" /> the path this thread took{steps.length > 0 && status && !running && status !== "completed" ? ` (up to where it stopped: ${steps[steps.length - 1].role})` : ""}
        {path.current ? (
          <>
            {" "}· <span className="legend-active" aria-hidden="true" /> <span data-testid="graph-current">{path.current}</span>
            {waiting ? " runs when the thread is resumed" : asking ? " waits for a person's answer" : " is running now"}
          </>
        ) : null}
      </p>
      <div className="graph">
        <Suspense fallback={<Loading what="the graph" />}>
          <Graph edges={edges ?? []} roles={d.roles ?? {}} active={path.current} waiting={waiting} taken={path.taken} />
        </Suspense>
      </div>
    </>
  );
}
