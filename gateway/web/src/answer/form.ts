// The answer form, as data: which field each property of a question's JSON
// Schema becomes, what the fields start with, and how what was typed turns
// into the answer sent. The connector checks the answer against the schema;
// the form only turns text into JSON values, and says so at the field when
// text cannot be one (nothing is sent then).
import { FieldFault, JsonSchema } from "../api";

/**
 * FieldKind is how a field is asked: enum a button per value, string an
 * input, text a textarea (a string with no or a long maxLength), number and
 * integer a number input, boolean a checkbox, json a textarea holding JSON
 * (arrays, objects and whatever else the form does not know).
 */
export type FieldKind = "enum" | "string" | "text" | "number" | "integer" | "boolean" | "json";

/** Option is one value an enum field offers, and the words on its button. */
export type Option = { value: unknown; label: string };

/** Field is one field of the form: a property of the answer ("" the whole answer). */
export type Field = { name: string; label: string; description?: string; kind: FieldKind; required: boolean; options: Option[]; schema: JsonSchema };

/**
 * FormPlan is the form a schema makes. whole: the schema names no
 * properties, so the answer is typed as one JSON object. choice: the one
 * field of a form whose only field is an enum; its buttons answer at once.
 */
export type FormPlan = { fields: Field[]; whole: boolean; choice: Field | null };

/** Values are what the fields hold: text, a checkbox's state, or an enum's chosen value (undefined: none). */
export type Values = Record<string, unknown>;

/** LONG_STRING is the maxLength above which a string is typed in a textarea. */
export const LONG_STRING = 200;

/** optionLabel is the words for an enum value: a string as it is, anything else as JSON. */
export const optionLabel = (v: unknown) => (typeof v === "string" ? v : JSON.stringify(v));

/** oneType is a schema's type when it names one (["string", "null"] names string), else undefined. */
function oneType(s: JsonSchema): string | undefined {
  if (typeof s.type === "string") return s.type;
  if (Array.isArray(s.type)) {
    const t = s.type.filter((x) => x !== "null");
    return t.length === 1 ? t[0] : undefined;
  }
  return undefined;
}

/** options are the values a schema allows when it lists them: enum, or oneOf/anyOf of consts. */
function options(s: JsonSchema): Option[] | null {
  if (Array.isArray(s.enum) && s.enum.length > 0) return s.enum.map((value) => ({ value, label: optionLabel(value) }));
  const alts = s.oneOf ?? s.anyOf;
  if (Array.isArray(alts) && alts.length > 0 && alts.every((a) => a && typeof a === "object" && "const" in a)) {
    return alts.map((a) => ({ value: a.const, label: typeof a.title === "string" && a.title ? a.title : optionLabel(a.const) }));
  }
  return null;
}

/** fieldKind is how a property's schema is asked, with its options when it is an enum. */
export function fieldKind(s: JsonSchema): { kind: FieldKind; options: Option[] } {
  const opts = options(s);
  if (opts) return { kind: "enum", options: opts };
  switch (oneType(s)) {
    case "string":
      return { kind: typeof s.maxLength === "number" && s.maxLength <= LONG_STRING ? "string" : "text", options: [] };
    case "number":
      return { kind: "number", options: [] };
    case "integer":
      return { kind: "integer", options: [] };
    case "boolean":
      return { kind: "boolean", options: [] };
    default:
      return { kind: "json", options: [] };
  }
}

const isSchema = (v: unknown): v is JsonSchema => !!v && typeof v === "object" && !Array.isArray(v);

/**
 * planForm makes the form of a question's schema: a field per property, in
 * the schema's order, required ones marked. A schema without properties
 * (or not an object's) is answered as one JSON object.
 */
export function planForm(schema: JsonSchema | null | undefined): FormPlan {
  const s = isSchema(schema) ? schema : {};
  const props = isSchema(s.properties) ? Object.entries(s.properties as Record<string, unknown>).filter((e): e is [string, JsonSchema] => isSchema(e[1])) : [];
  if (props.length === 0) {
    const whole: Field = { name: "", label: "Answer (a JSON object)", description: typeof s.description === "string" ? s.description : undefined, kind: "json", required: true, options: [], schema: s };
    return { fields: [whole], whole: true, choice: null };
  }
  const required = new Set(Array.isArray(s.required) ? s.required.filter((r): r is string => typeof r === "string") : []);
  const fields = props.map(([name, p]): Field => {
    const { kind, options: opts } = fieldKind(p);
    return { name, label: typeof p.title === "string" && p.title ? p.title : name, description: typeof p.description === "string" ? p.description : undefined, kind, required: required.has(name), options: opts, schema: p };
  });
  return { fields, whole: false, choice: fields.length === 1 && fields[0].kind === "enum" ? fields[0] : null };
}

/** initialValues are what the fields start with: each property's default, else empty (a checkbox off). */
export function initialValues(plan: FormPlan): Values {
  const v: Values = {};
  for (const f of plan.fields) {
    const d = f.schema.default;
    switch (f.kind) {
      case "boolean":
        v[f.name] = d === true;
        break;
      case "enum":
        v[f.name] = d !== undefined && f.options.some((o) => sameValue(o.value, d)) ? d : undefined;
        break;
      case "json":
        v[f.name] = d !== undefined ? JSON.stringify(d, null, 2) : plan.whole ? "{}" : "";
        break;
      default:
        v[f.name] = d === undefined || d === null ? "" : String(d);
    }
  }
  return v;
}

/** sameValue compares two JSON values (an enum's options may be objects). */
export const sameValue = (a: unknown, b: unknown) => a === b || JSON.stringify(a) === JSON.stringify(b);

/**
 * buildAnswer turns the values into the answer. An empty optional field is
 * left out (an empty required string is sent as ""; the connector says
 * whether that will do); a checkbox is always sent. Text that is no number
 * or no JSON is an error at its field, and there is no answer then.
 */
export function buildAnswer(plan: FormPlan, values: Values): { answer: Record<string, unknown> | null; errors: Record<string, string> } {
  const answer: Record<string, unknown> = {};
  const errors: Record<string, string> = {};
  for (const f of plan.fields) {
    const v = values[f.name];
    const text = typeof v === "string" ? v : "";
    switch (f.kind) {
      case "boolean":
        answer[f.name] = v === true;
        break;
      case "enum":
        if (v !== undefined) answer[f.name] = v;
        break;
      case "string":
      case "text":
        if (text !== "" || f.required) answer[f.name] = text;
        break;
      case "number":
      case "integer": {
        if (text.trim() === "") break;
        const n = Number(text.trim());
        if (!Number.isFinite(n)) errors[f.name] = "not a number";
        else if (f.kind === "integer" && !Number.isInteger(n)) errors[f.name] = "not a whole number";
        else answer[f.name] = n;
        break;
      }
      case "json": {
        if (text.trim() === "" && !plan.whole) break;
        let parsed: unknown;
        try {
          parsed = JSON.parse(text);
        } catch (e) {
          errors[f.name] = `not valid JSON: ${(e as Error).message}`;
          break;
        }
        if (plan.whole) {
          if (!isSchema(parsed)) errors[f.name] = "the answer must be a JSON object ({…})";
          else Object.assign(answer, parsed);
        } else {
          answer[f.name] = parsed;
        }
      }
    }
  }
  return Object.keys(errors).length ? { answer: null, errors } : { answer, errors };
}

/** unescapePointer reads one segment of a JSON Pointer (~1 is "/", ~0 is "~"). */
const unescapePointer = (s: string) => s.replace(/~1/g, "/").replace(/~0/g, "~");

/**
 * placeFaults puts what the connector found wrong with an answer where it
 * belongs: a fault whose JSON Pointer starts at a field goes to that field
 * (with the rest of its path, for an element inside it), any other one (the
 * whole answer: "", or a property the form has no field for) at the top.
 */
export function placeFaults(plan: FormPlan, faults: FieldFault[]): { top: string[]; byField: Record<string, string[]> } {
  const top: string[] = [];
  const byField: Record<string, string[]> = {};
  const names = new Set(plan.whole ? [] : plan.fields.map((f) => f.name));
  for (const fault of faults) {
    const path = typeof fault.path === "string" ? fault.path : "";
    const message = typeof fault.message === "string" && fault.message ? fault.message : "not accepted";
    const segs = path.startsWith("/") ? path.slice(1).split("/").map(unescapePointer) : [];
    if (segs.length > 0 && names.has(segs[0])) {
      const rest = segs.slice(1).join("/");
      (byField[segs[0]] ??= []).push(rest ? `${rest}: ${message}` : message);
    } else {
      top.push(path ? `${path}: ${message}` : message);
    }
  }
  return { top, byField };
}

/** readFaults reads the fields of a 400's body ({error, fields: [{path, message}]}); anything else is none. */
export function readFaults(body: Record<string, unknown> | undefined): FieldFault[] {
  const fields = body?.fields;
  if (!Array.isArray(fields)) return [];
  return fields.filter((f): f is FieldFault => !!f && typeof f === "object" && typeof (f as FieldFault).message === "string").map((f) => ({ path: typeof f.path === "string" ? f.path : "", message: f.message }));
}
