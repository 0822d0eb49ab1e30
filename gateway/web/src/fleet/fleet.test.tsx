import { act, cleanup, fireEvent, render, screen } from "@testing-library/react";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { json, params, stubFetch } from "../testutil/fetch";
import { compact, dayRange, FleetGroupStats, outcomeOf, series } from "./fleetApi";
import { FleetGlance, glanceFromHash, statsRange } from "./FleetGlance";

// uPlot needs a canvas, which jsdom lacks: the chart is replaced by its data.
vi.mock("./StatsChart", () => ({
  default: ({ label, counts }: { label: string; counts: Record<string, number[]> }) => (
    <div data-testid="fleet-chart" aria-label={label} data-completed={counts.completed.join(",")} data-other={counts.other.join(",")} />
  ),
}));

afterEach(() => {
  cleanup();
  vi.unstubAllGlobals();
  window.location.hash = "";
});
beforeEach(() => localStorage.clear());

const group = (key: string, o: Partial<FleetGroupStats> = {}): FleetGroupStats => ({
  key, days: [], threads: 0, ended: 0, completed: 0, successRate: null, medianDurationMs: null, tokens: 0, cost: 0, ...o,
});

describe("fleet numbers", () => {
  it("lists every day of a range, gaps included", () => {
    expect(dayRange("2026-03-01T00:00:00.000Z", "2026-03-04T00:00:00.000Z")).toEqual(["2026-03-01", "2026-03-02", "2026-03-03"]);
    expect(dayRange("2026-03-01T10:00:00.000Z", "2026-03-02T10:00:00.000Z")).toEqual(["2026-03-01", "2026-03-02"]);
    expect(dayRange("nonsense", "2026-03-02T00:00:00.000Z")).toEqual([]);
  });
  it("stacks statuses into outcomes per day", () => {
    expect(outcomeOf("running")).toBe("other");
    expect(outcomeOf("interrupted")).toBe("other");
    expect(outcomeOf("killed")).toBe("killed");
    const g = group("m", { days: [{ day: "2026-03-02", threads: { completed: 2, running: 1, paused: 1 } }, { day: "2026-02-01", threads: { failed: 9 } }] });
    const s = series(g, ["2026-03-01", "2026-03-02"]);
    expect(s).toEqual({ completed: [0, 2], failed: [0, 0], killed: [0, 0], other: [0, 2] });
  });
  it("formats counts", () => {
    expect(compact(999)).toBe("999");
    expect(compact(1234)).toBe("1.2k");
    expect(compact(25_000)).toBe("25k");
    expect(compact(2_500_000)).toBe("2.5M");
  });
  it("reads its state from the hash, refusing what it does not know", () => {
    expect(glanceFromHash("#/fleet?by=workflow&days=30")).toEqual({ by: "workflow", days: 30 });
    expect(glanceFromHash("#/fleet?by=status&days=1000")).toEqual({ by: "machine", days: 14 });
    expect(glanceFromHash("#/fleet")).toEqual({ by: "machine", days: 14 });
  });
  it("covers the last n days, today included", () => {
    const now = Date.parse("2026-03-10T15:00:00Z");
    expect(statsRange(7, now)).toEqual({ since: "2026-03-04T00:00:00.000Z", until: "2026-03-11T00:00:00.000Z" });
  });
});

describe("FleetGlance", () => {
  it("shows a card per group with its numbers and chart, and keeps its choices in the URL", async () => {
    const today = new Date().toISOString().slice(0, 10);
    const f = stubFetch([
      ["/api/gateway/stats", (u) => {
        const by = new URL(u, "http://x").searchParams.get("by");
        return json(200, {
          by, since: "", until: "",
          groups: by === "workflow"
            ? [group("review", { threads: 1 })]
            : [
                group("ci-box", { days: [{ day: today, threads: { completed: 3, running: 1 } }], threads: 4, ended: 3, completed: 3, successRate: 1, medianDurationMs: 65_000, tokens: 12_345, cost: 1.5 }),
                group("laptop", { threads: 2, ended: 2, completed: 1, successRate: 0.5, medianDurationMs: 900, tokens: 10, cost: 0.001 }),
              ],
        });
      }],
    ]);
    window.location.hash = "#/fleet";
    render(<FleetGlance />);
    const cards = await screen.findAllByTestId("fleet-card");
    expect(cards.map((c) => c.getAttribute("data-key"))).toEqual(["ci-box", "laptop"]);
    const stat = (c: Element, k: string) => c.querySelector(`[data-stat="${k}"]`)!.textContent;
    expect([stat(cards[0], "threads"), stat(cards[0], "success"), stat(cards[0], "median"), stat(cards[0], "tokens"), stat(cards[0], "cost")]).toEqual(["4", "100%", "1 min 5 s", "12k", "$1.50"]);
    expect([stat(cards[1], "success"), stat(cards[1], "median"), stat(cards[1], "cost")]).toEqual(["50%", "900 ms", "$0.001"]);
    expect(cards[0].querySelector("a")!.getAttribute("href")).toBe("#/threads?machine=ci-box");
    const chart = await screen.findByLabelText("ci-box: threads per day by outcome");
    expect(chart.getAttribute("data-completed")!.split(",").pop()).toBe("3");
    expect(chart.getAttribute("data-other")!.split(",").pop()).toBe("1");
    expect(chart.getAttribute("data-completed")!.split(",")).toHaveLength(14);
    const p = params(f, "/api/gateway/stats");
    expect(p.by).toBe("machine");
    expect((Date.parse(p.until) - Date.parse(p.since)) / 86_400_000).toBe(14);

    fireEvent.change(screen.getByTestId("fleet-by"), { target: { value: "workflow" } });
    await screen.findByText("review");
    fireEvent.change(screen.getByTestId("fleet-days"), { target: { value: "30" } });
    expect(window.location.hash).toBe("#/fleet?by=workflow&days=30");
    await screen.findByText("review");
    const p2 = params(f, "/api/gateway/stats");
    expect([p2.by, (Date.parse(p2.until) - Date.parse(p2.since)) / 86_400_000]).toEqual(["workflow", 30]);
    // The top bar's Fleet link: the defaults again.
    await act(async () => {
      window.location.hash = "#/fleet";
      window.dispatchEvent(new HashChangeEvent("hashchange"));
    });
    await screen.findByText("ci-box");
    expect((screen.getByTestId("fleet-by") as HTMLSelectElement).value).toBe("machine");
  });

  it("says when there is nothing to show", async () => {
    stubFetch([["/api/gateway/stats", () => json(200, { by: "machine", since: "", until: "", groups: [] })]]);
    render(<FleetGlance />);
    expect((await screen.findByTestId("fleet-empty")).textContent).toContain("last 14 days");
  });
});
