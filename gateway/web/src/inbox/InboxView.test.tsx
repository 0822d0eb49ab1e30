import { act, cleanup, fireEvent, render, screen, within } from "@testing-library/react";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { json, params, stubFetch, urls } from "../testutil/fetch";
import { firstLines, inboxFromHash, InboxView } from "./InboxView";

afterEach(() => {
  cleanup();
  vi.unstubAllGlobals();
});
beforeEach(() => {
  localStorage.clear();
  window.location.hash = "#/inbox";
});

const waiting = (machine: string, threadId: string, o: Record<string, unknown> = {}) => ({
  machine, online: true, threadId, workflow: "review", role: "approver", question: "Ship it?", assignee: "", since: new Date(Date.now() - 3_600_000).toISOString(), deadline: null, ...o,
});

const QUESTION = {
  threadId: "T1", workflow: "review", role: "approver", question: "Ship it?", assignee: "", askedAt: "2026-03-01T10:00:00Z", deadline: null, questionHash: "QH",
  answered: false, schema: { type: "object", required: ["ok"], properties: { ok: { enum: ["yes", "no"] } } },
};

describe("InboxView", () => {
  it("lists each waiting thread: its machine (offline marked), thread link, role, question, who, since and deadline", async () => {
    const f = stubFetch([
      ["/api/gateway/inbox", () => json(200, {
        threads: [
          waiting("laptop", "T1", { question: "line one\nline two\nline three\nline four", assignee: "alice", deadline: new Date(Date.now() - 300_000).toISOString() }),
          waiting("ci-box", "T2", { online: false, deadline: new Date(Date.now() + 7_200_000).toISOString() }),
        ],
        total: 2,
      })],
    ]);
    render(<InboxView />);
    const rows = await screen.findAllByTestId("inbox-row");
    expect(rows.map((r) => [r.dataset.machine, r.dataset.thread, r.dataset.online])).toEqual([["laptop", "T1", "true"], ["ci-box", "T2", "false"]]);
    expect(rows[0].querySelector('a[href="#/m/laptop/threads/T1"]')).toBeTruthy();
    expect(rows[0].querySelector(".question-lines")!.textContent).toBe("line one\nline two\nline three …");
    expect(rows[0].textContent).toContain("alice");
    expect(rows[0].textContent).toContain("approver");
    expect(rows[0].textContent).toContain("1 h ago");
    expect(rows[0].querySelector("[data-overdue]")!.textContent).toBe("5 min overdue");
    expect(rows[0].querySelector(".overdue")).toBeTruthy();
    expect(within(rows[0]).queryByTestId("inbox-offline")).toBeNull();
    expect(within(rows[1]).getByTestId("inbox-offline")).toBeTruthy();
    expect(rows[1].textContent).toContain("anyone");
    expect(rows[1].querySelector("[data-overdue]")).toBeNull();
    expect(rows[1].textContent).toContain("in 2 h");
    expect(params(f, "/api/gateway/inbox")).toEqual({ limit: "50", offset: "0" });
  });

  it("answers an online machine's thread in the row, and cannot answer an offline one's", async () => {
    let answered = false;
    const f = stubFetch([
      ["/api/gateway/inbox", () => json(200, { threads: answered ? [waiting("ci-box", "T2", { online: false })] : [waiting("laptop", "T1"), waiting("ci-box", "T2", { online: false })], total: answered ? 1 : 2 })],
      ["/api/clients/laptop/threads/T1/question", () => json(200, QUESTION)],
      ["/api/clients/laptop/threads/T1/answer", () => {
        answered = true;
        return json(200, { threadId: "T1", answeredBy: "me via gateway", answeredAt: "2026-03-01T11:00:00Z" });
      }],
    ]);
    render(<InboxView />);
    const [online, offline] = await screen.findAllByTestId("inbox-row");
    fireEvent.click(within(offline).getByTestId("inbox-expand"));
    expect(screen.getByTestId("answer-off").textContent).toMatch(/offline/);
    expect((screen.getByTestId("answer-submit") as HTMLButtonElement).disabled).toBe(true);
    expect(urls(f).some((u) => u.includes("/api/clients/ci-box/"))).toBe(false);
    fireEvent.click(within(online).getByTestId("inbox-expand"));
    expect(screen.queryByTestId("answer-off")).toBeNull();
    fireEvent.click(await screen.findByText("yes"));
    // Taken: said, and the list asked again (the thread leaves it).
    await vi.waitFor(() => expect(screen.getAllByTestId("inbox-row")).toHaveLength(1));
    expect(screen.getByTestId("inbox-last").textContent).toMatch(/T1 on laptop: Answered by me via gateway/);
    const post = f.mock.calls.find(([u]) => String(u).endsWith("/answer"))!;
    expect(JSON.parse(String((post[1] as RequestInit).body))).toEqual({ answer: { ok: "yes" }, questionHash: "QH" });
  });

  it("filters by assignee and pages, keeping both in the URL", async () => {
    const f = stubFetch([["/api/gateway/inbox", (u) => {
      const off = Number(new URL(u, "http://x").searchParams.get("offset"));
      return json(200, { threads: [waiting("laptop", `T${off}`)], total: 60 });
    }]]);
    render(<InboxView />);
    await screen.findByTestId("inbox-row");
    fireEvent.click(screen.getByTestId("later"));
    await act(async () => {});
    expect(params(f, "/api/gateway/inbox")).toEqual({ limit: "50", offset: "50" });
    expect(window.location.hash).toBe("#/inbox?offset=50");
    fireEvent.change(screen.getByLabelText("assignee filter"), { target: { value: " bob " } });
    fireEvent.click(screen.getByRole("button", { name: "Filter" }));
    await act(async () => {});
    expect(params(f, "/api/gateway/inbox")).toEqual({ assignee: "bob", limit: "50", offset: "0" });
    expect(window.location.hash).toBe("#/inbox?assignee=bob");
    fireEvent.click(screen.getByRole("button", { name: "Clear" }));
    await act(async () => {});
    expect(params(f, "/api/gateway/inbox")).toEqual({ limit: "50", offset: "0" });
  });

  it("says when nothing waits, and when the gateway keeps no inbox", async () => {
    stubFetch([["/api/gateway/inbox", () => json(200, { threads: [], total: 0 })]]);
    render(<InboxView />);
    expect((await screen.findByTestId("inbox-empty")).textContent).toBe("Nothing is waiting.");
    cleanup();
    stubFetch([["/api/gateway/inbox", () => json(503, { error: "no inbox: this gateway keeps nothing (no --data-dir or --database-url)" })]]);
    render(<InboxView />);
    expect((await screen.findByTestId("no-inbox")).textContent).toMatch(/keeps nothing/);
  });

  it("reads its state from the URL and cuts questions to their first lines", () => {
    expect(inboxFromHash("#/inbox?assignee=al&offset=-3")).toEqual({ assignee: "al", offset: 0 });
    expect(inboxFromHash("#/inbox?offset=100")).toEqual({ assignee: "", offset: 100 });
    expect(firstLines("a\nb")).toBe("a\nb");
    expect(firstLines("a\nb\nc\nd", 2)).toBe("a\nb …");
  });
});
