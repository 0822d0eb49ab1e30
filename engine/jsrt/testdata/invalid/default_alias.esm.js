const run = async function* () {};
export const descriptor = { description: "d", roles: {}, graph: { edges: [] } };
export { run, run as default };
