// Runs the "leaf" workflow as a child thread in its middle role.
import { createWorkflow, buildDescriptor, workflowAdapter, START, END } from "@uncaged/workflow-runtime";

const definition = {
  description: "Delegates to a child workflow.",
  roles: {
    plan: { description: "plans", systemPrompt: "", schema: { type: "object" } },
    delegate: { description: "runs leaf", systemPrompt: "", schema: { type: "object" } },
    wrap: { description: "wraps up", systemPrompt: "", schema: { type: "object" } },
  },
  table: {
    [START]: [{ condition: "FALLBACK", role: "plan" }],
    plan: [{ condition: "FALLBACK", role: "delegate" }],
    delegate: [{ condition: "FALLBACK", role: "wrap" }],
    wrap: [{ condition: "FALLBACK", role: END }],
  },
};

export const descriptor = buildDescriptor(definition);

export const run = createWorkflow(definition, {
  adapter: () => async () => ({ meta: {}, childThread: null }),
  overrides: { delegate: workflowAdapter("leaf") },
});
