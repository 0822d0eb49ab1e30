import { cleanup, fireEvent, render, screen, within } from "@testing-library/react";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { ThreadSummary } from "../api";
import { ThreadTable } from "./ThreadTable";

const t = (threadId: string, startedAt: string, o: Partial<ThreadSummary> = {}): ThreadSummary => ({
  threadId, workflow: "wf", hash: "H", startedAt, updatedAt: startedAt, status: "completed", source: "cli", ...o,
});
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
