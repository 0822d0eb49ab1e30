export const run = async function* () {};
for (;;) {}
export const descriptor = { description: "never", roles: {}, graph: { edges: [] } };
