import { act, cleanup, fireEvent, render, screen } from "@testing-library/react";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { setToken } from "../api";
import { App } from "../App";
import { resetReach } from "../reach";
import { CHANGES_URL } from "../changes";
import { FakeEventSource, json, params, stubFetch, urls } from "../testutil/fetch";
import { AllThreads } from "./FleetThreads";
import { ThreadList } from "./ThreadList";

afterEach(() => {
  cleanup();
  vi.unstubAllGlobals();
  resetReach();
});
beforeEach(() => {
  localStorage.clear();
  window.location.hash = "";
  vi.stubGlobal("EventSource", FakeEventSource);
});

const summary = (threadId: string, o: Record<string, unknown> = {}) => ({
  threadId, workflow: "wf", hash: "H", startedAt: "2026-01-01T10:00:00Z", updatedAt: "2026-01-01T10:05:00Z", status: "completed", source: "cli", ...o,
});
const headers = () => [...document.querySelectorAll("table.threads thead th")].map((th) => th.textContent!.replace(/[▲▼↕]/g, "").trim());

describe("a machine's thread list", () => {
  it("has the Prompt and usage columns all machines has, when its connector sends them", async () => {
    stubFetch([
      ["/api/clients/laptop/threads", () => json(200, {
        threads: [
          summary("P1", { prompt: "fix the **leak**", usage: { calls: 2, promptTokens: 1000, completionTokens: 234, totalTokens: 1234, models: ["m"], costUsd: 0.00029, unknownCalls: 0, unpricedCalls: 0 } }),
          summary("P2", { prompt: null }),
        ],
        total: 2,
      })],
      ["/api/clients/laptop/workflows", () => json(200, { workflows: [] })],
    ]);
    render(<ThreadList machine="laptop" />);
    await screen.findByText("P1");
    expect(headers()).toEqual(["Thread", "Status", "Workflow", "Prompt → summary", "Started", "Updated", "Duration", "Model usage"]);
    const row = (id: string) => document.querySelector(`tr[data-thread="${id}"]`)!;
    expect(row("P1").querySelector(".prompt-cell")!.textContent).toBe("fix the **leak**");
    expect(row("P1").querySelector("td[data-usage]")!.textContent).toBe("1,234 tok · <$0.001");
    expect(row("P2").querySelector(".prompt-cell")!.textContent).toBe("no prompt");
    expect(row("P2").querySelector("td[data-usage]")!.textContent).toBe("—");
    await act(async () => {});
  });

  it("keeps to the columns an older connector can fill", async () => {
    stubFetch([
      ["/api/clients/laptop/threads", () => json(200, { threads: [summary("O1")], total: 1 })],
      ["/api/clients/laptop/workflows", () => json(200, { workflows: [] })],
    ]);
    render(<ThreadList machine="laptop" />);
    await screen.findByText("O1");
    expect(headers()).toEqual(["Thread", "Status", "Workflow", "Started", "Updated", "Duration"]);
    await act(async () => {});
  });

  it("loads again on a hint for its machine, and does not poll while the gateway pushes them", async () => {
    vi.useFakeTimers({ shouldAdvanceTime: true });
    try {
      let threads = [summary("H1")];
      const f = stubFetch([
        ["/api/clients/laptop/threads", () => json(200, { threads, total: threads.length })],
        ["/api/clients/laptop/workflows", () => json(200, { workflows: [] })],
      ]);
      const asked = () => urls(f).filter((u) => u.startsWith("/api/clients/laptop/threads")).length;
      FakeEventSource.all = [];
      render(<ThreadList machine="laptop" />);
      await screen.findByText("H1");
      const [stream] = FakeEventSource.opened(CHANGES_URL);
      act(() => stream.emit("hello", { topics: ["machines", "threads"] }));
      await vi.waitFor(() => expect(asked()).toBe(2));
      for (let i = 0; i < 4; i++) await act(async () => void (await vi.advanceTimersByTimeAsync(5000)));
      expect(asked()).toBe(2);
      act(() => stream.emit("threads", { machine: "ci-box" }));
      await act(async () => {});
      expect(asked()).toBe(2);
      threads = [summary("H2"), summary("H1")];
      act(() => stream.emit("threads", { machine: "laptop" }));
      await screen.findByText("H2");
      expect(asked()).toBe(3);
    } finally {
      vi.useRealTimers();
    }
  });

  it("offers pausing among the statuses it filters by", async () => {
    stubFetch([
      ["/api/clients/laptop/threads", () => json(200, { threads: [summary("S1", { status: "pausing" })], total: 1 })],
      ["/api/clients/laptop/workflows", () => json(200, { workflows: [] })],
    ]);
    render(<ThreadList machine="laptop" />);
    await screen.findByText("S1");
    expect([...document.querySelectorAll('select[aria-label="status filter"] option')].map((o) => o.textContent)).toContain("pausing");
    expect(document.querySelector('tr[data-thread="S1"] .badge')!.className).toContain("st-pausing");
    await act(async () => {});
  });

  it("offers waiting among the statuses it filters by, with its own badge", async () => {
    const f = stubFetch([
      ["/api/clients/laptop/threads", () => json(200, { threads: [summary("W1", { status: "waiting" })], total: 1 })],
      ["/api/clients/laptop/workflows", () => json(200, { workflows: [] })],
    ]);
    render(<ThreadList machine="laptop" />);
    await screen.findByText("W1");
    const options = [...document.querySelectorAll('select[aria-label="status filter"] option')].map((o) => o.textContent);
    expect(options.slice(0, 3)).toEqual(["all", "running", "waiting"]);
    const badge = document.querySelector<HTMLElement>('tr[data-thread="W1"] .badge')!;
    expect(badge.className).toContain("st-waiting");
    expect(badge.title).toMatch(/a person's answer/);
    fireEvent.change(screen.getByLabelText("status filter"), { target: { value: "waiting" } });
    await act(async () => {});
    expect(params(f, "/api/clients/laptop/threads").status).toBe("waiting");
  });
});

describe("the order a list says it is in", () => {
  it("is the order of its rows: all machines keep the gateway's order (last update first) until a header is clicked", async () => {
    // The gateway pages by last update: U-new changed last but started first.
    const t = (id: string, startedAt: string, updatedAt: string) => ({ machine: "laptop", threadId: id, workflow: "wf", status: "completed", startedAt, updatedAt, online: true });
    stubFetch([
      ["/api/gateway/endpoints", () => json(200, [{ name: "laptop", status: "online", lastHeartbeat: Date.now() }])],
      ["/api/gateway/machines", () => json(200, { machines: [{ name: "laptop", online: true }] })],
      ["/api/gateway/threads", () => json(200, {
        threads: [t("U-new", "2026-01-01T08:00:00Z", "2026-01-01T12:00:00Z"), t("U-old", "2026-01-01T09:00:00Z", "2026-01-01T10:00:00Z")],
        total: 2,
      })],
    ]);
    window.location.hash = "#/threads";
    render(<AllThreads />);
    await screen.findByText("U-new");
    expect([...document.querySelectorAll("tr[data-thread]")].map((r) => r.getAttribute("data-thread"))).toEqual(["U-new", "U-old"]);
    const caption = document.querySelector("table.threads caption")!.textContent!;
    expect(caption).toBe("Threads 1–2 of 2. Sorted by updated, newest first.");
    expect(document.querySelector('th[data-sort="updated"]')!.getAttribute("aria-sort")).toBe("descending");
    await act(async () => {});
  });

  it("is a machine's own order, newest start first, said in the same words", async () => {
    stubFetch([
      ["/api/clients/laptop/threads", () => json(200, { threads: [summary("A", { startedAt: "2026-01-02T00:00:00Z" }), summary("B")], total: 2 })],
      ["/api/clients/laptop/workflows", () => json(200, { workflows: [] })],
    ]);
    render(<ThreadList machine="laptop" />);
    await screen.findByText("A");
    expect(document.querySelector("table.threads caption")!.textContent).toBe("Sorted by started, newest first.");
    await act(async () => {});
  });
});

describe("a machine the gateway does not know", () => {
  it("says so, names the known machines, and offers no action", async () => {
    setToken("good");
    window.location.hash = "#/m/nosuch";
    stubFetch([
      ["/api/gateway/login", () => json(200, { ok: true })],
      ["/api/gateway/endpoints", () => json(200, [{ name: "laptop", status: "online", lastHeartbeat: Date.now() }])],
      ["/api/gateway/machines", () => json(200, { machines: [{ name: "laptop", online: true }, { name: "ci-box", online: false }] })],
      ["/api/clients/nosuch/", () => json(404, { error: "connector not found: nosuch" })],
    ]);
    render(<App />);
    const box = await screen.findByTestId("unknown-machine");
    expect(box.textContent).toMatch(/the gateway knows no machine named nosuch/);
    expect([...box.querySelectorAll("a")].map((a) => [a.textContent, a.getAttribute("href")])).toEqual([
      ["ci-box", "#/m/ci-box/threads"],
      ["laptop", "#/m/laptop/threads"],
      ["all machines", "#/threads"],
      ["the fleet", "#/fleet"],
    ]);
    const run = screen.getByTestId("run-open");
    expect(run.hasAttribute("disabled")).toBe(true);
    expect(run.getAttribute("title")).toBe("the gateway knows no machine named nosuch");
    expect(screen.queryByText(/Something went wrong/)).toBeNull();
    await act(async () => {});
  });

  it("is not called unknown while the machine list cannot be read whole", async () => {
    setToken("good");
    window.location.hash = "#/m/laptop";
    stubFetch([
      ["/api/gateway/login", () => json(200, { ok: true })],
      ["/api/gateway/endpoints", () => json(200, [])],
      ["/api/gateway/machines", () => json(200, { machines: [], degraded: "the store does not answer" })],
      ["/api/clients/laptop/threads", () => json(200, { threads: [summary("K1")], total: 1 })],
      ["/api/clients/laptop/workflows", () => json(200, { workflows: [] })],
    ]);
    render(<App />);
    await screen.findByText("K1");
    expect(screen.queryByTestId("unknown-machine")).toBeNull();
    expect(screen.getByTestId("run-open").hasAttribute("disabled")).toBe(false);
    await act(async () => {});
  });
});
