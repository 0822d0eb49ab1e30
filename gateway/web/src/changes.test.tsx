import { act, cleanup, renderHook } from "@testing-library/react";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { ApiError, hintMatches, onUnauthorized, Push, TOKEN_KEY, useApi } from "./api";
import { CHANGES_URL, ChangeEvent, changeStream, pushes, subscribeChanges, useChangeStream } from "./changes";
import { answered, resetReach, unanswered } from "./reach";
import { FakeEventSource, json, stubFetch, urls } from "./testutil/fetch";

let unsubscribers: (() => void)[] = [];
/** listen subscribes to the change stream and returns the events it hears. */
function listen(): ChangeEvent[] {
  const heard: ChangeEvent[] = [];
  unsubscribers.push(subscribeChanges((e) => heard.push(e)));
  return heard;
}
const streams = () => FakeEventSource.opened(CHANGES_URL);
const current = () => streams()[streams().length - 1];

beforeEach(() => {
  localStorage.clear();
  FakeEventSource.all = [];
  vi.stubGlobal("EventSource", FakeEventSource);
});
afterEach(() => {
  cleanup();
  unsubscribers.forEach((off) => off());
  unsubscribers = [];
  vi.useRealTimers();
  vi.unstubAllGlobals();
  resetReach();
});

describe("the change stream", () => {
  it("is one stream for every subscriber, opened with the session's cookie and closed when the last one leaves", () => {
    listen();
    listen();
    const { result, unmount } = renderHook(() => useChangeStream());
    expect(streams()).toHaveLength(1);
    expect(FakeEventSource.all).toHaveLength(1);
    expect(current().init).toEqual({ withCredentials: true });
    expect(result.current).toEqual({ up: false, topics: [] });
    unsubscribers.shift()!();
    expect(current().readyState).not.toBe(FakeEventSource.CLOSED);
    unsubscribers.shift()!();
    expect(current().readyState).toBe(FakeEventSource.CLOSED);
    unmount();
    // A new subscriber opens a new stream.
    listen();
    expect(streams()).toHaveLength(2);
  });

  it("is up once hello names its topics, and hands every hint to every subscriber", () => {
    const a = listen();
    const b = listen();
    const { result } = renderHook(() => useChangeStream());
    expect(changeStream().up).toBe(false);
    act(() => current().emit("hello", { topics: ["machines", "threads", "weather"] }));
    expect(result.current).toEqual({ up: true, topics: ["machines", "threads"] });
    expect([pushes("machines"), pushes("threads"), pushes("triggers")]).toEqual([true, true, false]);
    current().emit("threads", { machine: "laptop" });
    current().emit("machines", {});
    current().emit("triggers", { trigger: "T1" });
    current().emit("triggers", {});
    const want: ChangeEvent[] = [
      { topic: "resync" },
      { topic: "threads", machine: "laptop" },
      { topic: "machines" },
      { topic: "triggers", trigger: "T1" },
      { topic: "triggers" },
    ];
    expect(a).toEqual(want);
    expect(b).toEqual(want);
  });

  it("ignores events it does not know", () => {
    const heard = listen();
    current().emit("hello", { topics: ["threads"] });
    current().emit("weather", { machine: "laptop" });
    current().emit("message", { topic: "threads", machine: "laptop" });
    expect(heard).toEqual([{ topic: "resync" }]);
  });

  it("is down after an error, asks whether the gateway still answers, and resyncs when the browser reconnects", async () => {
    const f = stubFetch([["/api/gateway/endpoints", () => json(200, [])]]);
    const heard = listen();
    const { result } = renderHook(() => useChangeStream());
    act(() => current().emit("hello", { topics: ["threads"] }));
    expect(result.current.up).toBe(true);
    act(() => current().fail(false));
    expect(result.current).toEqual({ up: false, topics: [] });
    expect(pushes("threads")).toBe(false);
    await vi.waitFor(() => expect(urls(f)).toContain("/api/gateway/endpoints"));
    // The browser reconnects by itself: the same stream says hello again.
    expect(streams()).toHaveLength(1);
    act(() => current().emit("hello", { topics: ["threads"] }));
    expect(result.current.up).toBe(true);
    expect(heard).toEqual([{ topic: "resync" }, { topic: "resync" }]);
  });

  it("opens a closed stream again 5 s later, twice as long each time up to 60 s, and from 5 s again once it was up", () => {
    vi.useFakeTimers();
    stubFetch([["/api/gateway/endpoints", () => json(200, [])]]);
    listen();
    for (const wait of [5_000, 10_000, 20_000, 40_000, 60_000, 60_000]) {
      const n = streams().length;
      current().fail(true);
      expect(current().readyState).toBe(FakeEventSource.CLOSED);
      vi.advanceTimersByTime(wait - 1);
      expect(streams(), `before ${wait} ms`).toHaveLength(n);
      vi.advanceTimersByTime(1);
      expect(streams(), `after ${wait} ms`).toHaveLength(n + 1);
    }
    current().emit("hello", { topics: ["threads"] });
    const n = streams().length;
    current().fail(true);
    vi.advanceTimersByTime(5_000);
    expect(streams()).toHaveLength(n + 1);
  });

  it("opens a closed stream at once when the gateway answers again", () => {
    vi.useFakeTimers();
    stubFetch([["/api/gateway/endpoints", () => json(200, [])]]);
    listen();
    current().fail(true);
    unanswered();
    expect(streams()).toHaveLength(1);
    answered();
    expect(streams()).toHaveLength(2);
  });

  it("ends the session, without opening the stream again, when the gateway says the credential ended", () => {
    vi.useFakeTimers();
    localStorage.setItem(TOKEN_KEY, "tok");
    const refusals: ApiError[] = [];
    const off = onUnauthorized((e) => refusals.push(e));
    listen();
    current().emit("hello", { topics: ["threads"] });
    current().fail(true, new MessageEvent("error", { data: JSON.stringify({ error: "token revoked", reason: "revoked" }) }));
    off();
    expect(refusals.map((e) => [e.status, e.reason])).toEqual([[401, "revoked"]]);
    expect(localStorage.getItem(TOKEN_KEY)).toBeNull();
    expect(changeStream().up).toBe(false);
    vi.advanceTimersByTime(120_000);
    expect(streams()).toHaveLength(1);
  });

  it("is never up where there is no EventSource", () => {
    vi.stubGlobal("EventSource", undefined);
    const heard = listen();
    expect(changeStream()).toEqual({ up: false, topics: [] });
    expect(heard).toEqual([]);
  });
});

describe("hintMatches", () => {
  it("matches a hint of the push's topic, for its machine or trigger when it names one", () => {
    const laptop: Push = { topic: "threads", machine: "laptop" };
    expect(hintMatches(laptop, { topic: "threads", machine: "laptop" })).toBe(true);
    expect(hintMatches(laptop, { topic: "threads", machine: "ci-box" })).toBe(false);
    expect(hintMatches(laptop, { topic: "machines" })).toBe(false);
    expect(hintMatches({ topic: "threads" }, { topic: "threads", machine: "ci-box" })).toBe(true);
    expect(hintMatches({ topic: "triggers", trigger: "T1" }, { topic: "triggers", trigger: "T2" })).toBe(false);
    // A hint that does not say which trigger may be about any.
    expect(hintMatches({ topic: "triggers", trigger: "T1" }, { topic: "triggers" })).toBe(true);
  });
});

describe("useApi with push", () => {
  /** counter is a load that answers 1, 2, 3…, and how many times it was called. */
  function counter() {
    let n = 0;
    return vi.fn(async () => ++n);
  }
  /** wait lets ms go by, a second at a time: React renders (and a poll loads) after each. */
  const wait = async (ms: number) => {
    for (let left = ms; left > 0; left -= 1000) await act(async () => void (await vi.advanceTimersByTimeAsync(Math.min(1000, left))));
  };
  const flush = () => act(async () => {});

  it("does not poll while the stream pushes its topic, and loads again on a hint for its machine only", async () => {
    vi.useFakeTimers({ shouldAdvanceTime: true });
    const load = counter();
    const { result } = renderHook(() => useApi(load, [], 1000, { topic: "threads", machine: "laptop" }));
    await vi.waitFor(() => expect(result.current.data).toBe(1));
    act(() => current().emit("hello", { topics: ["machines", "threads"] }));
    await vi.waitFor(() => expect(result.current.data).toBe(2));
    await wait(10_000);
    expect(load).toHaveBeenCalledTimes(2);
    act(() => current().emit("threads", { machine: "ci-box" }));
    act(() => current().emit("machines", {}));
    await flush();
    expect(load).toHaveBeenCalledTimes(2);
    act(() => current().emit("threads", { machine: "laptop" }));
    await vi.waitFor(() => expect(result.current.data).toBe(3));
    await wait(5_000);
    expect(load).toHaveBeenCalledTimes(3);
  });

  it("loads once more when the stream (re)opens", async () => {
    const load = counter();
    const { result } = renderHook(() => useApi(load, [], undefined, { topic: "machines" }));
    await vi.waitFor(() => expect(result.current.data).toBe(1));
    act(() => current().emit("hello", { topics: ["machines"] }));
    await vi.waitFor(() => expect(result.current.data).toBe(2));
    act(() => current().fail(false));
    await flush();
    expect(load).toHaveBeenCalledTimes(2);
    act(() => current().emit("hello", { topics: ["machines"] }));
    await vi.waitFor(() => expect(result.current.data).toBe(3));
    await flush();
    expect(load).toHaveBeenCalledTimes(3);
  });

  it("polls while the stream is not up, and again once it goes down", async () => {
    vi.useFakeTimers({ shouldAdvanceTime: true });
    stubFetch([["/api/gateway/endpoints", () => json(200, [])]]);
    const load = counter();
    renderHook(() => useApi(load, [], 1000, { topic: "threads" }));
    await vi.waitFor(() => expect(load).toHaveBeenCalledTimes(1));
    await wait(3_000);
    expect(load.mock.calls.length).toBeGreaterThanOrEqual(3);
    act(() => current().emit("hello", { topics: ["threads"] }));
    await flush();
    const up = load.mock.calls.length;
    await wait(5_000);
    expect(load).toHaveBeenCalledTimes(up);
    act(() => current().fail(true));
    await wait(3_000);
    expect(load.mock.calls.length).toBeGreaterThanOrEqual(up + 2);
  });

  it("keeps polling when the hello does not name every topic it reloads on", async () => {
    vi.useFakeTimers({ shouldAdvanceTime: true });
    const loadTriggers = counter();
    const loadFleet = counter();
    renderHook(() => useApi(loadTriggers, [], 1000, { topic: "triggers" }));
    renderHook(() => useApi(loadFleet, [], 1000, [{ topic: "threads" }, { topic: "machines" }]));
    act(() => current().emit("hello", { topics: ["threads"] }));
    await flush();
    const [t, f] = [loadTriggers.mock.calls.length, loadFleet.mock.calls.length];
    await wait(3_000);
    expect(loadTriggers.mock.calls.length).toBeGreaterThanOrEqual(t + 2);
    expect(loadFleet.mock.calls.length).toBeGreaterThanOrEqual(f + 2);
  });

  it("makes one load at a time of a burst of hints, and one more for the hints that came during it", async () => {
    const pending: ((n: number) => void)[] = [];
    let running = 0;
    let most = 0;
    const load = vi.fn(
      () =>
        new Promise<number>((resolve) => {
          running++;
          most = Math.max(most, running);
          pending.push((n) => {
            running--;
            resolve(n);
          });
        }),
    );
    const { result } = renderHook(() => useApi(load, [], undefined, { topic: "threads" }));
    await act(async () => pending.shift()!(1));
    await vi.waitFor(() => expect(result.current.data).toBe(1));
    for (let i = 0; i < 5; i++) await act(async () => current().emit("threads", { machine: `m${i}` }));
    expect(load).toHaveBeenCalledTimes(2);
    await act(async () => pending.shift()!(2));
    await vi.waitFor(() => expect(load).toHaveBeenCalledTimes(3));
    await act(async () => pending.shift()!(3));
    await vi.waitFor(() => expect(result.current.data).toBe(3));
    await flush();
    expect(load).toHaveBeenCalledTimes(3);
    expect(most).toBe(1);
  });

  it("opens no stream for a view that reloads on no hint", async () => {
    const load = counter();
    renderHook(() => useApi(load, [], 1000));
    await vi.waitFor(() => expect(load).toHaveBeenCalled());
    expect(streams()).toHaveLength(0);
  });
});
