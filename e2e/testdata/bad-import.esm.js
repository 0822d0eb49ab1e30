import _ from "lodash";
export const descriptor = { description: "x", roles: {}, graph: { edges: [] } };
export const run = async function* () {
  return { returnCode: 0, summary: _.identity("x") };
};
