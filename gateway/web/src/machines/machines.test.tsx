import { act, cleanup, render, screen } from "@testing-library/react";
import { afterEach, describe, expect, it, vi } from "vitest";
import { CHANGES_URL } from "../changes";
import { FakeEventSource, json, stubFetch, urls } from "../testutil/fetch";
import { mergeMachines } from "./machines";
import { Sidebar } from "./Sidebar";

afterEach(() => {
  cleanup();
  vi.unstubAllGlobals();
});

describe("mergeMachines", () => {
  it("keeps every machine the gateway remembers, offline, with when it was last seen", () => {
    const out = mergeMachines(
      [
        { name: "laptop", status: "online", lastHeartbeat: 5000, version: "1.2.0" },
        { name: "pi", status: "offline", lastHeartbeat: 1000 },
      ],
      [
        { name: "pi", online: false, lastSeen: new Date(3000).toISOString() },
        { name: "old-box", online: false, firstSeen: new Date(0).toISOString(), lastSeen: new Date(2000).toISOString() },
        { name: "laptop", online: true, lastSeen: new Date(100).toISOString() },
      ],
    );
    expect(out).toEqual([
      { name: "laptop", status: "online", lastSeen: 5000, version: "1.2.0", remembered: false },
      { name: "old-box", status: "offline", lastSeen: 2000, remembered: true },
      { name: "pi", status: "offline", lastSeen: 3000, version: undefined, remembered: false },
    ]);
  });

  it("lists the endpoints alone when the gateway remembers nothing", () => {
    expect(mergeMachines([{ name: "b", status: "online" }, { name: "a", status: "offline" }], null).map((m) => `${m.name}:${m.status}`)).toEqual(["a:offline", "b:online"]);
  });
});

describe("Sidebar", () => {
  it("greys an offline machine and says when it was last seen", async () => {
    const seen = new Date(Date.now() - 3 * 3600_000).toISOString();
    stubFetch([
      ["/api/gateway/endpoints", () => json(200, [{ name: "laptop", status: "online", lastHeartbeat: Date.now() }])],
      ["/api/gateway/machines", () => json(200, { machines: [{ name: "laptop", online: true, lastSeen: seen }, { name: "ci-box", online: false, lastSeen: seen }] })],
    ]);
    render(<Sidebar current="ci-box" open={false} />);
    const off = await screen.findByText("ci-box");
    const li = off.closest("li")!;
    expect(li.getAttribute("data-status")).toBe("offline");
    expect(li.className).toContain("offline");
    expect(li.textContent).toContain("offline · last seen 3 h ago");
    expect(li.querySelector("a")!.getAttribute("aria-current")).toBe("page");
    expect(document.querySelector('li[data-machine="laptop"]')!.getAttribute("data-status")).toBe("online");
  });

  it("says when the gateway's store does not answer, and lists what it can", async () => {
    stubFetch([
      ["/api/gateway/endpoints", () => json(200, [{ name: "laptop", status: "online", lastHeartbeat: Date.now() }])],
      ["/api/gateway/machines", () => json(200, { machines: [{ name: "laptop", online: true }], degraded: "the gateway's store does not answer" })],
    ]);
    render(<Sidebar current={null} open={false} />);
    expect((await screen.findByText("laptop")).closest("li")!.getAttribute("data-status")).toBe("online");
    expect((await screen.findByRole("status")).textContent).toContain("store does not answer");
    expect(screen.queryByRole("alert")).toBeNull();
  });

  it("says nothing of the store while it answers", async () => {
    stubFetch([
      ["/api/gateway/endpoints", () => json(200, [{ name: "laptop", status: "online", lastHeartbeat: Date.now() }])],
      ["/api/gateway/machines", () => json(200, { machines: [{ name: "laptop", online: true }] })],
    ]);
    render(<Sidebar current={null} open={false} />);
    await screen.findByText("laptop");
    expect(screen.queryByRole("status")).toBeNull();
  });

  it("keeps working with a gateway that has no /machines (404)", async () => {
    stubFetch([["/api/gateway/endpoints", () => json(200, [{ name: "laptop", status: "online", lastHeartbeat: Date.now() }])]]);
    render(<Sidebar current={null} open={false} />);
    expect((await screen.findByText("laptop")).closest("li")!.getAttribute("data-status")).toBe("online");
    expect(screen.queryByRole("alert")).toBeNull();
  });

  it("loads again when the gateway says machines changed, and then shows since when an online machine is connected, not a heartbeat's age", async () => {
    vi.useFakeTimers({ shouldAdvanceTime: true });
    vi.stubGlobal("EventSource", FakeEventSource);
    FakeEventSource.all = [];
    try {
      let online = false;
      const f = stubFetch([
        ["/api/gateway/endpoints", () => json(200, online ? [{ name: "laptop", status: "online", lastHeartbeat: Date.now() - 60_000, connectedAt: Date.now() - 180_000 }] : [])],
        ["/api/gateway/machines", () => json(200, { machines: [{ name: "laptop", online, lastSeen: new Date(Date.now() - 60_000).toISOString() }] })],
      ]);
      const asked = () => urls(f).filter((u) => u === "/api/gateway/machines").length;
      render(<Sidebar current={null} open={false} />);
      const li = () => document.querySelector('li[data-machine="laptop"]')!;
      await vi.waitFor(() => expect(li().getAttribute("data-status")).toBe("offline"));
      const [stream] = FakeEventSource.opened(CHANGES_URL);
      act(() => stream.emit("hello", { topics: ["machines"] }));
      await vi.waitFor(() => expect(asked()).toBe(2));
      for (let i = 0; i < 3; i++) await act(async () => void (await vi.advanceTimersByTimeAsync(5000)));
      expect(asked()).toBe(2);
      online = true;
      act(() => stream.emit("machines", {}));
      await vi.waitFor(() => expect(li().getAttribute("data-status")).toBe("online"));
      expect(asked()).toBe(3);
      expect(li().querySelector(".mmeta")!.textContent).toMatch(/^online · connected 3 min ago$/);
      // The stream goes down: the list is polled again, and the heartbeat's age says how fresh it is.
      act(() => stream.fail(true));
      expect(li().querySelector(".mmeta")!.textContent).toMatch(/^online · \d+ (s|min) ago$/);
      await act(async () => void (await vi.advanceTimersByTimeAsync(5000)));
      await vi.waitFor(() => expect(asked()).toBe(4));
    } finally {
      vi.useRealTimers();
    }
  });
});
