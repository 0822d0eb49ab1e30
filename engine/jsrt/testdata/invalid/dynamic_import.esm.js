export const run = async function* () {
  const m = await import("node:path");
};
export const descriptor = { description: "d", roles: {}, graph: { edges: [] } };
