import { act, cleanup, fireEvent, render, screen } from "@testing-library/react";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { json, params, stubFetch, urls } from "../testutil/fetch";
import { AllThreads, fleetQuery } from "./FleetThreads";

const ft = (machine: string, threadId: string, o: Record<string, unknown> = {}) => ({
  machine, threadId, workflow: "wf", status: "completed", prompt: "p " + threadId, startedAt: "2026-01-01T10:00:00Z", updatedAt: "2026-01-01T10:05:00Z",
  durationMs: 1000, steps: 2, returnCode: 0, summary: "", online: true, lastSeen: "2026-01-01T10:05:00Z", ...o,
});
const machines = () => [
  ["/api/gateway/endpoints", () => json(200, [{ name: "laptop", status: "online", lastHeartbeat: Date.now() }])],
  ["/api/gateway/machines", () => json(200, { machines: [{ name: "laptop", online: true }, { name: "ci-box", online: false, lastSeen: new Date(Date.now() - 120_000).toISOString() }] })],
] as [string, () => Response][];

afterEach(() => {
  cleanup();
  vi.unstubAllGlobals();
});
beforeEach(() => {
  localStorage.clear();
  window.location.hash = "#/threads";
});

describe("fleetQuery", () => {
  it("sends only the filters that are set, since from the start of its day, until to the end of its", () => {
    expect(fleetQuery({ q: " fix bug ", machine: "", workflow: "", status: "failed", since: "", until: "" }, 50)).toEqual({ q: "fix bug", status: "failed", limit: 50, offset: 50, machine: undefined, workflow: undefined, since: undefined, until: undefined });
    const q = fleetQuery({ q: "", machine: "m", workflow: "wf", status: "", since: "2026-03-04", until: "2026-03-31" }, 0);
    expect([q.since, q.until]).toEqual([new Date(2026, 2, 4).toISOString(), new Date(2026, 3, 1).toISOString()]);
    expect(fleetQuery({ q: "", machine: "", workflow: "", status: "", since: "not a day", until: "2026-13-45" }, 0)).toMatchObject({ since: undefined, until: undefined });
  });
});

describe("AllThreads (the gateway's memory)", () => {
  it("lists every machine's threads, offline ones marked, each linked to its machine's thread", async () => {
    const f = stubFetch([
      ...machines(),
      ["/api/gateway/threads", () => json(200, { threads: [ft("laptop", "L1"), ft("ci-box", "C1", { online: false, prompt: "find the **leak**", summary: "found it" })], total: 2 })],
    ]);
    render(<AllThreads />);
    await screen.findByText("L1");
    const off = document.querySelector('tr[data-thread="C1"]')!;
    expect(off.getAttribute("data-offline")).toBe("true");
    expect(off.textContent).toContain("last known");
    expect(off.textContent).toContain("find the **leak** → found it");
    expect(off.querySelector("a")!.getAttribute("href")).toBe("#/m/ci-box/threads/C1");
    expect(document.querySelector('tr[data-thread="L1"]')!.getAttribute("data-offline")).toBeNull();
    expect((await screen.findByTestId("offline-note")).textContent).toMatch(/ci-box offline \(last seen 2 min ago\)/);
    expect(params(f, "/api/gateway/threads")).toEqual({ limit: "50", offset: "0" });
    // No machine is asked directly: the gateway answers for all.
    expect(urls(f).some((u) => u.startsWith("/api/clients/"))).toBe(false);
    await act(async () => {});
  });

  it("searches, filters and pages", async () => {
    const f = stubFetch([
      ...machines(),
      ["/api/gateway/threads", (u) => {
        const p = new URL(u, "http://x").searchParams;
        const n = p.get("q") ? 1 : 50;
        const at = p.get("after") ?? p.get("offset");
        // Pages of 50 from 120 threads: the first two have a next.
        const next = p.get("q") || at === "c2" ? undefined : at === "c1" ? "c2" : "c1";
        return json(200, { threads: Array.from({ length: n }, (_, i) => ft("laptop", `T${at}-${i}`)), total: p.get("q") ? 1 : 120, nextCursor: next });
      }],
    ]);
    render(<AllThreads />);
    await screen.findByText("T0-0");
    expect(screen.getByText(/Threads 1–50 of 120/)).toBeTruthy();
    expect((screen.getByTestId("newer") as HTMLButtonElement).disabled).toBe(true);
    // Older pages by cursor (keyset), not offset, and the URL keeps the place.
    fireEvent.click(screen.getByTestId("older"));
    await screen.findByText("Tc1-0");
    expect(params(f, "/api/gateway/threads")).toEqual({ after: "c1", limit: "50" });
    expect(window.location.hash).toBe("#/threads?after=c1&offset=50");
    expect(screen.getByText(/Threads 51–100 of 120/)).toBeTruthy();
    fireEvent.click(screen.getByTestId("older"));
    await screen.findByText("Tc2-0");
    expect((screen.getByTestId("older") as HTMLButtonElement).disabled).toBe(true);
    fireEvent.click(screen.getByTestId("newer"));
    await screen.findByText("Tc1-0");
    fireEvent.click(screen.getByTestId("newer"));
    await screen.findByText("T0-0");
    expect(params(f, "/api/gateway/threads")).toEqual({ limit: "50", offset: "0" });
    fireEvent.click(screen.getByTestId("older"));
    await screen.findByText("Tc1-0");
    fireEvent.change(screen.getByTestId("search-q"), { target: { value: "memory leak" } });
    fireEvent.change(screen.getByLabelText("workflow filter"), { target: { value: "review" } });
    // Typing does not search; Search (or Enter) does, from the first page.
    expect(params(f, "/api/gateway/threads").q).toBeUndefined();
    fireEvent.click(screen.getByTestId("search-submit"));
    await screen.findByText("T0-0");
    expect(params(f, "/api/gateway/threads")).toEqual({ q: "memory leak", workflow: "review", limit: "50", offset: "0" });
    // A select applies at once, keeping the search.
    await screen.findByRole("option", { name: "ci-box (offline)" });
    fireEvent.change(screen.getByLabelText("machine filter"), { target: { value: "ci-box" } });
    fireEvent.change(screen.getByLabelText("status filter"), { target: { value: "failed" } });
    await act(async () => {});
    expect(params(f, "/api/gateway/threads")).toEqual({ q: "memory leak", workflow: "review", machine: "ci-box", status: "failed", limit: "50", offset: "0" });
    // The search is in the hash, so Back from a thread's page comes back to it.
    expect(window.location.hash).toBe("#/threads?q=memory+leak&machine=ci-box&workflow=review&status=failed");
    fireEvent.click(screen.getByRole("button", { name: "Clear" }));
    await act(async () => {});
    expect(params(f, "/api/gateway/threads")).toEqual({ limit: "50", offset: "0" });
  });

  it("starts from the search in the hash", async () => {
    window.location.hash = "#/threads?q=leak&status=failed&until=2026-03-31&after=cur&offset=50";
    const f = stubFetch([...machines(), ["/api/gateway/threads", () => json(200, { threads: [ft("laptop", "L1")], total: 51 })]]);
    render(<AllThreads />);
    await screen.findByText("L1");
    expect(params(f, "/api/gateway/threads")).toEqual({ q: "leak", status: "failed", until: new Date(2026, 3, 1).toISOString(), after: "cur", limit: "50" });
    expect((screen.getByTestId("search-q") as HTMLInputElement).value).toBe("leak");
    expect((screen.getByLabelText("updated until") as HTMLInputElement).value).toBe("2026-03-31");
    expect(screen.getByText(/Threads 51–51 of 51/)).toBeTruthy();
    // A reload forgot the way back: Newer goes to the top of the same search.
    fireEvent.click(screen.getByTestId("newer"));
    await act(async () => {});
    expect(params(f, "/api/gateway/threads")).toEqual({ q: "leak", status: "failed", until: new Date(2026, 3, 1).toISOString(), limit: "50", offset: "0" });
    // The "All machines" link: no search.
    await act(async () => {
      window.location.hash = "#/threads";
      window.dispatchEvent(new HashChangeEvent("hashchange"));
    });
    expect(params(f, "/api/gateway/threads")).toEqual({ limit: "50", offset: "0" });
    expect((screen.getByTestId("search-q") as HTMLInputElement).value).toBe("");
  });

  it("says when nothing matches", async () => {
    stubFetch([...machines(), ["/api/gateway/threads", () => json(200, { threads: [], total: 0 })]]);
    render(<AllThreads />);
    fireEvent.change(screen.getByTestId("search-q"), { target: { value: "nothing" } });
    fireEvent.submit(screen.getByRole("search"));
    expect((await screen.findByText("No thread matches.")).getAttribute("data-testid")).toBe("no-results");
  });

  it("falls back to asking each online machine when the gateway keeps no memory", async () => {
    const f = stubFetch([
      ["/api/gateway/endpoints", () => json(200, [{ name: "laptop", status: "online" }])],
      ["/api/gateway/threads", () => json(503, { error: "no thread history: this gateway keeps nothing (no --data-dir or --database-url)" })],
      ["/api/clients/laptop/threads", () => json(200, { threads: [{ threadId: "L1", workflow: "wf", hash: "H", startedAt: "2026-01-01T10:00:00Z", updatedAt: "2026-01-01T10:00:00Z", status: "completed", source: "cli" }], total: 1 })],
    ]);
    render(<AllThreads />);
    await screen.findByText("L1");
    expect(urls(f)).toContain("/api/clients/laptop/threads?limit=50&offset=0");
    expect(screen.queryByRole("search")).toBeNull();
    await act(async () => {});
  });
});

describe("the fleet's model usage column", () => {
  it("shows each thread's tokens and cost, from the connector's usage or the gateway's totals, and is absent when no thread used a model", async () => {
    stubFetch([
      ...machines(),
      ["/api/gateway/threads", () => json(200, {
        threads: [
          ft("laptop", "U1", { usage: { calls: 3, promptTokens: 1000, completionTokens: 234, totalTokens: 1234, models: ["p/m"], costUsd: 0.0123 } }),
          ft("ci-box", "U2", { online: false, tokens: 2_500_000, cost: 1.5 }),
          ft("laptop", "U3", { tokens: 40, cost: 0 }),
          ft("laptop", "U4"),
        ],
        total: 4,
      })],
    ]);
    render(<AllThreads />);
    await screen.findByText("U1");
    const cell = (id: string) => document.querySelector(`tr[data-thread="${id}"] td[data-usage]`)!;
    expect(screen.getByRole("columnheader", { name: "Model usage" })).toBeTruthy();
    expect(cell("U1").textContent).toBe("1,234 tok · $0.0123");
    expect(cell("U1").getAttribute("title")).toContain("3 calls");
    expect(cell("U2").textContent).toBe("2.50 M tok · $1.50");
    // Tokens without a price: no "$0.000" passed off as free.
    expect(cell("U3").textContent).toBe("40 tok");
    expect(cell("U4").textContent).toBe("—");
    await act(async () => {});
  });

  it("has no usage column when no thread used a model", async () => {
    stubFetch([...machines(), ["/api/gateway/threads", () => json(200, { threads: [ft("laptop", "N1")], total: 1 })]]);
    render(<AllThreads />);
    await screen.findByText("N1");
    expect(screen.queryByRole("columnheader", { name: "Model usage" })).toBeNull();
    expect(document.querySelector("td[data-usage]")).toBeNull();
    await act(async () => {});
  });
});
