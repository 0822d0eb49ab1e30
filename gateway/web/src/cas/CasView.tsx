import { useMemo } from "react";
import { machine, useApi } from "../api";
import { ErrorBox } from "../common/ErrorBox";
import { Loading } from "../common/Loading";
import { href } from "../route";
import { casParts } from "./casParts";
import { Linkify } from "./Linkify";

export function CasView({ machine: m, hash }: { machine: string; hash: string }) {
  const api = useMemo(() => machine(m), [m]);
  const q = useApi(() => api.cas(hash), [m, hash]);
  const parts = q.data ? casParts(q.data.content) : null;
  return (
    <section aria-labelledby="cas-title">
      <h1 id="cas-title">CAS node <span className="mono">{hash}</span></h1>
      {q.error && <ErrorBox error={q.error} retry={q.reload} />}
      {!q.data && q.loading && <Loading what="the node" />}
      {q.data && parts && (
        <>
          <dl className="kv">
            <dt>Type</dt><dd data-testid="cas-type">{parts.type ?? "–"}</dd>
            <dt>Payload</dt>
            <dd>{parts.payload === null ? <span className="muted">–</span> : <pre className="wrap" data-testid="cas-payload"><Linkify m={m} text={parts.payload} /></pre>}</dd>
            <dt>Refs</dt>
            <dd>
              {parts.refs.length === 0 ? <span className="muted">none</span> : (
                <ul className="inline-list" data-testid="cas-refs">
                  {parts.refs.map((h) => <li key={h}><a href={href.cas(m, h)} className="hash">{h}</a></li>)}
                </ul>
              )}
            </dd>
          </dl>
          <h2>Raw node</h2>
          <pre className="wrap" data-testid="cas-content"><Linkify m={m} text={q.data.content} /></pre>
        </>
      )}
    </section>
  );
}
