import { useMemo } from "react";
import { fmtTime, machine, useApi } from "../api";
import { ErrorBox } from "../common/ErrorBox";
import { Loading } from "../common/Loading";
import { href } from "../route";

export function WorkflowList({ machine: m }: { machine: string }) {
  const api = useMemo(() => machine(m), [m]);
  const q = useApi(api.workflows, [m]);
  return (
    <section aria-labelledby="wf-title">
      <h1 id="wf-title">Workflows on {m}</h1>
      {q.error && <ErrorBox error={q.error} retry={q.reload} />}
      {!q.data && q.loading && <Loading what="workflows" />}
      {q.data && q.data.workflows.length === 0 && <p className="empty muted">No workflows registered on this machine.</p>}
      <ul className="list">
        {q.data?.workflows.map((w) => (
          <li key={w.name} className="card">
            <a href={href.workflow(m, w.name)} data-workflow={w.name}><strong>{w.name}</strong></a>
            <span className="muted"> · <span className="mono">{w.hash}</span> · {fmtTime(w.timestamp)}</span>
          </li>
        ))}
      </ul>
    </section>
  );
}
