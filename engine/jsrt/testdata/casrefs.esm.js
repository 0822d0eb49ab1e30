// collectCasRefs over assorted JSON Schema shapes; one step reports the
// results so the Go test can compare them.
import { createWorkflow, buildDescriptor, fnAdapter, collectCasRefs, START, END } from "@uncaged/workflow-runtime";

const ref = { type: "string", casRef: true };
const cases = {
  flat: [{ type: "object", properties: { a: ref, b: { type: "string" } } }, { a: "A", b: "B" }],
  missing: [{ type: "object", properties: { a: ref } }, {}],
  nonString: [{ type: "object", properties: { a: ref } }, { a: 5 }],
  nested: [
    { type: "object", properties: { o: { type: "object", properties: { x: ref } }, list: { type: "array", items: ref } } },
    { o: { x: "X" }, list: ["L1", "L2", "L1"] },
  ],
  tuple: [{ type: "array", prefixItems: [{ type: "string" }, ref], items: ref }, ["no", "T1", "T2"]],
  nullable: [{ type: "object", properties: { n: { anyOf: [ref, { type: "null" }] } } }, { n: "N" }],
  nullValue: [{ type: "object", properties: { n: { anyOf: [ref, { type: "null" }] } } }, { n: null }],
  outerMark: [{ type: "object", properties: { n: { anyOf: [{ type: "string" }, { type: "null" }], casRef: true } } }, { n: "O" }],
  discriminated: [
    {
      oneOf: [
        { type: "object", properties: { status: { const: "planned" }, phases: { type: "array", items: { type: "object", properties: { hash: ref } } } }, required: ["status"] },
        { type: "object", properties: { status: { const: "aborted" }, reason: ref }, required: ["status"] },
      ],
    },
    { status: "aborted", reason: "R" },
  ],
  defs: [
    { $defs: { Phase: { type: "object", properties: { hash: ref } } }, type: "object", properties: { phases: { type: "array", items: { $ref: "#/$defs/Phase" } } } },
    { phases: [{ hash: "D1" }, { hash: "D2" }] },
  ],
  record: [{ type: "object", additionalProperties: ref }, { k1: "R1", k2: "R2" }],
  allOf: [{ allOf: [{ properties: { a: ref } }, { properties: { b: ref } }] }, { a: "A", b: "B" }],
  zodLike: [{ toJSONSchema: () => ({ type: "object", properties: { z: ref } }) }, { z: "Z" }],
  none: [null, { a: "A" }],
};

const definition = {
  description: "casRef walk.",
  roles: { probe: { description: "Probes", systemPrompt: "", schema: { type: "object" } } },
  table: { [START]: [{ condition: "FALLBACK", role: "probe" }], probe: [{ condition: "FALLBACK", role: END }] },
};

const probe = fnAdapter(() => {
  const out = {};
  for (const [name, [schema, value]] of Object.entries(cases)) out[name] = collectCasRefs(schema, value);
  return out;
});

export const run = createWorkflow(definition, { adapter: probe, overrides: null });
export const descriptor = buildDescriptor(definition);
