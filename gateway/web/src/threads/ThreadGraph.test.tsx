import { cleanup, fireEvent, render, screen } from "@testing-library/react";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import type { ThreadRecord, ThreadStatus } from "../api";
import { ThreadGraph } from "./ThreadGraph";

// The graph itself (React Flow) is not what is tested here: what the thread
// page hands it is.
const drawn: { active?: string | null; waiting?: boolean; taken?: number[] }[] = [];
vi.mock("../workflows/LazyGraph", () => ({
  Graph: (p: { active?: string | null; waiting?: boolean; taken?: number[] }) => {
    drawn.push(p);
    return <div data-testid="fake-graph" />;
  },
}));

const json = (status: number, body: unknown) => new Response(JSON.stringify(body), { status, headers: { "Content-Type": "application/json" } });
const F = "FALLBACK";
const edges = [
  { from: "__start__", to: "writer", condition: F },
  { from: "writer", to: "reviewer", condition: F },
  { from: "reviewer", to: "__end__", condition: "approved" },
  { from: "reviewer", to: "writer", condition: "rejected" },
];
const step = (role: string, meta: unknown = {}) => ({ type: "role", role, meta }) as unknown as ThreadRecord;

function show(status: ThreadStatus, records: ThreadRecord[]) {
  vi.stubGlobal("fetch", vi.fn(async () => json(200, { name: "wf", hash: "H", timestamp: 1, current: false, descriptor: { roles: {}, graph: { edges } } })));
  render(<ThreadGraph m="laptop" workflow="wf" bundleHash="H" records={records} status={status} />);
  const details = screen.getByTestId("thread-graph") as HTMLDetailsElement;
  details.open = true;
  fireEvent(details, new Event("toggle"));
}

describe("ThreadGraph", () => {
  beforeEach(() => {
    localStorage.clear();
    drawn.length = 0;
  });
  afterEach(() => {
    cleanup();
    vi.unstubAllGlobals();
  });

  it("draws a killed thread's path up to its last step, with no role ringed", async () => {
    show("killed", [step("writer"), step("reviewer", { status: "rejected" })]);
    await screen.findByTestId("fake-graph");
    expect(drawn.at(-1)).toMatchObject({ active: null, taken: [0, 1] });
    expect(screen.getByTestId("graph-legend").textContent).toContain("up to where it stopped: reviewer");
    expect(screen.queryByTestId("graph-current")).toBeNull();
  });

  it("rings the role a running thread runs now", async () => {
    show("running", [step("writer"), step("reviewer", { status: "rejected" })]);
    await screen.findByTestId("fake-graph");
    expect(drawn.at(-1)).toMatchObject({ active: "writer", waiting: false, taken: [0, 1, 3] });
    expect(screen.getByTestId("graph-legend").textContent).toContain("writer is running now");
  });

  it("rings, dashed, the role a paused thread runs once resumed", async () => {
    show("paused", [step("writer")]);
    await screen.findByTestId("fake-graph");
    expect(drawn.at(-1)).toMatchObject({ active: "reviewer", waiting: true, taken: [0] });
    expect(screen.getByTestId("graph-legend").textContent).toContain("reviewer runs when the thread is resumed");
    expect(screen.getByRole("link", { name: "H" }).getAttribute("href")).toBe("#/m/laptop/workflows/wf?version=H");
  });
});
