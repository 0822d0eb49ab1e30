export const run = async function* () {};
const apiKey = process.env.JSRT_TEST_SURELY_UNSET_KEY;
export const descriptor = { description: `uses ${apiKey}`, roles: {}, graph: { edges: [] } };
