import { Suspense, useMemo } from "react";
import { fmtTime, machine, useApi } from "../api";
import { ConfirmButton } from "../common/ConfirmButton";
import { ErrorBox } from "../common/ErrorBox";
import { Loading } from "../common/Loading";
import { href } from "../route";
import { Graph } from "./LazyGraph";

export function WorkflowDetailView({ machine: m, name }: { machine: string; name: string }) {
  const api = useMemo(() => machine(m), [m]);
  const q = useApi(() => api.workflow(name), [m, name]);
  const d = q.data?.descriptor;
  const current = q.data?.hash;
  return (
    <section aria-labelledby="wfd-title">
      <p><a href={href.workflows(m)}>← Workflows</a></p>
      <h1 id="wfd-title">{name}</h1>
      {q.error && <ErrorBox error={q.error} retry={q.reload} />}
      {!q.data && q.loading && <Loading what="the workflow" />}
      {q.data && (
        <>
          {d?.description && <p className="lead">{d.description}</p>}
          <dl className="kv">
            <dt>Hash</dt><dd className="mono">{q.data.hash}</dd>
            <dt>Registered</dt><dd>{fmtTime(q.data.timestamp)}</dd>
          </dl>
          {!d && <p className="muted">This version has no descriptor, so there is no graph to show.</p>}
          {d && (
            <>
              <h2>Graph</h2>
              <div className="graph" data-testid="graph">
                <Suspense fallback={<Loading what="the graph" />}>
                  <Graph edges={d.graph?.edges ?? []} roles={d.roles ?? {}} />
                </Suspense>
              </div>
              <h2>Roles</h2>
              {Object.keys(d.roles ?? {}).length === 0 && <p className="muted">No roles.</p>}
              {Object.entries(d.roles ?? {}).map(([rn, r]) => (
                <article key={rn} className="card">
                  <h3>{rn}</h3>
                  {r.description && <p>{r.description}</p>}
                  <details>
                    <summary>System prompt</summary>
                    {r.systemPrompt ? <pre className="wrap">{r.systemPrompt}</pre> : <p className="muted">(empty)</p>}
                  </details>
                  <details>
                    <summary>Meta schema</summary>
                    <pre>{JSON.stringify(r.schema ?? {}, null, 2)}</pre>
                  </details>
                </article>
              ))}
            </>
          )}
          <h2>History</h2>
          {q.data.history.length === 0 ? (
            <p className="muted">No earlier versions.</p>
          ) : (
            <ul className="list">
              {q.data.history.map((h) => (
                <li key={h.hash + h.timestamp} data-hash={h.hash}>
                  <span className="mono">{h.hash}</span> <span className="muted">{fmtTime(h.timestamp)}</span>{" "}
                  {h.hash === current ? (
                    <span className="muted">(same bundle as the current version)</span>
                  ) : (
                    <ConfirmButton
                      testid="rollback"
                      className="small"
                      label="Make current"
                      question={`Make version ${h.hash} (registered ${fmtTime(h.timestamp)}) the current version of "${name}"? The current version ${current} moves into the history; new runs use ${h.hash}.`}
                      action={async () => {
                        await api.rollback(name, h.hash);
                        q.reload();
                      }}
                    />
                  )}
                </li>
              ))}
            </ul>
          )}
        </>
      )}
    </section>
  );
}
