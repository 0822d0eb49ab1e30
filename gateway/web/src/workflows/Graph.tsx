import { Background, Controls, ReactFlow } from "@xyflow/react";
import "@xyflow/react/dist/style.css";
import { useMemo } from "react";
import type { Edge } from "../api";
import { layoutGraph } from "./layout";

export default function Graph({ edges, roles, active, visited }: { edges: Edge[]; roles: Record<string, { description?: string }>; active?: string | null; visited?: string[] }) {
  // The visited list is a new array on every poll: lay out again only when it changes.
  const vkey = (visited ?? []).join("\n");
  // eslint-disable-next-line react-hooks/exhaustive-deps
  const g = useMemo(() => layoutGraph(edges, roles, active, visited), [edges, roles, active, vkey]);
  return (
    <ReactFlow nodes={g.nodes} edges={g.edges} fitView nodesDraggable={false} nodesConnectable={false} proOptions={{ hideAttribution: true }} aria-label="role graph">
      <Background />
      <Controls showInteractive={false} />
    </ReactFlow>
  );
}
