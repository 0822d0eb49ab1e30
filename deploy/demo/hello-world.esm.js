// The demo workflow: three deterministic roles, a second apart, so the
// steps can be watched arriving live.
import { createWorkflow, buildDescriptor, START, END } from "@uncaged/workflow-runtime";

const pause = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const role = (fn) => () => async (ctx) => {
  await pause(1000);
  return { meta: fn(ctx), childThread: null };
};

const definition = {
  description: "Says hello in three steps.",
  roles: {
    greeter: { description: "Greets the person", systemPrompt: "Greet.", schema: { type: "object" } },
    writer: { description: "Writes a short note", systemPrompt: "Write.", schema: { type: "object" } },
    reviewer: { description: "Approves the note", systemPrompt: "Review.", schema: { type: "object" } },
  },
  table: {
    [START]: [{ condition: "FALLBACK", role: "greeter" }],
    greeter: [{ condition: "FALLBACK", role: "writer" }],
    writer: [{ condition: "FALLBACK", role: "reviewer" }],
    reviewer: [{ condition: "FALLBACK", role: END }],
  },
};

export const descriptor = buildDescriptor(definition);

export const run = createWorkflow(definition, {
  adapter: role(() => ({})),
  overrides: {
    greeter: role((ctx) => ({ greeting: "Hello, " + (ctx.start.content || "world") + "!" })),
    writer: role(() => ({ note: "Every step of this thread is a node in the content-addressed store." })),
    reviewer: role(() => ({ approved: true })),
  },
});
