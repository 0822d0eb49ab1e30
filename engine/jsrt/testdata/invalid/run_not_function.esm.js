export const run = { steps: [] };
export const descriptor = { description: "d", roles: {}, graph: { edges: [] } };
