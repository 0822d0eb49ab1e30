import fs from "node:net";
export const run = async function* () {};
export const descriptor = { description: "d", roles: {}, graph: { edges: [] } };
