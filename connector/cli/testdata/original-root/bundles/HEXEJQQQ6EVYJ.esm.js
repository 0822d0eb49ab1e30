export const descriptor = {
  description: "Greets the user once.",
  roles: {
    greeter: { description: "greets", systemPrompt: "Say hello.", schema: { type: "object" } },
  },
  graph: { edges: [{ from: "__start__", to: "greeter", condition: "FALLBACK", conditionDescription: null }] },
};
export const run = async function* (input, options) {
  const cas = options.cas;
  const h = await cas.put(input.prompt);
  yield { role: "greeter", contentHash: h, meta: { greeting: "hi" }, refs: [h] };
  return { returnCode: 0, summary: "ok" };
};
