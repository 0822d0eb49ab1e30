// A role that keeps every megabyte it allocates: without a memory budget it
// grows until the process dies.
import { createWorkflow, buildDescriptor, START, END } from "@uncaged/workflow-runtime";

const definition = {
  description: "Holds on to memory until something stops it.",
  roles: { hog: { description: "allocates forever", systemPrompt: "", schema: { type: "object" } } },
  table: {
    [START]: [{ condition: "FALLBACK", role: "hog" }],
    hog: [{ condition: "FALLBACK", role: END }],
  },
};

export const descriptor = buildDescriptor(definition);

export const run = createWorkflow(definition, {
  adapter: () => async () => {
    const keep = [];
    for (;;) keep.push(new Array(1 << 20));
  },
  overrides: null,
});
