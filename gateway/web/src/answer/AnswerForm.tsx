import { FormEvent, useId, useMemo, useState } from "react";
import { Answered, ApiError, machine, Question } from "../api";
import { buildAnswer, Field, initialValues, planForm, placeFaults, readFaults, sameValue, Values } from "./form";
import "./answer.css";

/**
 * AnswerForm is the form a question's schema makes (see planForm), and its
 * sending: the answer goes with the question's hash, so an answer to a
 * question that changed meanwhile is refused rather than taken. A refused
 * answer (400) shows each field's fault at that field and keeps what was
 * typed; one someone else gave first (409) is the caller's to show
 * (onConflict, with the connector's words); a taken one goes to onAnswered.
 * disabledWhy, when set, disables the form and says why.
 */
export function AnswerForm({ machine: m, question, onAnswered, onConflict, disabledWhy = null }: {
  machine: string;
  question: Question;
  onAnswered: (a: Answered) => void;
  onConflict: (message: string) => void;
  disabledWhy?: string | null;
}) {
  const plan = useMemo(() => planForm(question.schema), [question.schema]);
  const [values, setValues] = useState<Values>(() => initialValues(plan));
  const [fieldErrors, setFieldErrors] = useState<Record<string, string[]>>({});
  const [top, setTop] = useState<string[]>([]);
  const [busy, setBusy] = useState(false);
  const id = useId();
  const set = (name: string, v: unknown) => setValues((cur) => ({ ...cur, [name]: v }));

  const send = async (vals: Values) => {
    if (busy || disabledWhy) return;
    const built = buildAnswer(plan, vals);
    setTop([]);
    if (!built.answer) {
      // Text that is no JSON (or no number) is said at its field; nothing is sent.
      setFieldErrors(Object.fromEntries(Object.entries(built.errors).map(([k, v]) => [k, [v]])));
      return;
    }
    setFieldErrors({});
    setBusy(true);
    try {
      const done = await machine(m).answer(question.threadId, built.answer, question.questionHash || undefined);
      onAnswered(done);
    } catch (e) {
      if (e instanceof ApiError && e.status === 400) {
        const placed = placeFaults(plan, readFaults(e.body));
        setFieldErrors(placed.byField);
        setTop(placed.top.length || Object.keys(placed.byField).length ? placed.top : [e.message]);
      } else if (e instanceof ApiError && e.status === 409) {
        onConflict(e.message);
      } else {
        setTop([(e as Error).message]);
      }
    } finally {
      setBusy(false);
    }
  };
  const submit = (e: FormEvent) => {
    e.preventDefault();
    void send(values);
  };
  const off = busy || !!disabledWhy;
  return (
    <form className="answer-form" data-testid="answer-form" onSubmit={submit} noValidate aria-busy={busy} aria-label="answer">
      {top.length > 0 && (
        <div className="error-box" role="alert" data-testid="answer-error">
          {top.map((t, i) => <div key={i}>{t}</div>)}
        </div>
      )}
      {disabledWhy && <p className="muted answer-off" data-testid="answer-off">No answer here: {disabledWhy}.</p>}
      <fieldset disabled={off} className="answer-fields">
        {plan.fields.map((f) => (
          <FieldInput
            key={f.name}
            id={`${id}-${f.name}`}
            field={f}
            value={values[f.name]}
            set={(v) => set(f.name, v)}
            errors={fieldErrors[f.name]}
            // The only field an enum: its buttons answer at once, with that value.
            choose={plan.choice === f ? (v) => void send({ ...values, [f.name]: v }) : undefined}
          />
        ))}
        {!plan.choice && (
          <div className="row">
            <button type="submit" className="primary answer-submit" data-testid="answer-submit" disabled={off} title={disabledWhy ?? undefined}>
              {busy ? "Sending…" : "Send answer"}
            </button>
          </div>
        )}
        {plan.choice && busy && <p className="muted" role="status">Sending…</p>}
      </fieldset>
    </form>
  );
}

/** FieldInput is one field: its label (required ones marked), its input, and its faults. */
function FieldInput({ id, field: f, value, set, errors, choose }: {
  id: string;
  field: Field;
  value: unknown;
  set: (v: unknown) => void;
  errors?: string[];
  choose?: (v: unknown) => void;
}) {
  const errId = `${id}-err`;
  const bad = !!errors?.length;
  const common = { id, name: f.name || "answer", "aria-invalid": bad || undefined, "aria-describedby": bad ? errId : undefined, "aria-required": f.required || undefined };
  const label = (
    <>
      {f.label}
      {f.required && <span className="req" title="required" aria-label="required"> *</span>}
    </>
  );
  let input;
  switch (f.kind) {
    case "enum":
      input = (
        <div className="answer-choices" role="group" aria-labelledby={`${id}-label`} aria-describedby={common["aria-describedby"]}>
          {f.options.map((o, i) => {
            const on = value !== undefined && sameValue(value, o.value);
            return (
              <button
                key={i}
                type="button"
                className={`answer-choice${choose ? " primary" : ""}`}
                data-testid="answer-choice"
                data-value={o.label}
                aria-pressed={choose ? undefined : on}
                onClick={() => (choose ? choose(o.value) : set(on && !f.required ? undefined : o.value))}
              >
                {o.label}
              </button>
            );
          })}
        </div>
      );
      break;
    case "boolean":
      input = <input {...common} type="checkbox" checked={value === true} onChange={(e) => set(e.target.checked)} />;
      break;
    case "number":
    case "integer":
      input = (
        <input
          {...common}
          type="number"
          step={f.kind === "integer" ? 1 : "any"}
          min={typeof f.schema.minimum === "number" ? f.schema.minimum : undefined}
          max={typeof f.schema.maximum === "number" ? f.schema.maximum : undefined}
          value={typeof value === "string" ? value : ""}
          onChange={(e) => set(e.target.value)}
        />
      );
      break;
    case "string":
      input = <input {...common} type="text" maxLength={f.schema.maxLength} value={typeof value === "string" ? value : ""} onChange={(e) => set(e.target.value)} />;
      break;
    case "text":
      input = <textarea {...common} rows={4} maxLength={f.schema.maxLength} value={typeof value === "string" ? value : ""} onChange={(e) => set(e.target.value)} />;
      break;
    case "json":
      input = <textarea {...common} className="mono" rows={f.name ? 4 : 6} spellCheck={false} value={typeof value === "string" ? value : ""} onChange={(e) => set(e.target.value)} />;
      break;
  }
  return (
    <div className={`answer-field${bad ? " bad" : ""}`} data-field={f.name} data-kind={f.kind}>
      {f.kind === "boolean" ? (
        <label className="inline" id={`${id}-label`}>
          {input} {label}
        </label>
      ) : (
        <>
          {f.kind === "enum" ? <span className="answer-label" id={`${id}-label`}>{label}</span> : <label className="answer-label" htmlFor={id} id={`${id}-label`}>{label}</label>}
          {f.kind === "json" && f.name && <span className="muted small"> (JSON)</span>}
          {input}
        </>
      )}
      {f.description && <p className="muted small answer-hint">{f.description}</p>}
      {bad && (
        <p className="error field-error" id={errId} data-testid="field-error" role="alert">
          {errors!.join("; ")}
        </p>
      )}
    </div>
  );
}
