// The second role throws.
import { createWorkflow, buildDescriptor, START, END } from "@uncaged/workflow-runtime";

const definition = {
  description: "Fails in the middle.",
  roles: {
    first: { description: "Works", systemPrompt: "", schema: { type: "object" } },
    second: { description: "Throws", systemPrompt: "", schema: { type: "object" } },
  },
  table: {
    [START]: [{ condition: "FALLBACK", role: "first" }],
    first: [{ condition: "FALLBACK", role: "second" }],
    second: [{ condition: "FALLBACK", role: END }],
  },
};

function explode(value) {
  throw new Error(`second role exploded on ${value}`);
}

const adapter = (prompt, schema) => async (ctx) => {
  if (ctx.steps.length === 0) return { meta: { ok: true }, childThread: null };
  await new Promise((resolve) => setTimeout(resolve, 5));
  explode(ctx.start.content);
};

export const run = createWorkflow(definition, { adapter, overrides: null });
export const descriptor = buildDescriptor(definition);
