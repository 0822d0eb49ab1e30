// Two drafts and a review: the role write runs as steps 2 and 3. A prompt
// "gate:<prefix>" makes step k wait until the file <prefix>.<k> exists, so
// a test decides when each step ends however slow the machine is.
import { existsSync } from "node:fs";
import { createWorkflow, buildDescriptor, START, END } from "@uncaged/workflow-runtime";

const delay = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const roles = {
  plan: { description: "plans the text", systemPrompt: "Plan.", schema: { type: "object" } },
  write: { description: "writes a draft", systemPrompt: "Write.", schema: { type: "object" } },
  review: { description: "reviews the last draft", systemPrompt: "Review.", schema: { type: "object" } },
};
const again = { name: "again", description: "the first draft gets a second pass", check: (ctx) => ctx.steps.filter((s) => s.role === "write").length < 2 };
const table = {
  [START]: [{ condition: "FALLBACK", role: "plan" }],
  plan: [{ condition: "FALLBACK", role: "write" }],
  write: [{ condition: again, role: "write" }, { condition: "FALLBACK", role: "review" }],
  review: [{ condition: "FALLBACK", role: END }],
};
const definition = { description: "Two drafts and a review.", roles, table };

export const descriptor = buildDescriptor(definition);

export const run = createWorkflow(definition, {
  adapter: () => async (ctx) => {
    const step = ctx.steps.length + 1;
    const prompt = String(ctx.start.content || "");
    const gate = prompt.startsWith("gate:") ? prompt.slice(5).trim() + "." + step : "";
    while (gate && !existsSync(gate)) await delay(20);
    return { meta: { step }, childThread: null };
  },
  overrides: null,
});
