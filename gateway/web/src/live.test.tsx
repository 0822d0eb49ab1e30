import { act, renderHook } from "@testing-library/react";
import { afterEach, describe, expect, it, vi } from "vitest";
import { ApiError, onUnauthorized, TOKEN_KEY, useLive } from "./api";

// FakeEventSource stands in for the browser's EventSource.
class FakeEventSource {
  static all: FakeEventSource[] = [];
  static CLOSED = 2;
  readyState = 1;
  onopen: (() => void) | null = null;
  onerror: ((e?: Event) => void) | null = null;
  listeners: Record<string, ((e: MessageEvent) => void)[]> = {};
  closed = false;
  constructor(public url: string) {
    FakeEventSource.all.push(this);
  }
  addEventListener(type: string, fn: (e: MessageEvent) => void) {
    (this.listeners[type] ??= []).push(fn);
  }
  close() {
    this.closed = true;
    this.readyState = 2;
  }
  emit(type: string, data: unknown, id = "") {
    const e = new MessageEvent(type, { data: JSON.stringify(data), lastEventId: id });
    this.listeners[type]?.forEach((fn) => fn(e));
  }
}

describe("useLive", () => {
  afterEach(() => {
    vi.unstubAllGlobals();
    vi.useRealTimers();
    FakeEventSource.all = [];
  });

  it("streams records, stops on done, and reopens after a hard failure", () => {
    vi.useFakeTimers();
    vi.stubGlobal("EventSource", FakeEventSource);
    const { result } = renderHook(() => useLive("/api/clients/m/threads/T/live"));
    const es = FakeEventSource.all[0];
    expect(es.url).toBe("/api/clients/m/threads/T/live");
    act(() => {
      es.onopen?.();
      es.emit("record", { type: "thread-start", threadId: "T", status: "running" }, "1:0");
      es.emit("record", { type: "role", role: "a", content: "x" }, "2:5");
      es.emit("info", "debug line", "2:17");
    });
    expect(result.current.connected).toBe(true);
    expect(result.current.records).toHaveLength(2);
    expect(result.current.info).toEqual(["debug line"]);

    // The server answered an error: the browser gave up, so we reopen.
    act(() => {
      es.readyState = 2;
      es.onerror?.();
    });
    expect(result.current.error).toMatch(/reconnecting/);
    act(() => void vi.advanceTimersByTime(2500));
    const again = FakeEventSource.all[1];
    expect(again).toBeDefined();
    act(() => {
      again.emit("record", { type: "thread-start", threadId: "T", status: "running" }, "1:0");
      again.emit("record", { type: "role", role: "a", content: "x" }, "2:5");
      again.emit("record", { type: "workflow-result", returnCode: 0, content: "ok" }, "3:20");
      again.emit("done", { reason: "completed" }, "3:20");
    });
    expect(result.current.records.map((r) => r.type)).toEqual(["thread-start", "role", "workflow-result"]);
    expect(result.current.done).toBe("completed");
    expect(again.closed).toBe(true);
  });

  it("ends the session, without reconnecting, when the gateway says the token ended", () => {
    vi.useFakeTimers();
    vi.stubGlobal("EventSource", FakeEventSource);
    localStorage.setItem(TOKEN_KEY, "tok");
    const heard: ApiError[] = [];
    const off = onUnauthorized((e) => heard.push(e));
    const { result } = renderHook(() => useLive("/api/clients/m/threads/T/live"));
    const es = FakeEventSource.all[0];
    act(() => {
      es.onopen?.();
      es.onerror?.(new MessageEvent("error", { data: JSON.stringify({ error: "token revoked", reason: "revoked" }) }));
    });
    off();
    expect(es.closed).toBe(true);
    expect(result.current.error).toBe("token revoked");
    expect(heard.map((e) => [e.status, e.reason])).toEqual([[401, "revoked"]]);
    expect(localStorage.getItem(TOKEN_KEY)).toBeNull();
    act(() => void vi.advanceTimersByTime(60000));
    expect(FakeEventSource.all).toHaveLength(1);
  });

  it("reconnects after an error event that carries no refusal", () => {
    vi.useFakeTimers();
    vi.stubGlobal("EventSource", FakeEventSource);
    renderHook(() => useLive("/api/clients/m/threads/T/live"));
    const es = FakeEventSource.all[0];
    act(() => {
      es.readyState = 2;
      es.onerror?.(new Event("error"));
    });
    act(() => void vi.advanceTimersByTime(2500));
    expect(FakeEventSource.all).toHaveLength(2);
  });

  it("replaces the thread-start record with a start event, so its head follows the run", () => {
    vi.stubGlobal("EventSource", FakeEventSource);
    const { result } = renderHook(() => useLive("/api/clients/m/threads/T/live"));
    const es = FakeEventSource.all[0];
    act(() => {
      // Before record 1 a start event has nothing to replace.
      es.emit("start", { type: "thread-start", threadId: "T", head: "H0", status: "running" }, "0:0");
    });
    expect(result.current.records).toHaveLength(0);
    act(() => {
      es.emit("record", { type: "thread-start", threadId: "T", head: "H0", start: "H0", status: "running" }, "1:0");
      es.emit("record", { type: "role", role: "a", content: "x", stateHash: "H1" }, "2:0");
      es.emit("start", { type: "thread-start", threadId: "T", head: "H1", start: "H0", status: "paused" }, "2:0");
      es.emit("start", { type: "role", role: "not a start" }, "2:0");
    });
    const start = result.current.records[0];
    expect(start.type === "thread-start" && [start.head, start.status]).toEqual(["H1", "paused"]);
    expect(result.current.records.map((r) => r.type)).toEqual(["thread-start", "role"]);
  });
});
