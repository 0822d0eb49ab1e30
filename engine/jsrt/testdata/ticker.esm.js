// One deterministic role that runs until the thread has `limit` steps
// (limit is the prompt): the benchmark workload.
import { createWorkflow, buildDescriptor, fnAdapter, START, END } from "@uncaged/workflow-runtime";

const more = {
  name: "more",
  description: "fewer steps than the prompt asks for",
  check: (ctx) => ctx.steps.length < Number(ctx.start.content),
};

const definition = {
  description: "Ticks.",
  roles: { tick: { description: "Counts", systemPrompt: "", schema: { type: "object", properties: { n: { type: "number" } } } } },
  table: {
    [START]: [{ condition: "FALLBACK", role: "tick" }],
    tick: [
      { condition: more, role: "tick" },
      { condition: "FALLBACK", role: END },
    ],
  },
};

export const run = createWorkflow(definition, {
  adapter: fnAdapter((ctx) => ({ n: ctx.steps.length + 1, note: "tick" })),
  overrides: null,
});
export const descriptor = buildDescriptor(definition);
