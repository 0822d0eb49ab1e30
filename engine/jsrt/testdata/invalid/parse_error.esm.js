export const run = async function* () {
  yield {;
};
export const descriptor = { description: "d", roles: {}, graph: { edges: [] } };
