import { act, cleanup, fireEvent, render, screen } from "@testing-library/react";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { json, params, stubFetch } from "../testutil/fetch";
import { auditFromHash, AuditView } from "./AuditView";

const entry = (id: number, o: Record<string, unknown> = {}) => ({
  id, time: new Date(Date.now() - id * 60_000).toISOString(), tokenId: "jti-" + id, actor: "alice's laptop", source: "10.0.0.7", action: "login", machine: "", target: "", status: 200, ...o,
});

afterEach(() => {
  cleanup();
  vi.unstubAllGlobals();
});
beforeEach(() => {
  localStorage.clear();
  window.location.hash = "#/audit";
});

describe("AuditView", () => {
  it("lists entries newest first, with filters and paging", async () => {
    const f = stubFetch([
      ["/api/gateway/endpoints", () => json(200, [{ name: "laptop", status: "online" }])],
      ["/api/gateway/machines", () => json(200, { machines: [{ name: "laptop", online: true }] })],
      ["/api/gateway/audit", (u) => {
        const off = Number(new URL(u, "http://x").searchParams.get("offset"));
        return json(200, {
          entries: [
            entry(off + 1, { action: "kill", machine: "laptop", target: "01ARZ3NDEKTSV4RRFFQ69G5FAV", status: 200 }),
            entry(off + 2, { action: "start", machine: "laptop", status: 502, actor: "", tokenId: "" }),
            entry(off + 3),
          ],
          total: 60,
        });
      }],
    ]);
    render(<AuditView />);
    await screen.findByText("kill");
    const rows = [...document.querySelectorAll("tbody tr")];
    expect(rows.map((r) => r.getAttribute("data-action"))).toEqual(["kill", "start", "login"]);
    expect(rows[0].querySelector('a[href="#/m/laptop/threads/01ARZ3NDEKTSV4RRFFQ69G5FAV"]')).toBeTruthy();
    expect(rows[0].textContent).toContain("alice's laptop");
    expect(rows[0].textContent).toContain("10.0.0.7");
    expect(rows[1].querySelector(".st-failed")!.textContent).toBe("502");
    expect(rows[1].textContent).toContain("unknown");
    expect(rows[0].textContent).toContain("1 min ago");
    expect(screen.getByText(/Entries 1–3 of 60, newest first/)).toBeTruthy();
    expect(params(f, "/api/gateway/audit")).toEqual({ limit: "50", offset: "0" });

    fireEvent.click(screen.getByTestId("older"));
    await act(async () => {});
    expect(params(f, "/api/gateway/audit").offset).toBe("50");
    fireEvent.change(screen.getByLabelText("action filter"), { target: { value: "kill" } });
    await act(async () => {});
    expect(params(f, "/api/gateway/audit")).toEqual({ action: "kill", limit: "50", offset: "0" });
    await screen.findByRole("option", { name: "laptop" });
    fireEvent.change(screen.getByLabelText("machine filter"), { target: { value: "laptop" } });
    fireEvent.change(screen.getByLabelText("since"), { target: { value: "2026-03-04" } });
    await act(async () => {});
    expect(params(f, "/api/gateway/audit")).toEqual({ action: "kill", machine: "laptop", since: new Date(2026, 2, 4).toISOString(), limit: "50", offset: "0" });
  });

  it("keeps its filters in the URL, filters by a token and by a range of days", async () => {
    window.location.hash = "#/audit?action=kill&until=2026-03-31&offset=50";
    const f = stubFetch([
      ["/api/gateway/endpoints", () => json(200, [])],
      ["/api/gateway/machines", () => json(200, { machines: [] })],
      ["/api/gateway/audit", () => json(200, { entries: [entry(1, { action: "kill", tokenId: "tok-7" })], total: 51 })],
    ]);
    render(<AuditView />);
    await screen.findByText("kill", { selector: "span" });
    expect(params(f, "/api/gateway/audit")).toEqual({ action: "kill", until: new Date(2026, 3, 1).toISOString(), limit: "50", offset: "50" });
    expect((screen.getByLabelText("until") as HTMLInputElement).value).toBe("2026-03-31");
    // A token's id in a row narrows the log to what that token did.
    fireEvent.click(document.querySelector('[data-token="tok-7"]')!);
    await act(async () => {});
    expect(params(f, "/api/gateway/audit")).toEqual({ action: "kill", token: "tok-7", until: new Date(2026, 3, 1).toISOString(), limit: "50", offset: "0" });
    expect(window.location.hash).toBe("#/audit?action=kill&token=tok-7&until=2026-03-31");
    expect(screen.getByTestId("token-filter").textContent).toContain("tok-7");
    fireEvent.click(screen.getByRole("button", { name: "Clear" }));
    await act(async () => {});
    expect(params(f, "/api/gateway/audit")).toEqual({ limit: "50", offset: "0" });
    expect(window.location.hash).toBe("#/audit");
  });

  it("ignores an action it does not know in the URL", () => {
    expect(auditFromHash("#/audit?action=explode&machine=m&offset=-5")).toEqual({ filters: { action: "", machine: "m", token: "", since: "", until: "" }, offset: 0 });
  });

  it("says when the gateway keeps no audit log", async () => {
    stubFetch([
      ["/api/gateway/endpoints", () => json(200, [])],
      ["/api/gateway/audit", () => json(503, { error: "no audit log: this gateway keeps nothing (no --data-dir or --database-url)" })],
    ]);
    render(<AuditView />);
    expect((await screen.findByTestId("no-audit")).textContent).toMatch(/keeps nothing/);
    expect(screen.queryByText(/Something went wrong/)).toBeNull();
  });
});
