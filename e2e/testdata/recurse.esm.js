// Runs itself as a child: must stop at the depth limit with a clear error.
import { createWorkflow, buildDescriptor, workflowAdapter, START, END } from "@uncaged/workflow-runtime";

const definition = {
  description: "Recurses until the depth limit.",
  roles: { again: { description: "runs recurse again", systemPrompt: "", schema: { type: "object" } } },
  table: {
    [START]: [{ condition: "FALLBACK", role: "again" }],
    again: [{ condition: "FALLBACK", role: END }],
  },
};

export const descriptor = buildDescriptor(definition);

export const run = createWorkflow(definition, { adapter: workflowAdapter("recurse"), overrides: null });
