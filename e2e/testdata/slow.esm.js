// Five roles that each take a while, so a test can pause, kill or crash the
// host in the middle. With SLOW_GATE set in the thread's environment, every
// step after the first also waits until that file exists: a test opens the
// gate when it is done with the thread's middle, however slow the machine.
// A step that waits there first writes SLOW_GATE + ".waiting-" + its number,
// so a test can act while that step is in flight rather than between steps.
import { existsSync, writeFileSync } from "node:fs";
import { createWorkflow, buildDescriptor, START, END } from "@uncaged/workflow-runtime";

const delay = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const names = ["one", "two", "three", "four", "five"];
const roles = {};
const table = { [START]: [{ condition: "FALLBACK", role: names[0] }] };
names.forEach((name, i) => {
  roles[name] = { description: "step " + (i + 1), systemPrompt: "", schema: { type: "object" } };
  table[name] = [{ condition: "FALLBACK", role: names[i + 1] || END }];
});

const definition = { description: "Five slow steps.", roles, table };

export const descriptor = buildDescriptor(definition);

export const run = createWorkflow(definition, {
  adapter: () => async (ctx) => {
    await delay(400);
    const gate = process.env.SLOW_GATE;
    if (gate && ctx.steps.length > 0 && !existsSync(gate)) {
      writeFileSync(gate + ".waiting-" + (ctx.steps.length + 1), "");
      while (!existsSync(gate)) await delay(20);
    }
    return { meta: { step: ctx.steps.length + 1 }, childThread: null };
  },
  overrides: null,
});
