import { describe, expect, it } from "vitest";
import { JsonSchema } from "../api";
import { buildAnswer, fieldKind, initialValues, planForm, placeFaults, readFaults } from "./form";

describe("fieldKind", () => {
  it.each<[string, JsonSchema, string]>([
    ["an enum", { type: "string", enum: ["a", "b"] }, "enum"],
    ["an enum without a type", { enum: [1, 2] }, "enum"],
    ["consts to choose from", { oneOf: [{ const: "x", title: "Ex" }, { const: "y" }] }, "enum"],
    ["a string without maxLength", { type: "string" }, "text"],
    ["a long string", { type: "string", maxLength: 201 }, "text"],
    ["a short string", { type: "string", maxLength: 200 }, "string"],
    ["a nullable string", { type: ["string", "null"], maxLength: 20 }, "string"],
    ["a number", { type: "number" }, "number"],
    ["an integer", { type: "integer" }, "integer"],
    ["a boolean", { type: "boolean" }, "boolean"],
    ["an array", { type: "array", items: { type: "string" } }, "json"],
    ["an object", { type: "object" }, "json"],
    ["two types", { type: ["string", "number"] }, "json"],
    ["no type", {}, "json"],
  ])("%s", (_, s, kind) => {
    expect(fieldKind(s).kind).toBe(kind);
  });

  it("labels consts by their titles", () => {
    expect(fieldKind({ oneOf: [{ const: "x", title: "Ex" }, { const: 2 }] }).options).toEqual([{ value: "x", label: "Ex" }, { value: 2, label: "2" }]);
  });
});

describe("planForm", () => {
  it("makes a field per property, required ones marked, in order", () => {
    const p = planForm({ type: "object", required: ["b"], properties: { a: { type: "boolean", title: "Urgent?" }, b: { type: "string", maxLength: 10 } } });
    expect(p.whole).toBe(false);
    expect(p.choice).toBeNull();
    expect(p.fields.map((f) => [f.name, f.label, f.kind, f.required])).toEqual([
      ["a", "Urgent?", "boolean", false],
      ["b", "b", "string", true],
    ]);
  });

  it("answers a lone enum with its buttons", () => {
    const p = planForm({ type: "object", properties: { ok: { enum: ["yes", "no"] } } });
    expect(p.choice?.name).toBe("ok");
  });

  it.each<[string, unknown]>([
    ["no properties", { type: "object" }],
    ["an empty schema", {}],
    ["no schema", null],
    ["properties that are no schemas", { properties: { a: 5 } }],
  ])("takes the whole answer as JSON for %s", (_, s) => {
    const p = planForm(s as JsonSchema);
    expect(p.whole).toBe(true);
    expect(p.fields).toHaveLength(1);
    expect(p.fields[0].kind).toBe("json");
    expect(initialValues(p)).toEqual({ "": "{}" });
  });
});

describe("buildAnswer", () => {
  const plan = planForm({
    type: "object",
    required: ["why"],
    properties: {
      pick: { enum: ["a", "b"] },
      why: { type: "string" },
      note: { type: "string", maxLength: 20 },
      n: { type: "number" },
      k: { type: "integer", default: 3 },
      flag: { type: "boolean" },
      list: { type: "array" },
    },
  });

  it("starts from the defaults", () => {
    expect(initialValues(plan)).toEqual({ pick: undefined, why: "", note: "", n: "", k: "3", flag: false, list: "" });
  });

  it("leaves empty optional fields out and sends an empty required string", () => {
    expect(buildAnswer(plan, initialValues(plan))).toEqual({ answer: { why: "", k: 3, flag: false }, errors: {} });
  });

  it("turns every field into its JSON value", () => {
    const v = { pick: "b", why: "because", note: "n", n: "2.5", k: "7", flag: true, list: '["x", 1]' };
    expect(buildAnswer(plan, v)).toEqual({ answer: { pick: "b", why: "because", note: "n", n: 2.5, k: 7, flag: true, list: ["x", 1] }, errors: {} });
  });

  it.each<[string, Record<string, unknown>, string, RegExp]>([
    ["JSON that does not parse", { list: "[1," }, "list", /^not valid JSON/],
    ["a number that is none", { n: "1e" }, "n", /not a number/],
    ["an integer with a fraction", { k: "1.5" }, "k", /not a whole number/],
  ])("sends nothing for %s, saying so at the field", (_, over, field, msg) => {
    const r = buildAnswer(plan, { ...initialValues(plan), why: "x", ...over });
    expect(r.answer).toBeNull();
    expect(Object.keys(r.errors)).toEqual([field]);
    expect(r.errors[field]).toMatch(msg);
  });

  it("takes a whole answer only as an object", () => {
    const whole = planForm({});
    expect(buildAnswer(whole, { "": '{"a": 1}' })).toEqual({ answer: { a: 1 }, errors: {} });
    expect(buildAnswer(whole, { "": "[1]" }).errors[""]).toMatch(/must be a JSON object/);
    expect(buildAnswer(whole, { "": "" }).errors[""]).toMatch(/not valid JSON/);
  });
});

describe("placeFaults", () => {
  const plan = planForm({ type: "object", properties: { a: { type: "string" }, "x/y": { type: "array" } } });

  it("puts a fault at its field, the rest at the top", () => {
    expect(
      placeFaults(plan, [
        { path: "/a", message: "too short" },
        { path: "/x~1y/2", message: "not a string" },
        { path: "", message: "missing property b" },
        { path: "/zzz", message: "not allowed" },
      ]),
    ).toEqual({ top: ["missing property b", "/zzz: not allowed"], byField: { a: ["too short"], "x/y": ["2: not a string"] } });
  });

  it("reads only well-formed faults from a refusal", () => {
    expect(readFaults({ error: "e", fields: [{ path: "/a", message: "m" }, { message: "whole" }, 7, { path: "/b" }] })).toEqual([
      { path: "/a", message: "m" },
      { path: "", message: "whole" },
    ]);
    expect(readFaults({ error: "e" })).toEqual([]);
    expect(readFaults(undefined)).toEqual([]);
  });
});
