import { act, cleanup, render, screen } from "@testing-library/react";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { ApiError } from "../api";
import { ErrorBox } from "../common/ErrorBox";
import { FakeEventSource, json, stubFetch, urls } from "../testutil/fetch";
import { ThreadDetail } from "./ThreadDetail";
import { ThreadList } from "./ThreadList";

const seen = "2026-01-02T03:04:05Z";
const summary = (threadId: string, o: Record<string, unknown> = {}) => ({
  threadId, workflow: "wf", hash: "H", startedAt: "2026-01-01T10:00:00Z", updatedAt: "2026-01-01T10:05:00Z", status: "completed", source: "cli", ...o,
});
const offlineError = json(503, { error: `machine ci-box is offline (last seen ${seen}): actions need it online`, reason: "offline" });

afterEach(() => {
  cleanup();
  vi.unstubAllGlobals();
});
beforeEach(() => {
  localStorage.clear();
  vi.stubGlobal("EventSource", FakeEventSource);
});

describe("an offline machine's threads", () => {
  it("lists the last-known threads, marked, without Run…", async () => {
    stubFetch([
      ["/api/clients/ci-box/threads", () => json(200, { threads: [summary("T1", { status: "running" }), summary("T2")], total: 2, offline: true, lastSeen: seen })],
      ["/api/clients/ci-box/workflows", () => offlineError.clone()],
    ]);
    render(<ThreadList machine="ci-box" />);
    await screen.findByText("T1");
    const banner = screen.getByTestId("offline-banner");
    expect(banner.textContent).toMatch(/last known/);
    expect(banner.textContent).toMatch(/ci-box is offline since/);
    expect(banner.querySelector("time")!.getAttribute("dateTime")).toBe(seen);
    expect(screen.queryByTestId("run-open")).toBeNull();
    expect(document.querySelectorAll('tr[data-offline="true"]').length).toBe(2);
    expect(screen.queryByText(/Something went wrong/)).toBeNull();
    // The workflow filter offers the workflows its threads ran.
    expect([...document.querySelectorAll('select[aria-label="workflow filter"] option')].map((o) => o.textContent)).toEqual(["all", "wf"]);
    await act(async () => {});
  });

  it("shows a note, not an error box, when the gateway keeps no memory", async () => {
    stubFetch([["/api/clients/ci-box/", () => json(503, { error: "connector offline: ci-box" })]]);
    render(<ThreadList machine="ci-box" />);
    expect((await screen.findByTestId("offline-banner")).textContent).toMatch(/keeps no memory/);
    expect(screen.queryByText(/Something went wrong/)).toBeNull();
    expect(screen.queryByTestId("run-open")).toBeNull();
  });

  it("shows a thread's last-known summary with no actions", async () => {
    const f = stubFetch([
      ["/api/clients/ci-box/", () => offlineError.clone()],
      ["/api/gateway/threads", () => json(200, {
        threads: [{ machine: "ci-box", threadId: "T9", workflow: "review", status: "running", prompt: "review **this**", startedAt: "2026-01-01T10:00:00Z", updatedAt: "2026-01-01T10:05:00Z", durationMs: 300000, steps: 3, returnCode: null, summary: "", online: false, lastSeen: seen }],
        total: 1,
      })],
    ]);
    render(<ThreadDetail machine="ci-box" id="T9" />);
    const known = await screen.findByTestId("known-thread");
    expect(known.textContent).toContain("review");
    expect(known.querySelector("strong")!.textContent).toBe("this");
    expect(known.textContent).toContain("5 min 0 s");
    expect(screen.getByTestId("offline-banner").textContent).toMatch(/ci-box is offline since/);
    expect(document.querySelector("section")!.getAttribute("data-status")).toBe("running");
    expect(screen.queryByTestId("kill")).toBeNull();
    expect(screen.queryByTestId("pause")).toBeNull();
    expect(screen.getByTestId("actions-offline").textContent).toMatch(/offline/);
    expect(urls(f).some((u) => u.startsWith("/api/gateway/threads?") && u.includes("machine=ci-box"))).toBe(true);
    expect(screen.queryByText(/Something went wrong/)).toBeNull();
  });

  it("shows what a waiting thread asked, as last seen, and no form to answer while its machine is offline", async () => {
    const f = stubFetch([
      ["/api/clients/ci-box/", () => offlineError.clone()],
      ["/api/gateway/threads", () => json(200, {
        threads: [{ machine: "ci-box", threadId: "T8", workflow: "review", status: "waiting", startedAt: "2026-01-01T10:00:00Z", updatedAt: "2026-01-01T10:05:00Z", online: false, lastSeen: seen,
          waiting: { role: "approver", question: "Ship **it**?", assignee: "alice", since: "2026-01-01T10:05:00Z" } }],
        total: 1,
      })],
    ]);
    render(<ThreadDetail machine="ci-box" id="T8" />);
    const panel = await screen.findByTestId("question");
    expect(panel.querySelector("strong")!.textContent).toBe("it");
    expect(screen.getByTestId("question-assignee").textContent).toBe("alice");
    expect(screen.getByTestId("answer-off").textContent).toMatch(/offline/);
    expect((screen.getByTestId("answer-submit") as HTMLButtonElement).disabled).toBe(true);
    expect(urls(f).some((u) => u.endsWith("/question"))).toBe(false);
  });

  it("says so when the gateway does not know the thread", async () => {
    stubFetch([
      ["/api/clients/ci-box/", () => offlineError.clone()],
      ["/api/gateway/threads", () => json(200, { threads: [], total: 0 })],
    ]);
    render(<ThreadDetail machine="ci-box" id="T404" />);
    expect((await screen.findByText(/no record of this thread/)).textContent).toBeTruthy();
  });
});

describe("ErrorBox", () => {
  it("says an offline machine is offline as a note, not as something gone wrong", () => {
    render(<ErrorBox error={new ApiError(503, `machine ci-box is offline (last seen ${seen})`, "offline")} />);
    expect(screen.getByTestId("offline-banner").textContent).toBe(`machine ci-box is offline (last seen ${seen}): what it holds shows once it is back online.`);
    expect(screen.queryByRole("alert")).toBeNull();
    cleanup();
    render(<ErrorBox error={new ApiError(502, "bad gateway")} />);
    expect(screen.getByRole("alert").textContent).toBe("Something went wrong: bad gateway");
  });
});
