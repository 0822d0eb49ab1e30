// One role; used as a child workflow.
import { createWorkflow, buildDescriptor, START, END } from "@uncaged/workflow-runtime";

const definition = {
  description: "A single step.",
  roles: { work: { description: "works", systemPrompt: "", schema: { type: "object" } } },
  table: {
    [START]: [{ condition: "FALLBACK", role: "work" }],
    work: [{ condition: "FALLBACK", role: END }],
  },
};

export const descriptor = buildDescriptor(definition);

export const run = createWorkflow(definition, {
  adapter: () => async (ctx) => ({ meta: { depth: ctx.depth, task: ctx.start.content }, childThread: null }),
  overrides: null,
});
