import { FormEvent, useMemo, useState } from "react";
import { machine, useApi } from "../api";
import { ErrorBox } from "../common/ErrorBox";
import { Loading } from "../common/Loading";
import { Modal } from "../common/Modal";
import { useActionBlock } from "../machines/scope";
import { href, navigate } from "../route";

export function RunDialog({ machine: m, onClose }: { machine: string; onClose: () => void }) {
  const api = useMemo(() => machine(m), [m]);
  const wfs = useApi(api.workflows, [m]);
  const [wf, setWf] = useState("");
  const [prompt, setPrompt] = useState("");
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const list = wfs.data?.workflows ?? [];
  const chosen = wf || list[0]?.name || "";
  const block = useActionBlock();
  const submit = async (e: FormEvent) => {
    e.preventDefault();
    if (block) return;
    setBusy(true);
    setError(null);
    try {
      const { threadId } = await api.run(chosen, prompt);
      onClose();
      navigate(href.thread(m, threadId));
    } catch (err) {
      setError((err as Error).message);
      setBusy(false);
    }
  };
  return (
    <Modal title={`Run a workflow on ${m}`} onClose={onClose}>
      <form onSubmit={submit} className="stack">
        {wfs.error && <ErrorBox error={wfs.error} retry={wfs.reload} />}
        {!wfs.data && wfs.loading && <Loading what="workflows" />}
        {wfs.data && list.length === 0 && <p className="muted">This machine has no workflows. Add one with <code>uncaged-workflow workflow add</code>.</p>}
        <label htmlFor="run-wf">Workflow</label>
        <select id="run-wf" value={chosen} onChange={(e) => setWf(e.target.value)} disabled={list.length === 0}>
          {list.map((w) => <option key={w.name} value={w.name}>{w.name}</option>)}
        </select>
        <label htmlFor="run-prompt">Prompt</label>
        <textarea id="run-prompt" rows={5} value={prompt} onChange={(e) => setPrompt(e.target.value)} />
        {error && <p className="error" role="alert">{error}</p>}
        {block && <p className="error" role="alert">Not now: {block}.</p>}
        <div className="row end">
          <button type="button" onClick={onClose}>Cancel</button>
          <button type="submit" className="primary" disabled={busy || !chosen || !!block} title={block ?? undefined} data-testid="run-submit">
            {busy ? "Starting…" : "Run"}
          </button>
        </div>
      </form>
    </Modal>
  );
}
