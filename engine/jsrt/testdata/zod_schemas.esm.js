// Roles whose schemas are shaped as Zod 4.0 and 4.1 build them (no
// toJSONSchema() method; the type in _zod.def, metadata behind meta()), as
// a bundle built by the original's build carries them. TestZodSchemas
// checks the JSON Schema the engine derives from them.
import { buildDescriptor, createWorkflow, END, START } from "@uncaged/workflow-runtime";

const zodLike = (def, meta, internals) => ({ _zod: Object.assign({ def, bag: {} }, internals), meta: () => meta });
const string = (meta) => zodLike({ type: "string" }, meta, { optout: undefined });
const optional = (inner) => zodLike({ type: "optional", innerType: inner }, undefined, { optin: "optional", optout: "optional" });

const schema = zodLike({
  type: "object",
  shape: {
    phase: string({ casRef: true, description: "phase hash" }),
    count: optional(zodLike({ type: "number" }, undefined, { bag: { format: "safeint" } })),
    status: zodLike({ type: "enum", entries: { a: "a", b: "b" } }),
    note: zodLike({ type: "nullable", innerType: string() }),
    kind: zodLike({ type: "literal", values: ["x"] }),
    tags: zodLike({ type: "default", innerType: zodLike({ type: "array", element: string() }), defaultValue: [] }, undefined, { optin: "optional" }),
    either: zodLike({ type: "union", options: [string(), zodLike({ type: "boolean" })] }),
  },
});

const definition = {
  description: "Zod 4.0-style schemas",
  roles: { planner: { description: "plans", systemPrompt: "Plan.", schema } },
  table: { [START]: [{ condition: "FALLBACK", role: "planner" }], planner: [{ condition: "FALLBACK", role: END }] },
};

export const descriptor = buildDescriptor(definition);
export const run = createWorkflow(definition, {
  adapter: () => async (ctx, runtime) => {
    const hash = await runtime.cas.put("the phase");
    await runtime.extract(schema, hash);
    return {
      meta: { phase: hash, status: "a", note: null, kind: "x", tags: [], either: true, described: JSON.stringify(descriptor.roles.planner.schema) },
      childThread: null,
    };
  },
  overrides: null,
});
