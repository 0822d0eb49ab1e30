import { lazy } from "react";

// The role graph (@xyflow/react, dagre) in its own chunk, loaded on first use.
// One lazy component shared by the workflow page and a thread's graph, so once
// loaded it shows at once on either.
export const Graph = lazy(() => import("./Graph"));
