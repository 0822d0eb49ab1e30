import { act, cleanup, fireEvent, render, screen, within } from "@testing-library/react";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import type { RoleRecord, ThreadSummary } from "./api";
import { AllThreads, RecordCard, ThreadTable, WorkflowDetailView } from "./views";

const t = (threadId: string, startedAt: string, o: Partial<ThreadSummary> = {}): ThreadSummary => ({
  threadId, workflow: "wf", hash: "H", startedAt, updatedAt: startedAt, status: "completed", source: "cli", ...o,
});
const json = (status: number, body: unknown) => new Response(JSON.stringify(body), { status, headers: { "Content-Type": "application/json" } });
const rowIds = () => [...document.querySelectorAll("tbody tr")].map((r) => r.getAttribute("data-thread"));

afterEach(() => {
  cleanup();
  vi.unstubAllGlobals();
});

describe("ThreadTable", () => {
  const rows = [
    t("A", "2026-01-01T10:00:00Z", { status: "completed", workflow: "beta" }),
    t("B", "2026-01-01T11:00:00Z", { status: "running", workflow: "alpha" }),
    t("C", "2026-01-01T09:00:00Z", { status: "failed", workflow: "gamma" }),
  ];

  it("sorts on screen by header buttons and says so with aria-sort", () => {
    render(<ThreadTable rows={rows} machine="laptop" caption="Threads 1–3 of 40; sorting orders the rows on this page only." />);
    expect(rowIds()).toEqual(["B", "A", "C"]);
    const started = screen.getByRole("columnheader", { name: /started/i });
    expect(started.getAttribute("aria-sort")).toBe("descending");
    const wf = screen.getByRole("button", { name: /workflow/i });
    fireEvent.click(wf);
    expect(rowIds()).toEqual(["B", "A", "C"]); // alpha, beta, gamma
    expect(screen.getByRole("columnheader", { name: /workflow/i }).getAttribute("aria-sort")).toBe("ascending");
    expect(started.getAttribute("aria-sort")).toBe("none");
    fireEvent.click(wf);
    expect(rowIds()).toEqual(["C", "A", "B"]);
    fireEvent.click(screen.getByRole("button", { name: /status/i }));
    expect(rowIds()).toEqual(["B", "C", "A"]);
    // A real <button> in each header: reachable with Tab, Enter/Space click it.
    expect(wf.tagName).toBe("BUTTON");
    expect(screen.getByText(/on this page only/).tagName).toBe("CAPTION");
    expect(screen.queryByRole("columnheader", { name: /machine/i })).toBeNull();
    expect(document.querySelector('tr[data-thread="A"] a')!.getAttribute("href")).toBe("#/m/laptop/threads/A");
  });

  it("shows a Machine column linking to each machine's threads when rows come from several", () => {
    render(<ThreadTable rows={[{ ...rows[0], machine: "ci box" }, { ...rows[1], machine: "laptop" }]} />);
    expect(screen.getByRole("columnheader", { name: /machine/i })).toBeTruthy();
    const link = within(document.querySelector('tr[data-thread="A"]') as HTMLElement).getByRole("link", { name: "ci box" });
    expect(link.getAttribute("href")).toBe("#/m/ci%20box/threads");
    expect(document.querySelector('tr[data-thread="A"] a.mono')!.getAttribute("href")).toBe("#/m/ci%20box/threads/A");
  });
});

describe("ThreadTable, sorted by its caller", () => {
  it("reports header clicks and shows the sort it is given", () => {
    const onSort = vi.fn();
    render(<ThreadTable rows={[t("A", "2026-01-01T10:00:00Z"), t("B", "2026-01-01T11:00:00Z")]} machine="m" sort={{ key: "started", dir: "asc" }} onSort={onSort} />);
    expect(rowIds()).toEqual(["A", "B"]);
    fireEvent.click(screen.getByRole("button", { name: /duration/i }));
    expect(onSort).toHaveBeenCalledWith({ key: "duration", dir: "desc" });
    expect(screen.getByRole("columnheader", { name: /started/i }).getAttribute("aria-sort")).toBe("ascending");
  });
});

describe("AllThreads", () => {
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
    render(<AllThreads />);
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

describe("RecordCard", () => {
  it("links a step's child thread to the CAS viewer", () => {
    const r = { type: "role", role: "coder", content: "done", contentHash: "ABCDEFGHJKMNP", stateHash: "QRSTVWXYZ0123", childThread: "0123456789ABC", meta: null, timestamp: 0 } as RoleRecord;
    render(<RecordCard m="laptop" r={r} onFork={async () => {}} />);
    const child = screen.getByText("0123456789ABC");
    expect(child.closest(".hashlink")!.textContent).toMatch(/^child thread/);
    expect(child.getAttribute("href")).toBe("#/m/laptop/cas/0123456789ABC");
  });
});

describe("WorkflowDetailView history", () => {
  beforeEach(() => localStorage.clear());
  const OLD = "ABCDEFGHJKMNP", CUR = "QRSTVWXYZ0123";

  it("makes an earlier version current after confirming, shows the API's error, and reloads on success", async () => {
    let current = CUR;
    let fail = true;
    const posts: unknown[] = [];
    const f = vi.fn(async (url: string, init?: RequestInit) => {
      if (url === "/api/clients/laptop/workflows/wf" && (!init?.method || init.method === "GET"))
        return json(200, {
          name: "wf", hash: current, timestamp: 2000, descriptor: null,
          history: current === CUR ? [{ hash: OLD, timestamp: 1000 }] : [{ hash: CUR, timestamp: 2000 }],
        });
      if (url === "/api/clients/laptop/workflows/wf/rollback" && init?.method === "POST") {
        posts.push(JSON.parse(init.body as string));
        if (fail) return json(400, { error: `bundle file not found for hash ${OLD}` });
        current = OLD;
        return json(200, { name: "wf", hash: OLD, timestamp: 1000 });
      }
      return json(404, { error: "unexpected " + url });
    });
    vi.stubGlobal("fetch", f);
    render(<WorkflowDetailView machine="laptop" name="wf" />);
    const item = await screen.findByText(OLD);
    const li = item.closest("li")!;
    fireEvent.click(within(li as HTMLElement).getByRole("button", { name: "Make current" }));
    const dialog = screen.getByRole("dialog");
    expect(dialog.textContent).toContain(OLD);
    fireEvent.click(within(dialog).getByTestId("confirm"));
    expect((await within(dialog).findByRole("alert")).textContent).toBe(`bundle file not found for hash ${OLD}`);
    expect(posts).toEqual([{ hash: OLD }]);
    fail = false;
    fireEvent.click(within(dialog).getByTestId("confirm"));
    await screen.findByText(CUR, { selector: "li .mono" });
    expect(screen.queryByRole("dialog")).toBeNull();
    expect(document.querySelector(".kv dd.mono")!.textContent).toBe(OLD);
    expect(posts).toEqual([{ hash: OLD }, { hash: OLD }]);
  });

  it("offers no button for a history entry with the current bundle", async () => {
    vi.stubGlobal("fetch", vi.fn(async () => json(200, { name: "wf", hash: CUR, timestamp: 2, descriptor: null, history: [{ hash: CUR, timestamp: 1 }] })));
    render(<WorkflowDetailView machine="laptop" name="wf" />);
    await screen.findByText(/same bundle as the current version/);
    expect(screen.queryByRole("button", { name: "Make current" })).toBeNull();
  });
});
