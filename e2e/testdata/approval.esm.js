// A person approves the plan before it ships: planner → approve (human) →
// ship when approved, back to the planner when rejected; a wait that runs
// out (after an hour) takes FALLBACK to gaveUp.
import { createWorkflow, buildDescriptor, humanAdapter, START, END, FALLBACK } from "@uncaged/workflow-runtime";

const role = (fn) => () => async (ctx, runtime) => ({ meta: await fn(ctx, runtime), childThread: null });

const definition = {
  description: "Plan, approve, ship.",
  roles: {
    planner: { description: "Plans the work", systemPrompt: "Plan.", schema: { type: "object" } },
    approve: {
      description: "A person approves the plan",
      systemPrompt: "Ship this plan?",
      schema: {
        type: "object",
        properties: { status: { enum: ["approved", "rejected"] }, note: { type: "string" } },
        required: ["status"],
      },
    },
    ship: { description: "Ships it", systemPrompt: "Ship.", schema: { type: "object" } },
    gaveUp: { description: "Nobody answered", systemPrompt: "Give up.", schema: { type: "object" } },
  },
  table: {
    [START]: [{ condition: FALLBACK, role: "planner" }],
    planner: [{ condition: FALLBACK, role: "approve" }],
    approve: [
      { condition: { name: "approved", description: "approved", check: (ctx) => ctx.steps[ctx.steps.length - 1].meta.status === "approved" }, role: "ship" },
      { condition: { name: "rejected", description: "rejected", check: (ctx) => ctx.steps[ctx.steps.length - 1].meta.status === "rejected" }, role: "planner" },
      { condition: FALLBACK, role: "gaveUp" },
    ],
    ship: [{ condition: FALLBACK, role: END }],
    gaveUp: [{ condition: FALLBACK, role: END }],
  },
};

export const descriptor = buildDescriptor(definition);

export const run = createWorkflow(definition, {
  adapter: role(() => ({})),
  overrides: {
    planner: role((ctx) => ({ plan: "1. write it", round: ctx.steps.length })),
    approve: humanAdapter({ assignee: "reviewers", timeout: "1h" }),
    ship: role((ctx) => ({ shipped: ctx.steps[ctx.steps.length - 1].meta.note || "" })),
    gaveUp: role(() => ({ gaveUp: true })),
  },
});
