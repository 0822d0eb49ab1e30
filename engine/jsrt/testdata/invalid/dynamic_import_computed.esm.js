const name = "node:" + "path";
export const run = async function* () {
  const m = await import(name);
};
export const descriptor = { description: "d", roles: {}, graph: { edges: [] } };
