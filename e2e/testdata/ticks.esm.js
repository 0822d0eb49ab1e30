// Twenty quick steps, each writing a debug-log line before and after a
// short wait of its own length: a thread whose steps and log lines come
// often and unevenly, for the tests that follow threads live. With
// TICKS_GATE set in the thread's environment, the first step waits until
// that file exists, so that a test can be following the thread before any
// step is written, however slow the machine.
import { existsSync } from "node:fs";
import { createWorkflow, buildDescriptor, START, END } from "@uncaged/workflow-runtime";

const delay = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const steps = 20;
const more = { name: "more", description: "fewer than 20 steps", check: (ctx) => ctx.steps.length < steps };

const definition = {
  description: "Twenty quick steps.",
  roles: { tick: { description: "one tick", systemPrompt: "", schema: { type: "object" } } },
  table: {
    [START]: [{ condition: "FALLBACK", role: "tick" }],
    tick: [{ condition: more, role: "tick" }, { condition: "FALLBACK", role: END }],
  },
};

export const descriptor = buildDescriptor(definition);

export const run = createWorkflow(definition, {
  adapter: () => async (ctx) => {
    const gate = process.env.TICKS_GATE;
    while (gate && ctx.steps.length === 0 && !existsSync(gate)) await delay(20);
    const n = ctx.steps.length + 1;
    console.log("tick " + n + " begins");
    await delay(10 + Math.floor(Math.random() * 30));
    console.log("tick " + n + " ends");
    return { meta: { step: n }, childThread: null };
  },
  overrides: null,
});
