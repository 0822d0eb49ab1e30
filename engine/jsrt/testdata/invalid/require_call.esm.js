const path = require("node:path");
export const run = async function* () {};
export const descriptor = { description: "d", roles: {}, graph: { edges: [] } };
