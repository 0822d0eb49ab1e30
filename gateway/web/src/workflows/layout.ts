// The role graph's layout: dagre positions for @xyflow/react nodes, top to
// bottom, with __start__ / __end__ as terminals, FALLBACK edges dashed and
// the edges a thread went along (visitedEdges) bold and green.
import dagre from "@dagrejs/dagre";
import type { Edge as FlowEdge, Node as FlowNode } from "@xyflow/react";
import { MarkerType } from "@xyflow/react";
import type { Edge } from "../api";
import { edgeKey, END, START } from "./path";

export { edgeKey, END, START, visitedEdges } from "./path";
export const FALLBACK = "FALLBACK";
export const ROLE_SIZE = { width: 170, height: 44 };
export const TERMINAL_SIZE = { width: 90, height: 34 };

export type GraphNodeData = { label: string; kind: "role" | "terminal"; description?: string; active?: boolean };

export function layoutGraph(
  edges: Edge[],
  roles: Record<string, { description?: string }> = {},
  active?: string | null,
  visited: string[] = [],
): { nodes: FlowNode<GraphNodeData>[]; edges: FlowEdge[] } {
  const g = new dagre.graphlib.Graph({ multigraph: true });
  g.setGraph({ rankdir: "TB", nodesep: 40, ranksep: 70, edgesep: 20 });
  g.setDefaultEdgeLabel(() => ({}));

  const names = new Set<string>(Object.keys(roles));
  for (const e of edges) {
    names.add(e.from);
    names.add(e.to);
  }
  // Terminals are always drawn, even for a graph without edges.
  names.add(START);
  names.add(END);
  for (const n of names) {
    const size = n === START || n === END ? TERMINAL_SIZE : ROLE_SIZE;
    g.setNode(n, { ...size });
  }
  edges.forEach((e, i) => {
    if (e.from !== e.to) g.setEdge(e.from, e.to, { label: e.condition, width: 60, height: 18 }, `e${i}`);
  });
  dagre.layout(g);

  const nodes: FlowNode<GraphNodeData>[] = [...names].map((n) => {
    const p = g.node(n);
    const terminal = n === START || n === END;
    const size = terminal ? TERMINAL_SIZE : ROLE_SIZE;
    return {
      id: n,
      position: { x: p.x - size.width / 2, y: p.y - size.height / 2 },
      data: { label: terminal ? (n === START ? "start" : "end") : n, kind: terminal ? "terminal" : "role", description: roles[n]?.description, active: active === n },
      type: n === START ? "input" : n === END ? "output" : "default",
      className: `gnode ${terminal ? "gnode-terminal" : "gnode-role"}${active === n ? " gnode-active" : ""}`,
      style: { width: size.width },
      draggable: false,
      connectable: false,
    };
  });
  const seen = new Set(visited);
  const flowEdges: FlowEdge[] = edges.map((e, i) => {
    const fallback = e.condition === FALLBACK;
    const went = seen.has(edgeKey(e.from, e.to));
    const style = { ...(fallback ? { strokeDasharray: "6 4" } : {}), ...(went ? { stroke: "var(--visited)", strokeWidth: 3 } : {}) };
    return {
      id: `e${i}-${e.from}-${e.to}`,
      source: e.from,
      target: e.to,
      label: fallback ? undefined : e.condition,
      data: { condition: e.condition, description: e.conditionDescription ?? null, visited: went },
      animated: false,
      className: `gedge${fallback ? " gedge-fallback" : ""}${went ? " gedge-visited" : ""}`,
      style: Object.keys(style).length ? style : undefined,
      markerEnd: went ? { type: MarkerType.ArrowClosed, color: "#1f8a4c" } : { type: MarkerType.ArrowClosed },
      zIndex: went ? 1 : 0,
    };
  });
  return { nodes, edges: flowEdges };
}
