// The reviewer sends the work back to the coder twice, then approves.
import { createWorkflow, buildDescriptor, START, END } from "@uncaged/workflow-runtime";

const approved = {
  name: "approved",
  description: "The reviewer approved the change",
  check: (ctx) => ctx.steps[ctx.steps.length - 1].meta.approved === true,
};

const definition = {
  description: "Code until the reviewer approves.",
  roles: {
    coder: { description: "Writes code", systemPrompt: "code", schema: { type: "object" } },
    reviewer: { description: "Reviews code", systemPrompt: "review", schema: { type: "object" } },
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

const adapter = (prompt) => async (ctx) => {
  const attempts = ctx.steps.filter((s) => s.role === "coder").length;
  if (prompt === "code") return { meta: { attempt: attempts + 1 }, childThread: null };
  // Reviewer: reject the first two attempts.
  return { meta: { approved: attempts >= 3, attempt: attempts }, childThread: null };
};

export const run = createWorkflow(definition, { adapter, overrides: null });
export const descriptor = buildDescriptor(definition);
