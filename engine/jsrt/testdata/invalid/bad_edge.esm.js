export const run = async function* () {};
export const descriptor = {
  description: "d",
  roles: {},
  graph: { edges: [{ from: "__start__", to: "a", condition: "FALLBACK" }, { from: "a", to: "b", condition: "ok", conditionDescription: 3 }] },
};
