import { Background, Controls, ReactFlow } from "@xyflow/react";
import "@xyflow/react/dist/style.css";
import { useMemo } from "react";
import type { Edge } from "./api";
import { layoutGraph } from "./layout";

export default function Graph({ edges, roles, active }: { edges: Edge[]; roles: Record<string, { description?: string }>; active?: string | null }) {
  const g = useMemo(() => layoutGraph(edges, roles, active), [edges, roles, active]);
  return (
    <ReactFlow nodes={g.nodes} edges={g.edges} fitView nodesDraggable={false} nodesConnectable={false} proOptions={{ hideAttribution: true }} aria-label="role graph">
      <Background />
      <Controls showInteractive={false} />
    </ReactFlow>
  );
}
