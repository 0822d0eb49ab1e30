import _ from "lodash";
export const run = async function* () {};
export const descriptor = { description: _.identity("d"), roles: {}, graph: { edges: [] } };
