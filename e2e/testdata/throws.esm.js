// The coder role throws: the thread must end failed with the error recorded.
import { createWorkflow, buildDescriptor, START, END } from "@uncaged/workflow-runtime";

const definition = {
  description: "Fails in the second role.",
  roles: {
    planner: { description: "plans", systemPrompt: "", schema: { type: "object" } },
    coder: { description: "explodes", systemPrompt: "", schema: { type: "object" } },
  },
  table: {
    [START]: [{ condition: "FALLBACK", role: "planner" }],
    planner: [{ condition: "FALLBACK", role: "coder" }],
    coder: [{ condition: "FALLBACK", role: END }],
  },
};

export const descriptor = buildDescriptor(definition);

export const run = createWorkflow(definition, {
  adapter: () => async () => ({ meta: { ok: true }, childThread: null }),
  overrides: {
    coder: () => async () => {
      throw new Error("compiler exploded");
    },
  },
});
