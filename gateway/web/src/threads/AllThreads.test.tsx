import { act, cleanup, render, screen } from "@testing-library/react";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import type { ThreadSummary } from "../api";
import { MergedThreads } from "./AllThreads";

const t = (threadId: string, startedAt: string, o: Partial<ThreadSummary> = {}): ThreadSummary => ({
  threadId, workflow: "wf", hash: "H", startedAt, updatedAt: startedAt, status: "completed", source: "cli", ...o,
});
const json = (status: number, body: unknown) => new Response(JSON.stringify(body), { status, headers: { "Content-Type": "application/json" } });
const rowIds = () => [...document.querySelectorAll("tbody tr")].map((r) => r.getAttribute("data-thread"));

afterEach(() => {
  cleanup();
  vi.unstubAllGlobals();
});

describe("MergedThreads (a gateway without memory)", () => {
  beforeEach(() => localStorage.clear());

  it("merges the online machines, notes the offline ones, and shows each failure alone", async () => {
    const f = vi.fn(async (url: string) => {
      if (url === "/api/gateway/endpoints")
        return json(200, [
          { name: "laptop", status: "online" },
          { name: "ci-box", status: "offline" },
          { name: "pi", status: "online" },
          { name: "broken", status: "online" },
        ]);
      if (url.startsWith("/api/clients/laptop/threads")) return json(200, { threads: [t("L1", "2026-01-01T08:00:00Z"), t("L2", "2026-01-01T10:00:00Z")], total: 2 });
      if (url.startsWith("/api/clients/pi/threads")) return json(200, { threads: [t("P1", "2026-01-01T09:00:00Z", { status: "running" })], total: 1 });
      if (url.startsWith("/api/clients/broken/threads")) return json(502, { error: "connector unreachable" });
      return json(404, { error: "unexpected " + url });
    });
    vi.stubGlobal("fetch", f);
    render(<MergedThreads />);
    await screen.findByText("L1");
    expect(rowIds()).toEqual(["L2", "P1", "L1"]);
    expect(screen.getByTestId("offline-note").textContent).toBe("ci-box offline — its threads are not shown");
    const failed = document.querySelector('[data-failed="broken"]')!;
    expect(failed.textContent).toMatch(/broken.*connector unreachable/);
    expect(f.mock.calls.some((c) => String(c[0]).includes("/ci-box/"))).toBe(false);
    expect(f.mock.calls.filter((c) => String(c[0]).includes("limit=50")).length).toBe(3);
    expect(document.querySelector('tr[data-thread="P1"] a[data-machine-link="pi"]')).toBeTruthy();
    await act(async () => {});
  });
});
