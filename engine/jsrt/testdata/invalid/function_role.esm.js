export const run = async function* () {};
export const descriptor = { description: "d", roles: { fn: () => ({}) }, graph: { edges: [] } };
