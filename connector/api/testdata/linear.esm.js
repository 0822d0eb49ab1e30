// Three deterministic roles in a line: planner → coder → reviewer.
import { createWorkflow, buildDescriptor, START, END } from "@uncaged/workflow-runtime";

const role = (fn) => () => async (ctx, runtime) => ({ meta: await fn(ctx, runtime), childThread: null });

const definition = {
  description: "Plan, code, review.",
  roles: {
    planner: { description: "Plans the work", systemPrompt: "Plan.", schema: { type: "object" } },
    coder: { description: "Writes the code", systemPrompt: "Code.", schema: { type: "object" } },
    reviewer: { description: "Reviews it", systemPrompt: "Review.", schema: { type: "object" } },
  },
  table: {
    [START]: [{ condition: "FALLBACK", role: "planner" }],
    planner: [{ condition: "FALLBACK", role: "coder" }],
    coder: [{ condition: "FALLBACK", role: "reviewer" }],
    reviewer: [{ condition: "FALLBACK", role: END }],
  },
};

export const descriptor = buildDescriptor(definition);

export const run = createWorkflow(definition, {
  adapter: role(() => ({})),
  overrides: {
    planner: role((ctx) => ({ plan: "1. write it\n2. test it", task: ctx.start.content })),
    coder: role((ctx) => ({ files: ["main.go"], attempt: ctx.steps.length })),
    reviewer: role(() => ({ approved: true })),
  },
});
