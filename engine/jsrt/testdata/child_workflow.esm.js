// One role runs another registered workflow as a child thread.
import { createWorkflow, buildDescriptor, workflowAdapter, START, END } from "@uncaged/workflow-runtime";

const definition = {
  description: "Delegates to a child workflow.",
  roles: {
    delegate: { description: "Runs the child", systemPrompt: "", schema: { type: "object" } },
  },
  table: {
    [START]: [{ condition: "FALLBACK", role: "delegate" }],
    delegate: [{ condition: "FALLBACK", role: END }],
  },
};

export const run = createWorkflow(definition, { adapter: workflowAdapter("linear"), overrides: null });
export const descriptor = buildDescriptor(definition);
