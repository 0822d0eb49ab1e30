// Shared by the compatibility agent packages.

const compat = require("internal:compat");

// deferredAdapter builds an AdapterFn whose engine adapter is made when a
// role first runs, after validate(config) passes: the original checked an
// agent's config at call time, so a bundle whose config is only completed
// by the thread's environment still loads.
export function deferredAdapter(what, config, validate, make) {
  if (config === null || typeof config !== "object") {
    throw new TypeError(`${what}: config must be an object`);
  }
  let engineAdapter;
  return (prompt, schema) => async (ctx, runtime, info) => {
    const checked = validate(config);
    if (!checked.ok) throw new Error(checked.error);
    if (engineAdapter === undefined) engineAdapter = make();
    return engineAdapter(prompt, schema)(ctx, runtime, info);
  };
}

// modelRef picks the workflow.yaml model an LlmProvider stands for: its
// model when workflow.yaml resolves that name (a scene, or
// "provider/model"), else the default model. The engine's own model
// client makes the call; the provider's baseUrl and apiKey are not used.
export function modelRef(provider) {
  const name = provider !== null && typeof provider === "object" ? provider.model : undefined;
  return typeof name === "string" && name !== "" && compat.modelResolves(name) ? name : "default";
}

// providerKey is where an llm function of createLlmFn keeps its
// LlmProvider, for createReactAdapter to find the model it names.
export const providerKey = Symbol("uncaged.llmProvider");

const zod = require("internal:zod");

// jsonSchemaOf is a role schema as JSON Schema without $schema: a Zod
// schema's toJSONSchema(), an older Zod schema's definition, or a plain
// JSON Schema object as it is.
export function jsonSchemaOf(schema) {
  let json = schema;
  if (schema !== null && typeof schema === "object" && typeof schema.toJSONSchema === "function") json = schema.toJSONSchema();
  else if (zod.isZodSchema(schema)) json = zod.zodToJSONSchema(schema);
  if (json === null || typeof json !== "object" || Array.isArray(json)) return { type: "object" };
  const out = Object.assign({}, json);
  delete out.$schema;
  return out;
}
