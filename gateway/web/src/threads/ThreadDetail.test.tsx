import { act, cleanup, fireEvent, render, screen, within } from "@testing-library/react";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { json, stubFetch } from "../testutil/fetch";
import { SNAPSHOT_POLL_MS, ThreadDetail } from "./ThreadDetail";

// LiveSource is an EventSource whose events the test sends.
class LiveSource {
  static all: LiveSource[] = [];
  static CLOSED = 2;
  readyState = 1;
  onopen: (() => void) | null = null;
  onerror: (() => void) | null = null;
  listeners: Record<string, ((e: MessageEvent) => void)[]> = {};
  constructor(public url: string) {
    LiveSource.all.push(this);
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

const T0 = Date.UTC(2026, 0, 1, 10, 0, 0);
const start = (o: Record<string, unknown> = {}) => ({ type: "thread-start", threadId: "T", workflow: "unknown", prompt: "p", status: "running", startedAt: "", timestamp: T0, bundleHash: "BVNDLE0000000", head: "S000000000000", start: "S000000000000", source: "active", ...o });
const role = (r: string, ms: number, hash: string) => ({ type: "role", role: r, contentHash: "C000000000000", content: r + " wrote", meta: null, timestamp: T0 + ms, stateHash: hash, childThread: null });
const killed = { type: "workflow-result", returnCode: 130, content: "killed", timestamp: T0 + 9000, stateHash: "E000000000000" };

afterEach(() => {
  cleanup();
  vi.unstubAllGlobals();
  LiveSource.all = [];
  window.location.hash = "";
});
beforeEach(() => {
  localStorage.clear();
  vi.stubGlobal("EventSource", LiveSource);
});

/** open renders the page of thread T on laptop whose snapshot is records, and returns the fetch mock. */
function open(records: unknown[], more: [string, (url: string, method: string) => Response][] = []) {
  const f = stubFetch([...more, ["/api/clients/laptop/threads/T", () => json(200, { threadId: "T", records })]]);
  render(<ThreadDetail machine="laptop" id="T" />);
  return f;
}

describe("ThreadDetail", () => {
  it("pauses at once, without a question; kill still asks", async () => {
    const f = open([start(), role("a", 1000, "A000000000000")], [["/api/clients/laptop/threads/T/pause", () => json(200, { ok: true })]]);
    fireEvent.click(await screen.findByTestId("pause"));
    await vi.waitFor(() => expect(f.mock.calls.some(([u, i]) => String(u).endsWith("/threads/T/pause") && (i as RequestInit).method === "POST")).toBe(true));
    expect(screen.queryByRole("dialog")).toBeNull();
    fireEvent.click(screen.getByTestId("kill"));
    expect(screen.getByRole("dialog").textContent).toMatch(/Kill this thread/);
  });

  it("says a killed thread was killed when its stream ends, not that it completed", async () => {
    open([start(), role("a", 1000, "A000000000000")]);
    await screen.findByTestId("pause");
    const es = LiveSource.all[0];
    es.emit("record", start(), "1:0");
    es.emit("record", role("a", 1000, "A000000000000"), "2:0");
    es.emit("start", start({ status: "killed", head: "E000000000000" }), "2:0");
    es.emit("record", killed, "3:0");
    es.emit("done", { reason: "completed" }, "3:0");
    expect(screen.getByTestId("live-state").textContent).toBe("Stream ended: the thread was killed (return code 130).");
  });

  it("moves the head shown as the stream's start events say", async () => {
    open([start()]);
    const es = await vi.waitFor(() => LiveSource.all[0] ?? Promise.reject(new Error("no stream")));
    es.emit("record", start(), "1:0");
    es.emit("record", role("a", 1000, "A000000000000"), "2:0");
    es.emit("start", start({ head: "A000000000000" }), "2:0");
    expect(within(screen.getByTestId("head")).getByRole("link").textContent).toBe("A000000000000");
  });

  it("links the bundle to its source, not to the CAS viewer", async () => {
    open([start()]);
    const link = (await screen.findByText("BVNDLE0000000")).closest("a")!;
    expect(link.getAttribute("href")).toBe("#/m/laptop/bundles/BVNDLE0000000");
  });

  it("forks from the step that was clicked, by its number", async () => {
    const f = open([start({ status: "completed" }), role("planner", 1000, "A000000000000"), role("writer", 2000, "B000000000000"), role("writer", 3000, "D000000000000")], [
      ["/api/clients/laptop/threads/T/fork", () => json(201, { threadId: "F" })],
    ]);
    const second = (await screen.findAllByRole("article")).filter((a) => a.dataset.role === "writer")[1];
    expect(second.dataset.step).toBe("3");
    fireEvent.click(within(second).getByTestId("fork"));
    expect(screen.getByRole("dialog").textContent).toMatch(/up to step 3 \(writer\)/);
    fireEvent.click(screen.getByTestId("confirm"));
    await vi.waitFor(() => expect(window.location.hash).toBe("#/m/laptop/threads/F"));
    const call = f.mock.calls.find(([u]) => String(u).endsWith("/threads/T/fork"))!;
    expect(JSON.parse(String((call[1] as RequestInit).body))).toEqual({ step: 3 });
  });

  it("marks the step a deep link names, and each step links to itself", async () => {
    window.location.hash = "#/m/laptop/threads/T?step=2";
    open([start({ status: "completed" }), role("a", 1000, "A000000000000"), role("b", 4000, "B000000000000")]);
    const cards = await screen.findAllByRole("article");
    const b = cards.find((c) => c.dataset.step === "2")!;
    expect(b.classList.contains("current")).toBe(true);
    expect(b.id).toBe("step-2");
    expect(within(b).getByTitle("link to this step").getAttribute("href")).toBe("#/m/laptop/threads/T?step=2");
    expect(document.querySelector('.tl-row[data-step="2"]')!.classList.contains("current")).toBe(true);
  });

  it("draws each step on the timeline with its duration, also in the step list", async () => {
    open([start({ status: "completed" }), role("a", 1000, "A000000000000"), role("b", 4000, "B000000000000")]);
    await screen.findByTestId("timeline");
    const rows = [...document.querySelectorAll<HTMLElement>(".tl-row")];
    expect(rows.map((r) => [r.dataset.step, r.dataset.ms, r.querySelector(".tl-dur")!.textContent])).toEqual([
      ["1", "1000", "1.0 s"],
      ["2", "3000", "3.0 s"],
    ]);
    expect(rows.every((r) => r.querySelector(".tl-bar"))).toBe(true);
    expect(screen.getAllByTestId("step-duration").map((d) => d.textContent)).toEqual(["1.0 s", "3.0 s"]);
  });

  it("shows the debug log as time, tag and text, filtered by tag", async () => {
    open([start()]);
    const es = await vi.waitFor(() => LiveSource.all[0] ?? Promise.reject(new Error("no stream")));
    es.emit("info", { tag: "T9HQ2KHM", content: "thread T started", timestamp: T0 }, "1:10");
    es.emit("info", { tag: "model", content: "a long answer\nover lines", timestamp: T0 + 500 }, "1:20");
    es.emit("info", { tag: "model", content: "done", timestamp: T0 + 900 }, "1:30");
    const logBox = screen.getByTestId("debug-log");
    const lines = () => [...logBox.querySelectorAll<HTMLElement>(".log-line")];
    expect(lines().map((l) => [l.querySelector(".log-tag")!.textContent, l.querySelector(".log-text")!.textContent])).toEqual([
      ["started", "thread T started"],
      ["model", "a long answer\nover lines"],
      ["model", "done"],
    ]);
    expect(lines()[0].querySelector(".log-time")!.textContent).toMatch(/^\d\d:\d\d:\d\d$/);
    fireEvent.click(logBox.querySelector('input[data-log-tag="model"]')!);
    expect(lines().map((l) => l.dataset.tag)).toEqual(["model", "model"]);
    expect(logBox.querySelector("summary")!.textContent).toBe("Debug log (2 of 3 lines)");
    fireEvent.click(screen.getByTestId("log-all-tags"));
    expect(lines()).toHaveLength(3);
  });

  it("shows the model usage of each step and of the thread when the connector reports it", async () => {
    const used = { calls: 1, totalTokens: 1500, promptTokens: 1000, completionTokens: 500, models: ["m1"], costUsd: 0.25, unknownCalls: 0, unpricedCalls: 0 };
    const records = [start({ status: "completed" }), { ...role("a", 1000, "A000000000000"), usage: used }, role("b", 2000, "B000000000000")];
    stubFetch([["/api/clients/laptop/threads/T", () => json(200, { threadId: "T", records, usage: used })]]);
    render(<ThreadDetail machine="laptop" id="T" />);
    expect((await screen.findByTestId("thread-usage-total")).textContent).toContain("1,500 tokens (1,000 in, 500 out) · 1 call · m1 · $0.25");
    expect(screen.getAllByTestId("step-usage").map((u) => u.closest("article")!.dataset.step)).toEqual(["1"]);
    // The stream's records carry no usage (an older connector): the snapshot's still shows.
    const es = LiveSource.all[0];
    es.emit("record", start({ status: "completed" }), "1:0");
    es.emit("record", role("a", 1000, "A000000000000"), "2:0");
    es.emit("record", role("b", 2000, "B000000000000"), "3:0");
    expect(screen.getAllByTestId("step-usage")).toHaveLength(1);
  });

  it("shows no usage for a thread that called no model", async () => {
    const none = { calls: 0, promptTokens: 0, completionTokens: 0, totalTokens: 0, unknownCalls: 0, models: null, unpricedCalls: 0 };
    stubFetch([["/api/clients/laptop/threads/T", () => json(200, { threadId: "T", records: [start({ status: "completed" }), role("a", 1000, "A000000000000")], usage: none })]]);
    render(<ThreadDetail machine="laptop" id="T" />);
    await screen.findByTestId("timeline");
    expect(screen.queryByTestId("thread-usage-total")).toBeNull();
  });

  it("says pausing while the role finishes: Resume (which cancels the pause) and Kill on, Pause off", async () => {
    const f = open([start({ status: "pausing" }), role("a", 1000, "A000000000000")], [["/api/clients/laptop/threads/T/resume", () => json(200, { ok: true })]]);
    const badge = await vi.waitFor(() => document.querySelector<HTMLElement>("#thread-title .badge") ?? Promise.reject(new Error("no badge")));
    expect(badge.textContent).toBe("pausing");
    expect(badge.className).toContain("st-pausing");
    expect(badge.className).not.toContain("st-paused");
    expect(badge.title).toMatch(/finishes its step, then the thread pauses/);
    const pause = screen.getByTestId("pause");
    expect(pause.hasAttribute("disabled")).toBe(true);
    expect(pause.title).toMatch(/already asked for/);
    expect(screen.getByTestId("resume").hasAttribute("disabled")).toBe(false);
    expect(screen.getByTestId("kill").hasAttribute("disabled")).toBe(false);
    // Its role is still at work: the timeline has the step running.
    expect(document.querySelector(".tl-row.running")).toBeTruthy();
    fireEvent.click(screen.getByTestId("resume"));
    await vi.waitFor(() => expect(f.mock.calls.some(([u, i]) => String(u).endsWith("/threads/T/resume") && (i as RequestInit).method === "POST")).toBe(true));
  });

  it("shows what a waiting thread asks and takes the answer, then says who answered", async () => {
    const q = {
      threadId: "T", workflow: "review", role: "approver", question: "Ship it?", assignee: "", askedAt: new Date(T0 + 1000).toISOString(), deadline: null,
      questionHash: "QH", answered: false, schema: { type: "object", properties: { ok: { enum: ["yes", "no"] } } },
    };
    let status = "waiting";
    const f = stubFetch([
      ["/api/clients/laptop/threads/T/question", () => json(200, q)],
      ["/api/clients/laptop/threads/T/answer", () => {
        status = "running";
        return json(200, { threadId: "T", answeredBy: "me via gateway", answeredAt: "2026-03-01T11:00:00Z" });
      }],
      ["/api/clients/laptop/threads/T", () => json(200, { threadId: "T", records: [start({ status }), role("a", 1000, "A000000000000")] })],
    ]);
    render(<ThreadDetail machine="laptop" id="T" />);
    const panel = await screen.findByTestId("question");
    const badge = document.querySelector<HTMLElement>("#thread-title .badge")!;
    expect(badge.className).toContain("st-waiting");
    expect((await within(panel).findByTestId("question-assignee")).textContent).toBe("anyone");
    expect(within(panel).getByTestId("question-text").textContent).toBe("Ship it?");
    // The person's step is the one at work: on the timeline, running; Kill is offered, Pause not.
    expect(document.querySelector(".tl-row.running")).toBeTruthy();
    expect(screen.getByTestId("kill")).toBeTruthy();
    expect(screen.queryByTestId("pause")).toBeNull();
    fireEvent.click(await within(panel).findByText("yes"));
    // The thread is read again: it runs on, and the page still says who answered.
    await vi.waitFor(() => expect(document.querySelector("#thread-title .badge")!.textContent).toBe("running"));
    expect(screen.queryByTestId("question")).toBeNull();
    expect(screen.getByTestId("answered").textContent).toMatch(/^Answered by me via gateway/);
    const post = f.mock.calls.find(([u]) => String(u).endsWith("/answer"))!;
    expect(JSON.parse(String((post[1] as RequestInit).body))).toEqual({ answer: { ok: "yes" }, questionHash: "QH" });
  });

  it("draws each paused span as its own grey line, out of the steps' durations", async () => {
    open([start({ status: "completed" }), role("a", 1000, "A000000000000"), role("b", 8000, "B000000000000")]);
    await screen.findAllByTestId("step-duration");
    const es = LiveSource.all[0];
    es.emit("info", { tag: "pausing", content: "pause requested; role a finishes its step first", timestamp: T0 + 500 }, "1:10");
    es.emit("info", { tag: "paused", content: "paused after step 1", timestamp: T0 + 1010 }, "1:20");
    es.emit("info", { tag: "resumed", content: "resumed after 5s paused", timestamp: T0 + 6000 }, "1:30");
    const rows = [...document.querySelectorAll<HTMLElement>(".tl-row")];
    expect(rows.map((r) => (r.dataset.paused ? `paused ${r.dataset.ms}` : `#${r.dataset.step} ${r.dataset.ms}`))).toEqual(["#1 1000", "paused 4990", "#2 2000"]);
    const pausedRow = rows[1];
    expect(pausedRow.querySelector(".tl-pause")).toBeTruthy();
    expect(pausedRow.querySelector(".tl-bar")).toBeNull();
    expect(screen.getAllByTestId("step-duration").map((d) => d.textContent)).toEqual(["1.0 s", "2.0 s"]);
    expect(screen.getByTestId("timeline").querySelector("summary")!.textContent).toBe("Timeline (8.0 s, 5.0 s of it paused)");
  });

  it("shows a killed thread's cut-short step, its role, and its summary", async () => {
    const summary = "thread aborted: killed during step 2 (role write) by the dashboard";
    open([start({ status: "killed" }), role("plan", 1000, "A000000000000"), { ...killed, content: summary }]);
    const row = await vi.waitFor(() => document.querySelector<HTMLElement>('.tl-row[data-ended="killed"]') ?? Promise.reject(new Error("no killed step")));
    expect(row.dataset.step).toBe("2");
    expect(row.dataset.ms).toBe("8000");
    expect(row.querySelector(".tl-role")!.textContent).toBe("writekilled");
    expect(row.querySelector(".tl-bar.tl-ended")).toBeTruthy();
    expect(screen.getByTestId("result-summary").textContent).toBe(summary);
    expect(document.querySelector(".rec-result strong")!.textContent).toBe("■ killed: return code 130");
    // The step cards are the recorded ones only.
    expect(screen.getAllByTestId("step-duration")).toHaveLength(1);
  });

  it("reads the snapshot on a timer only while the live stream is not up", async () => {
    vi.useFakeTimers({ shouldAdvanceTime: true });
    try {
      const f = open([start(), role("a", 1000, "A000000000000")]);
      const snapshots = () => f.mock.calls.filter(([u]) => String(u).endsWith("/api/clients/laptop/threads/T")).length;
      await vi.waitFor(() => expect(snapshots()).toBe(1));
      // No stream yet: the snapshot is polled.
      await act(async () => void (await vi.advanceTimersByTimeAsync(SNAPSHOT_POLL_MS)));
      await vi.waitFor(() => expect(snapshots()).toBe(2));
      const es = LiveSource.all[0];
      act(() => es.onopen?.());
      await act(async () => void (await vi.advanceTimersByTimeAsync(10 * SNAPSHOT_POLL_MS)));
      expect(snapshots()).toBe(2);
      // The stream broke: polling again until it is back.
      act(() => es.onerror?.());
      await act(async () => void (await vi.advanceTimersByTimeAsync(SNAPSHOT_POLL_MS)));
      await vi.waitFor(() => expect(snapshots()).toBe(3));
    } finally {
      vi.useRealTimers();
    }
  });
});
