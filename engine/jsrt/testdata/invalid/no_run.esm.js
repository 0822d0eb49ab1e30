export const descriptor = { description: "d", roles: {}, graph: { edges: [] } };
