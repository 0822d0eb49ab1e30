export const run = async function* () {};
export const descriptor = {
  description: "d",
  roles: {
    good: { description: "fine", schema: { type: "object" } },
    bad: { description: "no schema" },
    worse: null,
  },
  graph: { edges: [] },
};
