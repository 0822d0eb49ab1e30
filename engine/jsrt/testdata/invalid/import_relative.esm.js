import { helper } from "./helper.js";
export const run = async function* () {};
export const descriptor = { description: helper, roles: {}, graph: { edges: [] } };
