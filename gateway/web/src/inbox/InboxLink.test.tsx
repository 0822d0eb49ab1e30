import { act, cleanup, render, screen } from "@testing-library/react";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { setToken } from "../api";
import { App } from "../App";
import { inboxChanged } from "../answer/inboxEvents";
import { CHANGES_URL } from "../changes";
import { INBOX_COUNT_MS } from "./InboxLink";
import { FakeEventSource, json, stubFetch, urls } from "../testutil/fetch";

afterEach(() => {
  cleanup();
  vi.unstubAllGlobals();
});
beforeEach(() => {
  localStorage.clear();
  window.location.hash = "#/audit";
  vi.stubGlobal("EventSource", FakeEventSource);
  setToken("good");
});

/** signIn renders the app, signed in, with inbox answering the inbox's count. */
function signIn(inbox: () => Response) {
  return stubFetch([
    ["/api/gateway/login", () => json(200, { ok: true })],
    ["/api/gateway/endpoints", () => json(200, [])],
    ["/api/gateway/machines", () => json(200, { machines: [] })],
    ["/api/gateway/audit", () => json(200, { entries: [], total: 0 })],
    ["/api/gateway/inbox", inbox],
  ]);
}

describe("the top bar's Inbox", () => {
  it("counts the threads waiting, and counts again when an answer is taken", async () => {
    let total = 3;
    const f = signIn(() => json(200, { threads: [], total }));
    render(<App />);
    const link = await screen.findByTestId("inbox-link");
    expect(link.getAttribute("href")).toBe("#/inbox");
    expect((await screen.findByTestId("inbox-count")).firstChild!.textContent).toBe("3");
    const asked = urls(f).filter((u) => u.startsWith("/api/gateway/inbox")).length;
    total = 0;
    act(() => inboxChanged());
    await vi.waitFor(() => expect(screen.queryByTestId("inbox-count")).toBeNull());
    expect(urls(f).filter((u) => u.startsWith("/api/gateway/inbox")).length).toBe(asked + 1);
    expect(screen.getByTestId("inbox-link").textContent).toBe("Inbox");
  });

  it("counts again when the gateway says threads changed, not every INBOX_COUNT_MS, on the page's one change stream", async () => {
    vi.useFakeTimers({ shouldAdvanceTime: true });
    try {
      FakeEventSource.all = [];
      let total = 1;
      const f = signIn(() => json(200, { threads: [], total }));
      render(<App />);
      expect((await screen.findByTestId("inbox-count")).firstChild!.textContent).toBe("1");
      // The machine list and the count listen to the same stream.
      const streams = FakeEventSource.opened(CHANGES_URL);
      expect(streams).toHaveLength(1);
      const asked = () => urls(f).filter((u) => u.startsWith("/api/gateway/inbox")).length;
      act(() => streams[0].emit("hello", { topics: ["machines", "threads", "triggers"] }));
      await vi.waitFor(() => expect(asked()).toBe(2));
      for (let i = 0; i < 3; i++) await act(async () => void (await vi.advanceTimersByTimeAsync(INBOX_COUNT_MS)));
      expect(asked()).toBe(2);
      total = 4;
      act(() => streams[0].emit("threads", { machine: "laptop" }));
      await vi.waitFor(() => expect(screen.getByTestId("inbox-count").firstChild!.textContent).toBe("4"));
      expect(asked()).toBe(3);
    } finally {
      vi.useRealTimers();
    }
  });

  it("shows no count from a gateway without an inbox", async () => {
    signIn(() => json(404, { error: "not found" }));
    render(<App />);
    await screen.findByTestId("audit");
    await act(async () => {});
    expect(screen.getByTestId("inbox-link")).toBeTruthy();
    expect(screen.queryByTestId("inbox-count")).toBeNull();
  });
});
