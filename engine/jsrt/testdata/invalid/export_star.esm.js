export * from "lodash/fp";
export const run = async function* () {};
export const descriptor = { description: "d", roles: {}, graph: { edges: [] } };
