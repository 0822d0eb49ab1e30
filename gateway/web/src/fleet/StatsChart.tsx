import { useEffect, useRef } from "react";
import uPlot from "uplot";
import "uplot/dist/uPlot.min.css";
import { COLORS, OUTCOMES, Outcome } from "./fleetApi";

/**
 * StatsChart draws one group's threads per day as bars stacked by
 * outcome. It lives in its own chunk with uPlot, loaded on the fleet view
 * only (see LazyStatsChart), so the landing page does not pay for it.
 * uPlot draws series over each other in order, so the stack is drawn as
 * running totals, tallest first; the legend is the card's, not uPlot's.
 */
export default function StatsChart({ days, counts, label, width = 300, height = 120 }: {
  days: string[];
  counts: Record<Outcome, number[]>;
  label: string;
  width?: number;
  height?: number;
}) {
  const ref = useRef<HTMLDivElement>(null);
  useEffect(() => {
    const el = ref.current;
    if (!el) return;
    const xs = days.map((d) => Date.parse(`${d}T00:00:00Z`) / 1000);
    // running[i] is the stack's top after OUTCOMES[i]; drawn from the last (the total) down.
    const running: number[][] = [];
    OUTCOMES.forEach((o, i) => running.push(counts[o].map((n, d) => n + (i > 0 ? running[i - 1][d] : 0))));
    const order = OUTCOMES.map((o, i) => ({ o, ys: running[i] })).reverse();
    const bars = uPlot.paths.bars!({ size: [0.7, 24], align: 0 });
    const u = new uPlot(
      {
        width,
        height,
        legend: { show: false },
        cursor: { show: false },
        // Half a day of room at each end, so the first and the last day's bars show whole.
        scales: { x: { time: true, range: (_u, min, max) => [min - 43_200, max + 43_200] }, y: { range: (_u, _min, max) => [0, Math.max(1, max)] } },
        axes: [
          { size: 24, font: "10px sans-serif", grid: { show: false } },
          // Counts of threads: whole numbers only on the axis.
          { size: 28, font: "10px sans-serif", grid: { stroke: "#eee" }, incrs: [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10_000, 20_000, 50_000, 100_000] },
        ],
        series: [{}, ...order.map(({ o }) => ({ label: o, fill: COLORS[o], stroke: COLORS[o], width: 0, paths: bars, points: { show: false } }))],
      },
      [xs, ...order.map(({ ys }) => ys)],
      el,
    );
    return () => u.destroy();
  }, [days, counts, width, height]);
  const totals = days.map((_, d) => OUTCOMES.reduce((sum, o) => sum + counts[o][d], 0));
  return <div ref={ref} className="fleet-chart" role="img" aria-label={label} data-testid="fleet-chart" data-totals={totals.join(",")} />;
}
