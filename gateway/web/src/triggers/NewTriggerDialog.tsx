import { FormEvent, useState } from "react";
import { CreatedTrigger, gateway, machine, useApi } from "../api";
import { Modal } from "../common/Modal";
import { useActionBlock, useMachine } from "../machines/scope";
import { EMPTY_FORM, TriggerForm, triggerSpec } from "./triggerForm";

/** DEFAULT_EXPIRE is how long a run waits for its machine when the form leaves it empty (the gateway's default). */
export const DEFAULT_EXPIRE = "24h";

/** timeZones are the IANA zones the browser knows, for the time zone's suggestions (none where it cannot list them). */
function timeZones(): string[] {
  try {
    return typeof Intl.supportedValuesOf === "function" ? Intl.supportedValuesOf("timeZone") : [];
  } catch {
    return [];
  }
}

/** browserZone is the browser's own time zone, offered as a hint (a schedule is read in UTC unless told). */
function browserZone(): string {
  try {
    return Intl.DateTimeFormat().resolvedOptions().timeZone ?? "";
  } catch {
    return "";
  }
}

/**
 * NewTriggerDialog is the form that makes a trigger. The machines the
 * gateway knows are offered as suggestions, and a known machine's
 * workflows too; a name it does not know yet is taken (the runs wait for
 * that machine). What the gateway refuses is said in its words, and the
 * form keeps what was typed.
 */
export function NewTriggerDialog({ onClose, onCreated }: { onClose: () => void; onCreated: (c: CreatedTrigger) => void }) {
  const [form, setForm] = useState<TriggerForm>(EMPTY_FORM);
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const [zones] = useState(timeZones);
  const [myZone] = useState(browserZone);
  const block = useActionBlock();
  const { known } = useMachine();
  const set = <K extends keyof TriggerForm>(k: K) => (v: TriggerForm[K]) => setForm((f) => ({ ...f, [k]: v }));
  // A known machine's workflows are suggested; one offline or unknown suggests none.
  const knownMachine = known.includes(form.machine.trim()) ? form.machine.trim() : "";
  const workflows = useApi(
    () => (knownMachine ? machine(knownMachine).workflows().catch(() => ({ workflows: [] })) : Promise.resolve({ workflows: [] })),
    [knownMachine],
  );
  const submit = async (e: FormEvent) => {
    e.preventDefault();
    if (block || busy) return;
    const r = triggerSpec(form);
    if ("error" in r) {
      setError(r.error);
      return;
    }
    setBusy(true);
    setError(null);
    try {
      onCreated(await gateway.createTrigger(r.spec));
    } catch (err) {
      setError((err as Error).message);
      setBusy(false);
    }
  };
  const schedule = form.kind === "schedule";
  return (
    <Modal title="New trigger" onClose={onClose}>
      <form onSubmit={submit} className="stack new-trigger" data-testid="new-trigger-form" noValidate>
        <label htmlFor="trigger-machine">Machine</label>
        <input id="trigger-machine" list="trigger-machines" value={form.machine} onChange={(e) => set("machine")(e.target.value)} placeholder="the connector's name" autoComplete="off" required />
        <datalist id="trigger-machines">
          {known.map((m) => <option key={m} value={m} />)}
        </datalist>
        <label htmlFor="trigger-workflow">Workflow</label>
        <input id="trigger-workflow" list="trigger-workflows" value={form.workflow} onChange={(e) => set("workflow")(e.target.value)} autoComplete="off" required />
        <datalist id="trigger-workflows">
          {(workflows.data?.workflows ?? []).map((w) => <option key={w.name} value={w.name} />)}
        </datalist>
        <fieldset className="trigger-kind">
          <legend>Fires on</legend>
          <label className="inline">
            <input type="radio" name="trigger-kind" value="webhook" checked={!schedule} onChange={() => set("kind")("webhook")} /> a webhook delivery
          </label>
          <label className="inline">
            <input type="radio" name="trigger-kind" value="schedule" checked={schedule} onChange={() => set("kind")("schedule")} /> a schedule
          </label>
        </fieldset>
        {schedule && (
          <>
            <label htmlFor="trigger-schedule">Schedule</label>
            <input id="trigger-schedule" value={form.schedule} onChange={(e) => set("schedule")(e.target.value)} placeholder="0 2 * * *" aria-describedby="trigger-schedule-hint" autoComplete="off" required />
            <p className="hint muted" id="trigger-schedule-hint">Five cron fields (minute hour day month weekday), or @daily, @hourly, @every 30m.</p>
            <label htmlFor="trigger-timezone">Time zone</label>
            <input id="trigger-timezone" list="trigger-zones" value={form.timezone} onChange={(e) => set("timezone")(e.target.value)} placeholder="UTC" aria-describedby="trigger-timezone-hint" autoComplete="off" />
            <datalist id="trigger-zones">
              {zones.map((z) => <option key={z} value={z} />)}
            </datalist>
            <p className="hint muted" id="trigger-timezone-hint">An IANA name; empty is UTC.{myZone && myZone !== "UTC" ? ` Yours is ${myZone}.` : ""}</p>
            <label htmlFor="trigger-missed">A time missed while no gateway ran</label>
            <select id="trigger-missed" value={form.missed} onChange={(e) => set("missed")(e.target.value as TriggerForm["missed"])}>
              <option value="run-once">runs once when a gateway starts</option>
              <option value="skip">is skipped</option>
            </select>
          </>
        )}
        <label htmlFor="trigger-prompt">Prompt template</label>
        <textarea id="trigger-prompt" rows={3} value={form.prompt} onChange={(e) => set("prompt")(e.target.value)} aria-describedby="trigger-prompt-hint" className="mono" />
        <p className="hint muted" id="trigger-prompt-hint">
          {schedule
            ? "A Go template over .trigger, .machine, .workflow and .scheduledFor; empty: those as JSON."
            : "A Go template over the delivery's JSON body, such as {{.issue.title}}; empty: the whole body."}
        </p>
        <label htmlFor="trigger-note">Note</label>
        <input id="trigger-note" value={form.note} onChange={(e) => set("note")(e.target.value)} placeholder="what it is for" />
        <label htmlFor="trigger-expire">A run waits for an offline machine for</label>
        <input id="trigger-expire" value={form.expire} onChange={(e) => set("expire")(e.target.value)} placeholder={DEFAULT_EXPIRE} aria-describedby="trigger-expire-hint" autoComplete="off" />
        <p className="hint muted" id="trigger-expire-hint">A duration such as 90m or 48h; empty is {DEFAULT_EXPIRE}.</p>
        {error && <p className="error" role="alert" data-testid="trigger-error">{error}</p>}
        {block && <p className="error" role="alert">Not now: {block}.</p>}
        <div className="row end">
          <button type="button" onClick={onClose}>Cancel</button>
          <button type="submit" className="primary" disabled={busy || !!block} title={block ?? undefined} data-testid="trigger-submit">
            {busy ? "Creating…" : "Create"}
          </button>
        </div>
      </form>
    </Modal>
  );
}
