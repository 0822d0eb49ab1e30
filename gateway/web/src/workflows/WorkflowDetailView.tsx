import { Suspense, useEffect, useMemo, useState } from "react";
import { fmtTime, machine, RoleAgent, RoleAgents, useApi } from "../api";
import { ConfirmButton } from "../common/ConfirmButton";
import { ErrorBox } from "../common/ErrorBox";
import { Loading } from "../common/Loading";
import { hashQuery, href, useHashChange } from "../route";
import { Graph } from "./LazyGraph";

/** useVersionParam is the ?version= of the page's URL, followed as it changes. */
function useVersionParam(): string | null {
  const [v, setV] = useState(() => hashQuery().get("version"));
  useHashChange(() => setV(hashQuery().get("version")));
  return v;
}

/**
 * WorkflowDetailView is a workflow's page: its current version, or the
 * version the URL names (?version=<hash>, a link that survives a reload and
 * can be shared), with that version's graph and roles, and its history.
 */
export function WorkflowDetailView({ machine: m, name }: { machine: string; name: string }) {
  const api = useMemo(() => machine(m), [m]);
  const q = useApi(() => api.workflow(name), [m, name]);
  const current = q.data?.hash;
  const wanted = useVersionParam();
  // An older version is fetched on its own; the current one is in q already.
  const older = wanted && current && wanted !== current ? wanted : null;
  const v = useApi(() => (older ? api.version(name, older) : Promise.resolve(null)), [m, name, older]);
  const shown = older ? (v.data && v.data.hash === older ? v.data : undefined) : q.data;
  const d = shown?.descriptor;
  return (
    <section aria-labelledby="wfd-title" data-version={shown?.hash ?? ""}>
      <p><a href={href.workflows(m)}>← Workflows</a></p>
      <h1 id="wfd-title">{name}</h1>
      {q.error && <ErrorBox error={q.error} retry={q.reload} />}
      {older && v.error && <ErrorBox error={v.error} retry={v.reload} />}
      {((!q.data && q.loading) || (older && !shown && v.loading)) && <Loading what="the workflow" />}
      {q.data && older && (
        <p className="note" role="note" data-testid="older-version">
          This is an earlier version of {name}, not the one new runs use (<span className="mono">{current}</span>).{" "}
          <a href={href.workflow(m, name)}>Show the current version</a>
        </p>
      )}
      {q.data && shown && (
        <>
          {d?.description && <p className="lead">{d.description}</p>}
          <dl className="kv">
            <dt>Hash</dt><dd className="mono">{shown.hash}</dd>
            <dt>Registered</dt><dd>{fmtTime(shown.timestamp)}</dd>
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
                <article key={rn} className="card" data-role={rn}>
                  <h3>{rn}</h3>
                  {r.description && <p>{r.description}</p>}
                  <RoleAgentLine agents={shown.roleAgents} role={rn} />
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
        </>
      )}
      {q.data && (
        <>
          <h2>History</h2>
          {q.data.history.length === 0 ? (
            <p className="muted">No earlier versions.</p>
          ) : (
            <ul className="list">
              {q.data.history.map((h) => (
                <li key={h.hash + h.timestamp} data-hash={h.hash} aria-current={h.hash === shown?.hash && older ? "page" : undefined}>
                  <a className="mono" href={h.hash === current ? href.workflow(m, name) : href.workflowVersion(m, name, h.hash)}>{h.hash}</a>{" "}
                  <span className="muted">{fmtTime(h.timestamp)}</span>{" "}
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

/** agentText is a role's agent in a line: "reviewer: cli · model sonnet · /usr/bin/claude". */
export function agentText(a: RoleAgent): string {
  const parts = [a.type || "agent"];
  if (a.model) parts.push(`model ${a.model}`);
  if (a.command) parts.push(a.command);
  if (a.workflow) parts.push(`runs workflow ${a.workflow}`);
  return `${a.name ? `${a.name}: ` : ""}${parts.join(" · ")}`;
}

/**
 * RoleAgentLine says which agent a role runs: from a YAML workflow's
 * definition; a JavaScript bundle's code picks its own; a connector that
 * does not report agents is said to be the reason none shows.
 */
function RoleAgentLine({ agents, role }: { agents: RoleAgents | undefined; role: string }) {
  const a = agents?.[role];
  return (
    <p className="role-agent" data-testid="role-agent">
      <span className="muted">Agent:</span>{" "}
      {a ? (
        <span className="mono">{agentText(a)}</span>
      ) : agents === null ? (
        <span className="muted">chosen in the bundle's code</span>
      ) : agents ? (
        <span className="muted">not given for this role</span>
      ) : (
        <span className="muted">not reported by this machine's connector (a newer one says)</span>
      )}
    </p>
  );
}
