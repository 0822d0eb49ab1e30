import { lazy } from "react";

// The chart library (uPlot) in its own chunk, loaded when the fleet view
// first shows a chart: the landing page's bundle stays without it.
export const StatsChart = lazy(() => import("./StatsChart"));
