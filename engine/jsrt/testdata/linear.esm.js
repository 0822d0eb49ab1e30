// A three-role linear workflow with deterministic adapters.
import { createWorkflow, buildDescriptor, fnAdapter, START, END } from "@uncaged/workflow-runtime";

const object = (properties) => ({ $schema: "https://json-schema.org/draft/2020-12/schema", type: "object", properties });

const definition = {
  description: "Plan, code, review.",
  roles: {
    planner: { description: "Plans the work", systemPrompt: "You plan.", schema: object({ plan: { type: "string" } }) },
    coder: { description: "Writes the code", systemPrompt: "You code.", schema: object({ diff: { type: "string" } }) },
    reviewer: { description: "Reviews", systemPrompt: "You review.", schema: object({ approved: { type: "boolean" } }) },
  },
  table: {
    [START]: [{ condition: "FALLBACK", role: "planner" }],
    planner: [{ condition: "FALLBACK", role: "coder" }],
    coder: [{ condition: "FALLBACK", role: "reviewer" }],
    reviewer: [{ condition: "FALLBACK", role: END }],
  },
};

const adapters = {
  planner: fnAdapter((ctx, _runtime, { prompt }) => ({ plan: `plan for: ${ctx.start.content}`, prompt })),
  coder: fnAdapter((ctx) => ({ diff: `diff after ${ctx.steps.map((s) => s.role).join(",")}`, n: ctx.steps.length })),
  // A raw AdapterFn, without fnAdapter.
  reviewer: (_prompt, _schema) => async (ctx) => ({ meta: { approved: true, seen: ctx.steps.length }, childThread: null }),
};

export const run = createWorkflow(definition, { adapter: adapters.planner, overrides: { coder: adapters.coder, reviewer: adapters.reviewer } });
export const descriptor = buildDescriptor(definition);
