import { Background, BaseEdge, Controls, EdgeLabelRenderer, ReactFlow, type Edge as FlowEdge, type EdgeProps } from "@xyflow/react";
import "@xyflow/react/dist/style.css";
import { useMemo } from "react";
import type { Edge } from "../api";
import { EDGE_TYPE, layoutGraph, type GraphEdgeData } from "./layout";

/**
 * RoutedEdge draws an edge along the path layoutGraph routed for it (not
 * between React Flow's handles, where a loop's back-edge would cover its
 * forward edge), with its label, described on hover, on the edge itself.
 */
function RoutedEdge({ id, data, label, style, markerEnd }: EdgeProps<FlowEdge<GraphEdgeData>>) {
  if (!data) return null;
  const text = [label, data.times > 1 ? `×${data.times}` : ""].filter(Boolean).join(" ");
  return (
    <>
      <BaseEdge id={id} path={data.path} style={style} markerEnd={markerEnd} data-kind={data.kind} />
      {text && (
        <EdgeLabelRenderer>
          <div
            className={`gedge-label gedge-label-${data.kind}${data.visited ? " gedge-label-visited" : ""}`}
            data-edge={id}
            title={data.description ?? undefined}
            style={{ ...LABEL_STYLE, transform: `translate(-50%, -50%) translate(${data.labelX}px, ${data.labelY}px)` }}
          >
            {text}
          </div>
        </EdgeLabelRenderer>
      )}
    </>
  );
}

// Inline, so the graph chunk brings its own look.
const LABEL_STYLE = {
  position: "absolute",
  pointerEvents: "all",
  fontSize: 12,
  lineHeight: "16px",
  padding: "0 5px",
  borderRadius: 4,
  background: "var(--card, #fff)",
  border: "1px solid var(--line, #d8dde6)",
  whiteSpace: "nowrap",
} as const;

const edgeTypes = { [EDGE_TYPE]: RoutedEdge };

/**
 * Graph is a workflow's role graph. With a thread's path (taken: edge
 * indices, in order) and the role in flight (active; waiting when the
 * thread is paused and the role runs once resumed), it shows where the
 * thread went and where it is.
 */
export default function Graph({ edges, roles, active, waiting, taken }: { edges: Edge[]; roles: Record<string, { description?: string }>; active?: string | null; waiting?: boolean; taken?: number[] }) {
  // The path is a new array on every poll: lay out again only when it changes.
  const tkey = (taken ?? []).join(",");
  // eslint-disable-next-line react-hooks/exhaustive-deps
  const g = useMemo(() => layoutGraph(edges, roles, { active, waiting, taken }), [edges, roles, active, waiting, tkey]);
  return (
    <ReactFlow nodes={g.nodes} edges={g.edges} edgeTypes={edgeTypes} fitView nodesDraggable={false} nodesConnectable={false} proOptions={{ hideAttribution: true }} aria-label="role graph">
      <Background />
      <Controls showInteractive={false} />
    </ReactFlow>
  );
}
