// The parts of the Triggers view that are rules rather than rendering:
// the body a new trigger's form sends, a Go duration as a person reads it,
// and the view's state in the address.
import { TriggerSpec } from "../api";
import { hashQuery } from "../route";

/** TriggerKind is what fires a trigger: a signed webhook delivery, or the times of a cron schedule. */
export type TriggerKind = "webhook" | "schedule";

/** TriggerForm is what the New trigger form holds, as typed. */
export type TriggerForm = {
  machine: string;
  workflow: string;
  kind: TriggerKind;
  schedule: string;
  timezone: string;
  missed: "run-once" | "skip";
  prompt: string;
  note: string;
  expire: string;
};

/** EMPTY_FORM is a new form: a webhook, a missed time run once (the gateway's defaults). */
export const EMPTY_FORM: TriggerForm = { machine: "", workflow: "", kind: "webhook", schedule: "", timezone: "", missed: "run-once", prompt: "", note: "", expire: "" };

/**
 * triggerSpec is the body that creates the trigger a form describes, or
 * what the form still lacks. Only what the gateway cannot guess is checked
 * here (a machine, a workflow, a schedule's times); the gateway checks the
 * rest (the machine's name, the cron expression, the time zone, the
 * template, the expiry) and its answer names what is wrong. A webhook
 * carries no time zone nor missed-time policy: the gateway refuses them.
 */
export function triggerSpec(f: TriggerForm): { spec: TriggerSpec } | { error: string } {
  const machine = f.machine.trim();
  const workflow = f.workflow.trim();
  if (!machine) return { error: "Name the machine the threads start on (its connector's name)." };
  if (!workflow) return { error: "Name the workflow the threads run." };
  const spec: TriggerSpec = { machine, workflow };
  if (f.kind === "schedule") {
    const schedule = f.schedule.trim();
    if (!schedule) return { error: "Give the schedule: a cron expression such as 0 2 * * *, or @daily." };
    spec.schedule = schedule;
    if (f.timezone.trim()) spec.timezone = f.timezone.trim();
    spec.missed = f.missed;
  } else {
    spec.webhook = true;
  }
  // A template's own spaces are kept: only a blank one means none.
  if (f.prompt.trim()) spec.prompt = f.prompt;
  if (f.note.trim()) spec.note = f.note.trim();
  if (f.expire.trim()) spec.expire = f.expire.trim();
  return { spec };
}

/**
 * shortDuration drops the zero minutes and seconds a Go duration prints
 * ("24h0m0s" → "24h", "1h30m0s" → "1h30m", "10m0s" → "10m"); "0s" and
 * fractions stay as they are.
 */
export function shortDuration(go: string): string {
  return go.replace(/(?<=[hm])0s$/, "").replace(/(?<=h)0m$/, "");
}

/** triggersFromHash reads which trigger's runs are open from the hash's query (#/triggers?trigger=trg_…). */
export function triggersFromHash(hash = window.location.hash): { open: string } {
  return { open: hashQuery(hash).get("trigger") ?? "" };
}

/** CLI_EXAMPLES are the command lines that make triggers, for a gateway that has none yet. */
export const CLI_EXAMPLES = [
  "uncaged-gateway trigger create --machine MACHINE --workflow WORKFLOW --webhook",
  'uncaged-gateway trigger create --machine MACHINE --workflow WORKFLOW --schedule "0 2 * * *" --timezone Europe/Paris',
];
