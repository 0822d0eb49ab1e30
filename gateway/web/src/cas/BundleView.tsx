import { useMemo } from "react";
import { api, clientPath, Descriptor, useApi } from "../api";
import { ErrorBox } from "../common/ErrorBox";
import { Loading } from "../common/Loading";
import { href } from "../route";

/** Bundle is GET /api/bundles/:hash: what a thread's bundle hash names. */
export type Bundle = {
  hash: string;
  kind: "js" | "yaml";
  workflows: { name: string; current: boolean }[];
  source: string;
  truncated: boolean;
  size: number;
  descriptor: Descriptor | null;
  /** hidden are the paths of the values hidden in a YAML workflow's source (its agents' env values and args). */
  hidden?: string[];
  /** withheld says why the source is not shown (a stored YAML workflow that does not parse). */
  withheld?: string;
};

/** loadBundle asks a machine for a bundle's source and descriptor. */
export const loadBundle = (m: string, hash: string) => api<Bundle>(clientPath(m, `/bundles/${encodeURIComponent(hash)}`));

/**
 * BundleView shows a workflow bundle — the code a thread ran — by its hash:
 * which workflows it is a version of, its roles, and its source. A bundle
 * hash is not a CAS node, so the CAS view cannot show it.
 */
export function BundleView({ machine: m, hash }: { machine: string; hash: string }) {
  const q = useApi(() => loadBundle(m, hash), [m, hash]);
  const b = q.data;
  const roles = useMemo(() => Object.entries(b?.descriptor?.roles ?? {}), [b]);
  return (
    <section aria-labelledby="bundle-title" data-testid="bundle-view">
      <h1 id="bundle-title">
        Bundle <span className="mono">{hash}</span>
      </h1>
      {q.error && <ErrorBox error={q.error} retry={q.reload} />}
      {!b && q.loading && <Loading what="the bundle" />}
      {b && (
        <>
          <dl className="kv card">
            <dt>Kind</dt>
            <dd>{b.kind === "yaml" ? "YAML workflow" : "JavaScript bundle"}</dd>
            <dt>Workflows</dt>
            <dd data-testid="bundle-workflows">
              {b.workflows.length === 0 && <span className="muted">no registered workflow has this version any more</span>}
              {b.workflows.map((w, i) => (
                <span key={w.name}>
                  {i > 0 && ", "}
                  <a href={w.current ? href.workflow(m, w.name) : `${href.workflow(m, w.name)}?version=${encodeURIComponent(hash)}`}>{w.name}</a>
                  {w.current ? "" : " (an older version)"}
                </span>
              ))}
            </dd>
            {b.descriptor?.description && (
              <>
                <dt>Description</dt>
                <dd>{b.descriptor.description}</dd>
              </>
            )}
            <dt>Size</dt>
            <dd>{b.size.toLocaleString("en-US")} bytes</dd>
          </dl>
          {roles.length > 0 && (
            <details className="card" data-testid="bundle-roles">
              <summary>Roles ({roles.length})</summary>
              <dl className="kv">
                {roles.map(([name, r]) => (
                  <span key={name} style={{ display: "contents" }}>
                    <dt className="mono">{name}</dt>
                    <dd>{r.description || <span className="muted">no description</span>}</dd>
                  </span>
                ))}
              </dl>
            </details>
          )}
          <details className="card" open>
            <summary>Source{b.truncated ? ` (the first ${b.source.length.toLocaleString("en-US")} bytes)` : ""}</summary>
            {b.withheld ? (
              <p className="muted" data-testid="bundle-withheld">Not shown: {b.withheld}</p>
            ) : (
              <>
                {b.hidden && b.hidden.length > 0 && (
                  <p className="muted" data-testid="bundle-hidden" title={b.hidden.join("\n")}>
                    {b.hidden.length === 1 ? "One value is" : `${b.hidden.length} values are`} hidden: agents' env values and arguments, which may hold keys and tokens.
                  </p>
                )}
                <pre className="bundle-source" data-testid="bundle-source">{b.source}</pre>
              </>
            )}
          </details>
        </>
      )}
    </section>
  );
}
