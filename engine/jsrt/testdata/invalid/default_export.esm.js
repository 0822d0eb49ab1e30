export const descriptor = { description: "d", roles: {}, graph: { edges: [] } };
export default async function* run() {}
