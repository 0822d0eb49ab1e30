// The reviewer sends the work back to the coder twice before approving.
import { createWorkflow, buildDescriptor, START, END } from "@uncaged/workflow-runtime";

const role = (fn) => () => async (ctx) => ({ meta: fn(ctx), childThread: null });
const coderRuns = (ctx) => ctx.steps.filter((s) => s.role === "coder").length;

const approved = {
  name: "approved",
  description: "the reviewer approved the change",
  check: (ctx) => ctx.steps[ctx.steps.length - 1].meta.approved === true,
};

const definition = {
  description: "Code until the reviewer approves.",
  roles: {
    coder: { description: "Writes code", systemPrompt: "", schema: { type: "object" } },
    reviewer: { description: "Approves or sends back", systemPrompt: "", schema: { type: "object" } },
  },
  table: {
    [START]: [{ condition: "FALLBACK", role: "coder" }],
    coder: [{ condition: "FALLBACK", role: "reviewer" }],
    reviewer: [
      { condition: approved, role: END },
      { condition: "FALLBACK", role: "coder" },
    ],
  },
};

export const descriptor = buildDescriptor(definition);

export const run = createWorkflow(definition, {
  adapter: role(() => ({})),
  overrides: {
    coder: role((ctx) => ({ attempt: coderRuns(ctx) + 1 })),
    reviewer: role((ctx) => ({ approved: coderRuns(ctx) >= 3 })),
  },
});
