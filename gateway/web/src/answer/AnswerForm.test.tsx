import { act, cleanup, fireEvent, render, screen, within } from "@testing-library/react";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { JsonSchema } from "../api";
import { json, stubFetch } from "../testutil/fetch";
import { QuestionPanel } from "./QuestionPanel";

afterEach(() => {
  cleanup();
  vi.unstubAllGlobals();
});
beforeEach(() => localStorage.clear());

const ASKED = "2026-03-01T10:00:00Z";

/** question is what the connector says thread T on laptop asks. */
const question = (schema: JsonSchema, o: Record<string, unknown> = {}) => ({
  threadId: "T", workflow: "review", role: "approver", question: "Ship **it**?\n\nThe diff is small.", schema, assignee: "alice",
  askedAt: ASKED, deadline: null, questionHash: "QH1", answered: false, answeredBy: "", answeredAt: null, ...o,
});

type Reply = (body: { answer: Record<string, unknown>; questionHash?: string }) => Response;

/**
 * ask renders the question panel of thread T on laptop; reply answers each
 * POST of an answer (after it, the question reads as asked, unless the
 * reply set it otherwise). It returns the fetch mock and the answers sent.
 */
function ask(q: ReturnType<typeof question>, reply: Reply, onAnswered = vi.fn()) {
  let current: Record<string, unknown> = q;
  const sent: unknown[] = [];
  const f = stubFetch([
    ["/api/clients/laptop/threads/T/question", () => json(200, current)],
    ["/api/clients/laptop/threads/T/answer", async (_u) => {
      const call = f.mock.calls[f.mock.calls.length - 1];
      const body = JSON.parse(String((call[1] as RequestInit).body));
      sent.push(body);
      const res = reply(body);
      if (res.status === 200 || res.status === 409) current = { ...q, answered: true, answer: body.answer, answeredBy: res.status === 200 ? "me via gateway" : "bob via gateway", answeredAt: "2026-03-01T11:00:00Z" };
      return res;
    }],
  ]);
  render(<QuestionPanel machine="laptop" id="T" onAnswered={onAnswered} />);
  return { f, sent, onAnswered };
}

const questionGets = (f: ReturnType<typeof stubFetch>) => f.mock.calls.filter(([u]) => String(u).endsWith("/question")).length;
const field = (name: string) => document.querySelector<HTMLElement>(`[data-field="${name}"]`)!;
const input = (name: string) => field(name).querySelector<HTMLInputElement & HTMLTextAreaElement>("input, textarea")!;

const FULL: JsonSchema = {
  type: "object",
  required: ["decision", "reason"],
  properties: {
    decision: { type: "string", enum: ["approve", "reject"], title: "Decision" },
    reason: { type: "string", description: "why, for the log" },
    title: { type: "string", maxLength: 80 },
    score: { type: "integer", minimum: 0 },
    urgent: { type: "boolean" },
    tags: { type: "array", items: { type: "string" } },
    meta: { type: "object" },
  },
};

describe("QuestionPanel and AnswerForm", () => {
  it("shows the question, who is asked, since when, and a field per property", async () => {
    ask(question(FULL, { deadline: new Date(Date.now() - 120_000).toISOString() }), () => json(200, {}));
    await screen.findByTestId("answer-form");
    expect(screen.getByTestId("question-text").querySelector("strong")!.textContent).toBe("it");
    expect(screen.getByTestId("question-assignee").textContent).toBe("alice");
    expect(screen.getByText(/2 min overdue/).getAttribute("data-overdue")).toBe("true");
    const kinds = [...document.querySelectorAll<HTMLElement>("[data-field]")].map((f) => [f.dataset.field, f.dataset.kind]);
    expect(kinds).toEqual([["decision", "enum"], ["reason", "text"], ["title", "string"], ["score", "integer"], ["urgent", "boolean"], ["tags", "json"], ["meta", "json"]]);
    // An enum: a button per value; the strings: a textarea (no maxLength) and an input (a short one).
    expect(within(field("decision")).getAllByTestId("answer-choice").map((b) => b.textContent)).toEqual(["approve", "reject"]);
    expect(input("reason").tagName).toBe("TEXTAREA");
    expect(input("title").tagName).toBe("INPUT");
    expect(input("title").type).toBe("text");
    expect(input("score").type).toBe("number");
    expect(input("urgent").type).toBe("checkbox");
    expect(input("tags").tagName).toBe("TEXTAREA");
    // Required fields are marked, the others not.
    const marked = [...document.querySelectorAll("[data-field]")].filter((f) => f.querySelector(".req")).map((f) => (f as HTMLElement).dataset.field);
    expect(marked).toEqual(["decision", "reason"]);
    expect(screen.getByText("why, for the log")).toBeTruthy();
  });

  it("sends every field as JSON with the question's hash, after saying where JSON is bad", async () => {
    const { f, sent, onAnswered } = ask(question(FULL), () => json(200, { threadId: "T", answeredBy: "me via gateway", answeredAt: "2026-03-01T11:00:00Z" }));
    await screen.findByTestId("answer-form");
    fireEvent.click(within(field("decision")).getByText("approve"));
    expect(within(field("decision")).getByText("approve").getAttribute("aria-pressed")).toBe("true");
    fireEvent.change(input("reason"), { target: { value: "looks right" } });
    fireEvent.change(input("title"), { target: { value: "ok" } });
    fireEvent.change(input("score"), { target: { value: "3" } });
    fireEvent.click(input("urgent"));
    fireEvent.change(input("tags"), { target: { value: '["a", "b"]' } });
    fireEvent.change(input("meta"), { target: { value: "{bad" } });
    fireEvent.click(screen.getByTestId("answer-submit"));
    // Bad JSON: said at its field, nothing sent.
    expect(within(field("meta")).getByTestId("field-error").textContent).toMatch(/^not valid JSON/);
    expect(input("meta").getAttribute("aria-invalid")).toBe("true");
    expect(sent).toHaveLength(0);
    fireEvent.change(input("meta"), { target: { value: '{"k": 1}' } });
    fireEvent.click(screen.getByTestId("answer-submit"));
    expect((await screen.findByTestId("answered")).textContent).toBe(`Answered by me via gateway at ${new Date("2026-03-01T11:00:00Z").toLocaleString()}.`);
    expect(sent).toEqual([{ answer: { decision: "approve", reason: "looks right", title: "ok", score: 3, urgent: true, tags: ["a", "b"], meta: { k: 1 } }, questionHash: "QH1" }]);
    expect(onAnswered).toHaveBeenCalledWith({ threadId: "T", answeredBy: "me via gateway", answeredAt: "2026-03-01T11:00:00Z" });
    // The question is read again: answered, it shows the answer, read-only, and no form.
    await vi.waitFor(() => expect(screen.getByTestId("answer-given")).toBeTruthy());
    expect(questionGets(f)).toBe(2);
    expect(JSON.parse(screen.getByTestId("answer-given").textContent!)).toEqual(sent[0] && (sent[0] as { answer: unknown }).answer);
    expect(screen.queryByTestId("answer-form")).toBeNull();
  });

  it("answers a lone enum with the button clicked", async () => {
    const { sent } = ask(question({ type: "object", required: ["ok"], properties: { ok: { enum: ["yes", "no"] } } }), () => json(200, { threadId: "T", answeredBy: "me via gateway", answeredAt: "2026-03-01T11:00:00Z" }));
    await screen.findByTestId("answer-form");
    expect(screen.queryByTestId("answer-submit")).toBeNull();
    fireEvent.click(screen.getByText("no"));
    await screen.findByTestId("answered");
    expect(sent).toEqual([{ answer: { ok: "no" }, questionHash: "QH1" }]);
  });

  it("takes a schema without properties as one JSON object", async () => {
    const { sent } = ask(question({}), () => json(200, { threadId: "T", answeredBy: "me via gateway", answeredAt: "2026-03-01T11:00:00Z" }));
    await screen.findByTestId("answer-form");
    const box = input("");
    expect(box.value).toBe("{}");
    fireEvent.change(box, { target: { value: "[1]" } });
    fireEvent.click(screen.getByTestId("answer-submit"));
    expect(within(field("")).getByTestId("field-error").textContent).toMatch(/must be a JSON object/);
    fireEvent.change(box, { target: { value: '{"go": true}' } });
    fireEvent.click(screen.getByTestId("answer-submit"));
    await screen.findByTestId("answered");
    expect(sent).toEqual([{ answer: { go: true }, questionHash: "QH1" }]);
  });

  it("shows a refused answer's faults at their fields and keeps what was typed", async () => {
    let release: () => void = () => {};
    const gate = new Promise<void>((r) => (release = r));
    const { sent } = ask(question(FULL), () => json(400, { error: "the answer does not fit the schema", fields: [{ path: "/reason", message: "must be at least 20 characters" }, { path: "", message: "missing property: decision" }] }));
    await screen.findByTestId("answer-form");
    // The stand-in answers at once; a slow one leaves the form disabled while it sends.
    vi.stubGlobal("fetch", vi.fn(async (u: string, i: RequestInit) => {
      await gate;
      sent.push(JSON.parse(String(i.body)));
      return json(400, { error: "the answer does not fit the schema", fields: [{ path: "/reason", message: "must be at least 20 characters" }, { path: "", message: "missing property: decision" }] });
    }));
    fireEvent.change(input("reason"), { target: { value: "short" } });
    fireEvent.click(screen.getByTestId("answer-submit"));
    expect(screen.getByTestId("answer-submit").hasAttribute("disabled")).toBe(true);
    expect(screen.getByTestId("answer-submit").textContent).toBe("Sending…");
    expect(document.querySelector("fieldset")!.disabled).toBe(true);
    await act(async () => release());
    expect((await within(field("reason")).findByTestId("field-error")).textContent).toBe("must be at least 20 characters");
    expect(field("title").querySelector("[data-testid=field-error]")).toBeNull();
    expect(screen.getByTestId("answer-error").textContent).toBe("missing property: decision");
    expect(input("reason").value).toBe("short");
    expect(screen.getByTestId("answer-submit").hasAttribute("disabled")).toBe(false);
    expect(sent).toEqual([{ answer: { reason: "short", urgent: false }, questionHash: "QH1" }]);
    expect(screen.queryByTestId("answered")).toBeNull();
  });

  it("says when someone else answered first, and shows their answer", async () => {
    const { f, onAnswered } = ask(question({ type: "object", properties: { ok: { type: "boolean" } } }), () => json(409, { error: "already answered by bob via gateway at 2026-03-01T11:00:00Z" }));
    await screen.findByTestId("answer-form");
    fireEvent.click(screen.getByTestId("answer-submit"));
    expect((await screen.findByTestId("answer-conflict")).textContent).toBe("already answered by bob via gateway at 2026-03-01T11:00:00Z");
    await vi.waitFor(() => expect(screen.getByTestId("answered").textContent).toMatch(/^Answered by bob via gateway/));
    expect(questionGets(f)).toBe(2);
    expect(screen.queryByTestId("answer-form")).toBeNull();
    expect(onAnswered).not.toHaveBeenCalled();
  });

  it("says so when the thread waits for nothing", async () => {
    stubFetch([["/api/clients/laptop/threads/T/question", () => json(404, { error: "thread T is not waiting" })]]);
    render(<QuestionPanel machine="laptop" id="T" />);
    expect((await screen.findByTestId("question-gone")).textContent).toMatch(/waits for no answer/);
  });

  it("disables the form, saying why, when told to", async () => {
    stubFetch([["/api/clients/laptop/threads/T/question", () => json(200, question({ type: "object", properties: { ok: { enum: ["yes", "no"] } } }))]]);
    render(<QuestionPanel machine="laptop" id="T" disabledWhy="not now" />);
    await screen.findByTestId("answer-form");
    expect(screen.getByTestId("answer-off").textContent).toMatch(/not now/);
    expect(screen.getAllByTestId("answer-choice").every((b) => (b as HTMLButtonElement).closest("fieldset")!.disabled)).toBe(true);
  });
});
