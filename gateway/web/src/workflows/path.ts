// The path a thread took through its role graph. Kept apart from layout.ts
// (dagre, @xyflow/react) so the main chunk does not pull the graph code in.
export const START = "__start__";
export const END = "__end__";

/** edgeKey names an edge by its ends, as visitedEdges lists them. */
export const edgeKey = (from: string, to: string) => `${from}\u2192${to}`;

/**
 * visitedEdges lists the edges a thread went along: from __start__ to its
 * first role, between consecutive roles of its steps, and from the last role
 * to __end__ once it finished.
 */
export function visitedEdges(roles: string[], finished: boolean): string[] {
  if (roles.length === 0) return [];
  const out = new Set<string>([edgeKey(START, roles[0])]);
  for (let i = 1; i < roles.length; i++) out.add(edgeKey(roles[i - 1], roles[i]));
  if (finished) out.add(edgeKey(roles[roles.length - 1], END));
  return [...out];
}
