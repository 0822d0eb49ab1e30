import { act, cleanup, fireEvent, render, screen } from "@testing-library/react";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { json, params, stubFetch } from "../testutil/fetch";
import { deliveriesFromHash, DeliveriesView } from "./DeliveriesView";

afterEach(() => {
  cleanup();
  vi.unstubAllGlobals();
});
beforeEach(() => {
  localStorage.clear();
  window.location.hash = "#/notifications";
});

const delivery = (id: number, o: Record<string, unknown> = {}) => ({
  id, receiver: "https://hooks.example.com", machine: "laptop", thread: "T" + id, workflow: "review", status: "waiting", updatedAt: "2026-03-01T10:00:00Z",
  state: "delivered", attempts: 1, lastCode: 204, createdAt: new Date(Date.now() - 120_000).toISOString(), finishedAt: new Date(Date.now() - 60_000).toISOString(), ...o,
});

describe("DeliveriesView", () => {
  it("lists each notification: receiver, thread, status, state, attempts, last result and when", async () => {
    const f = stubFetch([["/api/gateway/notifications", () => json(200, {
      enabled: true,
      total: 60,
      notifications: [
        delivery(2, { state: "pending", attempts: 3, lastCode: 502, lastError: "bad gateway", finishedAt: undefined, nextAt: new Date(Date.now() + 30_000).toISOString(), status: "failed" }),
        delivery(1),
      ],
    })]]);
    render(<DeliveriesView />);
    const rows = await screen.findAllByTestId("delivery-row");
    expect(rows.map((r) => [r.dataset.delivery, r.dataset.state])).toEqual([["2", "pending"], ["1", "delivered"]]);
    expect(rows[0].querySelector('a[href="#/m/laptop/threads/T2"]')).toBeTruthy();
    expect(rows[0].textContent).toContain("https://hooks.example.com");
    expect(rows[0].querySelector(".badge.st-failed")!.textContent).toBe("failed");
    expect(rows[0].querySelector(".last-result")!.textContent).toBe("HTTP 502: bad gateway");
    expect(rows[0].textContent).toContain("next in 30 s");
    expect(rows[1].querySelector(".badge.st-waiting")!.textContent).toBe("waiting");
    expect(rows[1].textContent).toContain("2 min ago");
    expect(rows[1].textContent).toContain("1 min ago");
    expect(screen.queryByTestId("notify-off")).toBeNull();
    expect(params(f, "/api/gateway/notifications")).toEqual({ limit: "50", offset: "0" });
    fireEvent.click(screen.getByTestId("older"));
    await act(async () => {});
    expect(params(f, "/api/gateway/notifications")).toEqual({ limit: "50", offset: "50" });
    fireEvent.change(screen.getByLabelText("state filter"), { target: { value: "failed" } });
    await act(async () => {});
    expect(params(f, "/api/gateway/notifications")).toEqual({ state: "failed", limit: "50", offset: "0" });
    expect(window.location.hash).toBe("#/notifications?state=failed");
  });

  it("says notifications are not configured, naming the flags", async () => {
    stubFetch([["/api/gateway/notifications", () => json(200, { enabled: false, total: 0, notifications: [] })]]);
    render(<DeliveriesView />);
    const off = await screen.findByTestId("notify-off");
    expect(off.textContent).toMatch(/not configured/);
    expect([...off.querySelectorAll("code")].map((c) => c.textContent)).toEqual(["--notify-url", "--notify-on", "--notify-secret-file"]);
    expect(screen.queryAllByTestId("delivery-row")).toHaveLength(0);
  });

  it("says when the gateway keeps no notifications", async () => {
    stubFetch([["/api/gateway/notifications", () => json(404, { error: "not found" })]]);
    render(<DeliveriesView />);
    expect((await screen.findByTestId("no-notifications")).textContent).toMatch(/keeps no notifications/);
  });

  it("ignores a state it does not know in the URL", () => {
    expect(deliveriesFromHash("#/notifications?state=exploded&offset=50")).toEqual({ state: "", offset: 50 });
    expect(deliveriesFromHash("#/notifications?state=failed")).toEqual({ state: "failed", offset: 0 });
  });
});
