// A role that never yields control: only an interrupt can stop it.
import { createWorkflow, buildDescriptor, START, END } from "@uncaged/workflow-runtime";

const definition = {
  description: "Spins forever in its first role.",
  roles: { spinner: { description: "spins", systemPrompt: "", schema: { type: "object" } } },
  table: {
    [START]: [{ condition: "FALLBACK", role: "spinner" }],
    spinner: [{ condition: "FALLBACK", role: END }],
  },
};

export const descriptor = buildDescriptor(definition);

export const run = createWorkflow(definition, {
  adapter: () => async () => {
    for (;;) {}
  },
  overrides: null,
});
