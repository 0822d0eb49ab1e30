import { act, cleanup, render, renderHook, screen } from "@testing-library/react";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { api, ApiError, isUnreachable, useApi, useLive } from "./api";
import { GatewayBanner } from "./common/GatewayBanner";
import { MachineScope } from "./machines/scope";
import { SidebarView } from "./machines/Sidebar";
import { MachineList } from "./machines/machines";
import { check, reach, resetReach } from "./reach";
import { json, stubFetch } from "./testutil/fetch";
import { ThreadDetail } from "./threads/ThreadDetail";
import { ThreadList } from "./threads/ThreadList";

// A stream whose events and failures the test sends.
class Stream {
  static all: Stream[] = [];
  static CLOSED = 2;
  readyState = 0;
  onopen: (() => void) | null = null;
  onerror: ((e?: Event) => void) | null = null;
  listeners: Record<string, ((e: MessageEvent) => void)[]> = {};
  constructor(public url: string) {
    Stream.all.push(this);
  }
  addEventListener(type: string, fn: (e: MessageEvent) => void) {
    (this.listeners[type] ??= []).push(fn);
  }
  close() {
    this.readyState = 2;
  }
  emit(type: string, data: unknown, id = "") {
    const e = new MessageEvent(type, { data: JSON.stringify(data), lastEventId: id });
    act(() => this.listeners[type]?.forEach((fn) => fn(e)));
  }
}

/**
 * gatewayFetch is a gateway that answers with routes while up, and refuses
 * every connection (as fetch does: a TypeError) while down.
 */
function gatewayFetch(routes: [string, (url: string, method: string) => Response][]) {
  const g = { up: true };
  const answer = stubFetch(routes);
  vi.stubGlobal("fetch", vi.fn(async (url: string, init?: RequestInit) => {
    if (!g.up) throw new TypeError("Failed to fetch");
    return answer(url, init);
  }));
  return g;
}

const T0 = Date.now() - 60_000;
const start = (status: string) => ({ type: "thread-start", threadId: "T", workflow: "unknown", prompt: "p", status, startedAt: "", timestamp: T0, bundleHash: "BVNDLE0000000", head: "S000000000000", start: "S000000000000", source: "active" });
const machines: MachineList = { machines: [{ name: "laptop", status: "online", lastSeen: Date.now(), remembered: false }, { name: "ci-box", status: "online", lastSeen: Date.now(), remembered: false }] };
const loaded = <T,>(data: T) => ({ data, error: undefined, loading: false, reload: () => {} });

beforeEach(() => {
  localStorage.clear();
  resetReach();
  vi.stubGlobal("EventSource", Stream);
});
afterEach(() => {
  cleanup();
  vi.unstubAllGlobals();
  Stream.all = [];
  resetReach();
});

describe("the gateway's reachability", () => {
  it("is lost on a refused connection or a proxy's bare 502-504, and back on any answer of the gateway's own", async () => {
    let answer: () => Response = () => json(200, []);
    const g = gatewayFetch([["/api/", () => answer()]]);
    const before = Date.now();
    await api("/api/gateway/endpoints");
    expect(reach()).toMatchObject({ reachable: true });

    g.up = false;
    const refused = await api("/api/gateway/endpoints").catch((e: unknown) => e);
    expect(isUnreachable(refused)).toBe(true);
    expect((refused as ApiError).message).toMatch(/^the gateway does not answer/);
    expect(reach()).toMatchObject({ reachable: false });
    // The last contact is the last answer, before the refusal.
    expect(reach().lastContact).toBeGreaterThanOrEqual(before);
    expect(reach().since).toBeGreaterThanOrEqual(reach().lastContact!);

    g.up = true;
    answer = () => json(503, { error: "machine ci-box is offline", reason: "offline" });
    await api("/api/clients/ci-box/threads").catch(() => {});
    expect(reach().reachable).toBe(true);

    for (const status of [502, 503, 504]) {
      answer = () => new Response("<html><body>Bad Gateway</body></html>", { status, headers: { "Content-Type": "text/html" } });
      const e = await api("/api/gateway/endpoints").catch((err: unknown) => err);
      expect(isUnreachable(e), String(status)).toBe(true);
      expect(reach().reachable).toBe(false);
      answer = () => json(404, { error: "connector not found: x" });
      await api("/api/clients/x/threads").catch(() => {});
      expect(reach().reachable).toBe(true);
    }
  });

  it("shows a banner with the last contact, greys out every action and machines' presence, and recovers by itself", async () => {
    const g = gatewayFetch([
      ["/api/gateway/endpoints", () => json(200, [])],
      ["/api/clients/laptop/threads/T", () => json(200, { threadId: "T", records: [start("running")] })],
      ["/api/clients/laptop/workflows", () => json(200, { workflows: [{ name: "wf", hash: "H", timestamp: 1 }] })],
      ["/api/clients/laptop/threads", () => json(200, { threads: [], total: 0 })],
    ]);
    render(
      <>
        <GatewayBanner />
        <SidebarView current="laptop" open list={loaded(machines)} />
        <MachineScope machine="laptop" list={loaded(machines)}>
          <ThreadDetail machine="laptop" id="T" />
          <ThreadList machine="laptop" />
        </MachineScope>
      </>,
    );
    const pause = await screen.findByTestId("pause");
    expect(pause.hasAttribute("disabled")).toBe(false);
    expect(screen.getByTestId("kill").hasAttribute("disabled")).toBe(false);
    expect((await screen.findByTestId("run-open")).hasAttribute("disabled")).toBe(false);
    expect(document.querySelector('li[data-machine="laptop"]')!.getAttribute("data-status")).toBe("online");
    expect(screen.queryByTestId("gateway-unreachable")).toBeNull();

    // The gateway goes away: the next request finds out.
    g.up = false;
    await act(async () => check());
    const banner = await screen.findByTestId("gateway-unreachable");
    expect(banner.textContent).toMatch(/^Gateway unreachable — retrying\. Last contact /);
    expect(banner.querySelector("time")).toBeTruthy();
    for (const id of ["pause", "kill", "run-open"]) {
      const b = screen.getByTestId(id);
      expect(b.hasAttribute("disabled"), id).toBe(true);
      expect(b.getAttribute("title"), id).toMatch(/gateway does not answer/);
    }
    for (const li of document.querySelectorAll("li[data-machine]")) {
      expect(li.getAttribute("data-status")).toBe("unknown");
      expect(li.textContent).toMatch(/presence unknown/);
      expect(li.textContent).not.toMatch(/online/);
    }

    // It answers again: the probe finds out without anyone clicking.
    g.up = true;
    await vi.waitFor(() => expect(screen.queryByTestId("gateway-unreachable")).toBeNull(), { timeout: 10_000 });
    expect(screen.getByTestId("pause").hasAttribute("disabled")).toBe(false);
    expect(screen.getByTestId("kill").hasAttribute("disabled")).toBe(false);
    expect(screen.getByTestId("run-open").hasAttribute("disabled")).toBe(false);
    expect(document.querySelector('li[data-machine="laptop"]')!.getAttribute("data-status")).toBe("online");
  });

  it("asks the gateway when a live stream fails, and reopens the stream once it answers", async () => {
    const g = gatewayFetch([["/api/gateway/endpoints", () => json(200, [])]]);
    const { result } = renderHook(() => useLive("/api/clients/m/threads/T/live"));
    const first = Stream.all[0];
    act(() => {
      first.readyState = 1;
      first.onopen?.();
    });
    expect(result.current.connected).toBe(true);
    g.up = false;
    act(() => {
      first.readyState = 0; // the browser retries on its own
      first.onerror?.();
    });
    await vi.waitFor(() => expect(reach().reachable).toBe(false));
    g.up = true;
    // The probe's retry finds the gateway back, and the page does not wait for the browser's back-off.
    await vi.waitFor(() => expect(Stream.all.length).toBe(2), { timeout: 10_000 });
    expect(first.readyState).toBe(2);
    expect(Stream.all[1].url).toBe(first.url);
  });

  it("refreshes what a page loaded as soon as the gateway answers again", async () => {
    let n = 0;
    const g = gatewayFetch([
      ["/api/gateway/endpoints", () => json(200, [])],
      ["/api/thing", () => json(200, { n: ++n })],
    ]);
    const { result } = renderHook(() => useApi(() => api<{ n: number }>("/api/thing"), []));
    await vi.waitFor(() => expect(result.current.data).toEqual({ n: 1 }));
    g.up = false;
    await act(async () => result.current.reload());
    await vi.waitFor(() => expect(result.current.error).toBeTruthy());
    expect(result.current.data).toEqual({ n: 1 });
    g.up = true;
    await act(async () => check());
    await vi.waitFor(() => expect(result.current.data).toEqual({ n: 2 }));
  });

  it("repeats no debug-log line when a stream is opened again and replays the log", () => {
    gatewayFetch([]);
    const { result } = renderHook(() => useLive("/api/clients/m/threads/T/live"));
    const s = Stream.all[0];
    s.emit("info", { tag: "paused", content: "paused after step 1", timestamp: 1 }, "2:40");
    s.emit("info", { tag: "resumed", content: "resumed after 1s paused", timestamp: 2 }, "2:90");
    // A new stream starts from the log's beginning.
    s.emit("info", { tag: "paused", content: "paused after step 1", timestamp: 1 }, "2:40");
    s.emit("info", { tag: "resumed", content: "resumed after 1s paused", timestamp: 2 }, "2:90");
    s.emit("info", { tag: "model", content: "new", timestamp: 3 }, "2:120");
    expect(result.current.info.map((l) => JSON.parse(l).tag)).toEqual(["paused", "resumed", "model"]);
  });
});
