// One role that makes the single call its prompt names, each of which
// once allocated more than the host had in one go and took the host down
// (the memory budget's watchdog samples; one call is over before it
// looks). Now each fails alone, naming the budget. "<call> <url>" passes
// a URL to the calls that fetch.
import { readFileSync } from "node:fs";
import { createWorkflow, buildDescriptor, START, END } from "@uncaged/workflow-runtime";

const definition = {
  description: "Makes one call that would allocate too much at once.",
  roles: { call: { description: "the call", systemPrompt: "", schema: { type: "object" } } },
  table: {
    [START]: [{ condition: "FALLBACK", role: "call" }],
    call: [{ condition: "FALLBACK", role: END }],
  },
};

const calls = {
  "typed-1e11": () => new Uint8Array(1e11).length,
  "typed-2e9": () => new Uint8Array(2e9).length,
  "dev-zero": () => readFileSync("/dev/zero").length,
  "fetch": async (url) => (await (await fetch(url)).arrayBuffer()).byteLength,
  "spread": () => [...new Array(1e9)].length,
  "small": () => new Uint8Array(8 << 20).length,
};

export const descriptor = buildDescriptor(definition);

export const run = createWorkflow(definition, {
  adapter: () => async (ctx) => {
    const [name, arg] = ctx.start.content.split(" ");
    return { meta: { result: await calls[name](arg) }, childThread: null };
  },
  overrides: null,
});
