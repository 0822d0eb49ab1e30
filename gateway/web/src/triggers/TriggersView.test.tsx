import { act, cleanup, fireEvent, render, screen, within } from "@testing-library/react";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { setToken } from "../api";
import { App } from "../App";
import { CHANGES_URL } from "../changes";
import { FakeEventSource, json, params, stubFetch, urls } from "../testutil/fetch";
import { CLI_EXAMPLES } from "./triggerForm";
import { TRIGGERS_POLL_MS, TriggersView } from "./TriggersView";

const writeText = vi.fn(async (_: string) => {});

afterEach(() => {
  cleanup();
  vi.unstubAllGlobals();
});
beforeEach(() => {
  localStorage.clear();
  window.location.hash = "#/triggers";
  writeText.mockReset();
  writeText.mockImplementation(async () => {});
  Object.defineProperty(navigator, "clipboard", { value: { writeText }, configurable: true });
});

const iso = (fromNow: number) => new Date(Date.now() + fromNow).toISOString();
const H = 3_600_000;
const URL_OF = (id: string) => `https://gw.example.com/hooks/${id}`;

const run = (id: string, state: string, o: Record<string, unknown> = {}) => ({
  id, trigger: "trg_web", machine: "laptop", workflow: "review", state, attempts: 1, createdAt: iso(-120_000), updatedAt: iso(-60_000), expiresAt: iso(23 * H + 60_000), ...o,
});
const webhook = (o: Record<string, unknown> = {}) => ({
  id: "trg_web", kind: "webhook", machine: "laptop", workflow: "review", url: URL_OF("trg_web"), prompt: "Review {{.issue.title}}", note: "GitHub issues",
  expire: "24h0m0s", paused: false, createdAt: iso(-24 * H), createdBy: "alice", lastFired: iso(-120_000), runs: [run("run_1", "started", { threadId: "T1" })], ...o,
});
const schedule = (o: Record<string, unknown> = {}) => ({
  id: "trg_cron", kind: "schedule", machine: "ci-box", workflow: "nightly", schedule: "0 2 * * *", timezone: "Europe/Paris", missed: "skip",
  nextAt: iso(3 * H + 60_000), expire: "1h30m0s", paused: false, createdAt: iso(-48 * H), ...o,
});

/** rowOf is the table row of a trigger. */
const rowOf = (id: string) => document.querySelector<HTMLElement>(`[data-testid="trigger-row"][data-trigger="${id}"]`)!;
/** bodyOf is the JSON body of the last request to a URL with that method. */
function bodyOf(f: ReturnType<typeof stubFetch>, url: string, method: string): unknown {
  const call = f.mock.calls.filter(([u, init]) => String(u) === url && (init?.method ?? "GET") === method).pop();
  return call && JSON.parse(String(call[1]?.body));
}
const calls = (f: ReturnType<typeof stubFetch>, url: string, method: string) => f.mock.calls.filter(([u, init]) => String(u) === url && (init?.method ?? "GET") === method).length;

describe("TriggersView", () => {
  it("lists each trigger: what fires it, its machine and workflow, its state, note and last run", async () => {
    const f = stubFetch([["/api/gateway/triggers", () => json(200, { triggers: [webhook(), schedule(), schedule({ id: "trg_off", paused: true, nextAt: undefined, timezone: undefined, note: "" })] })]]);
    render(<TriggersView />);
    const rows = await screen.findAllByTestId("trigger-row");
    expect(rows.map((r) => [r.dataset.trigger, r.dataset.kind, r.dataset.paused])).toEqual([
      ["trg_web", "webhook", "false"],
      ["trg_cron", "schedule", "false"],
      ["trg_off", "schedule", "true"],
    ]);
    expect(screen.getByRole("table").querySelector("caption")!.textContent).toBe("3 triggers, the oldest first.");
    expect([...screen.getByRole("table").querySelectorAll("thead th")].every((th) => th.getAttribute("scope") === "col")).toBe(true);

    const web = rowOf("trg_web");
    expect(web.querySelector('a[href="#/m/laptop/threads"]')!.textContent).toBe("laptop");
    expect(within(web).getByTestId("trigger-url").textContent).toBe(URL_OF("trg_web"));
    expect(within(web).getByTestId("trigger-state").textContent).toBe("active");
    expect(web.textContent).toContain("GitHub issues");
    expect(web.textContent).toContain("last fired 2 min ago");
    expect(web.querySelector(".last-run .badge.st-completed")!.textContent).toBe("started");
    expect(web.querySelector(".last-run")!.textContent).toContain("2 min ago");
    fireEvent.click(within(web).getByRole("button", { name: "Copy the URL of webhook trg_web" }));
    await vi.waitFor(() => expect(within(web).getByRole("status").textContent).toBe("Copied"));
    expect(writeText).toHaveBeenCalledWith(URL_OF("trg_web"));

    const cron = rowOf("trg_cron");
    expect(within(cron).getByTestId("trigger-schedule").textContent).toBe("0 2 * * *");
    expect(cron.textContent).toContain("Europe/Paris");
    expect(cron.textContent).toContain("next in 3 h");
    expect(cron.querySelector(".last-run")!.textContent).toBe("none yet");
    expect(within(cron).queryByTestId("trigger-url")).toBeNull();
    expect(within(cron).getByRole("button", { name: "Pause trigger trg_cron" })).toBeTruthy();

    const off = rowOf("trg_off");
    expect(within(off).getByTestId("trigger-state").textContent).toBe("paused");
    expect(off.textContent).toContain("UTC");
    expect(off.textContent).toContain("no next time while paused");
    expect(within(off).getByRole("button", { name: "Resume trigger trg_off" })).toBeTruthy();
    expect(within(off).queryByRole("button", { name: /^Pause/ })).toBeNull();
    expect(urls(f)).toEqual(["/api/gateway/triggers"]);
  });

  it("says when the clipboard cannot be used, and selects the value to copy by hand", async () => {
    writeText.mockImplementation(async () => {
      throw new Error("not allowed");
    });
    stubFetch([["/api/gateway/triggers", () => json(200, { triggers: [webhook()] })]]);
    render(<TriggersView />);
    fireEvent.click(await screen.findByRole("button", { name: "Copy the URL of webhook trg_web" }));
    await vi.waitFor(() => expect(within(rowOf("trg_web")).getByRole("status").textContent).toMatch(/^Selected: copy it/));
    expect(window.getSelection()!.toString()).toBe(URL_OF("trg_web"));
  });

  it("opens a trigger to its runs: each run's thread, error or what it waits for, filtered and paged", async () => {
    const runs = [
      run("run_q", "queued", { attempts: 0 }),
      run("run_s", "sending", { attempts: 2, error: "connection reset" }),
      run("run_t", "started", { threadId: "T9" }),
      run("run_f", "failed", { error: "workflow not found: review" }),
      run("run_e", "expired", { error: "" }),
      run("run_x", "exploded", { error: "a newer state" }),
    ];
    const f = stubFetch([
      ["/api/gateway/triggers/trg_web/runs", (u) => {
        const state = new URL(u, "http://x").searchParams.get("state");
        return json(200, state ? { runs: runs.filter((r) => r.state === state), total: 1 } : { runs, total: 45 });
      }],
      ["/api/gateway/triggers", () => json(200, { triggers: [webhook(), schedule()] })],
    ]);
    render(<TriggersView />);
    await screen.findAllByTestId("trigger-row");
    const toggle = within(rowOf("trg_web")).getByTestId("trigger-runs");
    expect(toggle.getAttribute("aria-expanded")).toBe("false");
    fireEvent.click(toggle);
    expect(toggle.getAttribute("aria-expanded")).toBe("true");
    expect(document.getElementById(toggle.getAttribute("aria-controls")!)).toBeTruthy();
    expect(window.location.hash).toBe("#/triggers?trigger=trg_web");
    const panel = screen.getByTestId("trigger-runs-panel");
    expect(panel.textContent).toContain("Review {{.issue.title}}");
    expect(panel.textContent).toContain("24h for laptop to be online");
    expect(panel.textContent).toContain("by alice");
    await vi.waitFor(() => expect(within(panel).getAllByTestId("run-row")).toHaveLength(6));
    expect(params(f, "/api/gateway/triggers/trg_web/runs")).toEqual({ limit: "20", offset: "0" });
    const row = (id: string) => panel.querySelector<HTMLElement>(`[data-run="${id}"]`)!;
    expect(row("run_q").dataset.state).toBe("queued");
    expect(row("run_q").querySelector(".outcome")!.textContent).toBe("waiting for laptop (gives up in 23 h)");
    expect(row("run_s").querySelector(".outcome")!.textContent).toBe("sending to laptop (gives up in 23 h) last try: connection reset");
    expect(row("run_s").textContent).toContain("2");
    expect(row("run_t").querySelector('a[href="#/m/laptop/threads/T9"]')!.textContent).toBe("T9");
    expect(row("run_f").querySelector(".outcome .error")!.textContent).toBe("workflow not found: review");
    expect(row("run_e").querySelector(".outcome .error")!.textContent).toBe("laptop was not online before the run expired");
    expect(row("run_x").querySelector(".outcome")!.textContent).toBe("a newer state");
    expect(row("run_q").textContent).toContain("2 min ago");

    fireEvent.click(within(panel).getByTestId("runs-older"));
    await act(async () => {});
    expect(params(f, "/api/gateway/triggers/trg_web/runs")).toEqual({ limit: "20", offset: "20" });
    fireEvent.change(within(panel).getByLabelText("run state filter of trigger trg_web"), { target: { value: "failed" } });
    await vi.waitFor(() => expect(within(panel).getAllByTestId("run-row")).toHaveLength(1));
    expect(params(f, "/api/gateway/triggers/trg_web/runs")).toEqual({ state: "failed", limit: "20", offset: "0" });
    expect(within(panel).queryByTestId("runs-older")).toBeNull();

    fireEvent.click(toggle);
    expect(screen.queryByTestId("trigger-runs-panel")).toBeNull();
    expect(window.location.hash).toBe("#/triggers");
  });

  it("opens the trigger the address names, saying when it has no runs", async () => {
    window.location.hash = "#/triggers?trigger=trg_cron";
    stubFetch([
      ["/api/gateway/triggers/trg_cron/runs", () => json(200, { runs: [], total: 0 })],
      ["/api/gateway/triggers", () => json(200, { triggers: [webhook(), schedule()] })],
    ]);
    render(<TriggersView />);
    const panel = await screen.findByTestId("trigger-runs-panel");
    expect(rowOf("trg_cron").nextElementSibling!.contains(panel)).toBe(true);
    expect((await within(panel).findByTestId("runs-empty")).textContent).toBe("No runs yet.");
    expect(panel.textContent).toContain("1h30m for ci-box to be online");
    expect(panel.textContent).toContain("Missed timesskipped");
    expect(panel.textContent).toContain("the trigger, machine, workflow and time, as JSON");
  });

  it("loads the list again on any trigger's change, and an opened trigger's runs on its own, without polling", async () => {
    vi.useFakeTimers({ shouldAdvanceTime: true });
    vi.stubGlobal("EventSource", FakeEventSource);
    FakeEventSource.all = [];
    try {
      window.location.hash = "#/triggers?trigger=trg_cron";
      const f = stubFetch([
        ["/api/gateway/triggers/trg_cron/runs", () => json(200, { runs: [], total: 0 })],
        ["/api/gateway/triggers", () => json(200, { triggers: [webhook(), schedule()] })],
      ]);
      const lists = () => calls(f, "/api/gateway/triggers", "GET");
      const runs = () => urls(f).filter((u) => u.startsWith("/api/gateway/triggers/trg_cron/runs")).length;
      render(<TriggersView />);
      await screen.findByTestId("runs-empty");
      const [stream] = FakeEventSource.opened(CHANGES_URL);
      act(() => stream.emit("hello", { topics: ["machines", "threads", "triggers"] }));
      await vi.waitFor(() => expect([lists(), runs()]).toEqual([2, 2]));
      for (let i = 0; i < 3; i++) await act(async () => void (await vi.advanceTimersByTimeAsync(TRIGGERS_POLL_MS)));
      expect([lists(), runs()]).toEqual([2, 2]);
      act(() => stream.emit("triggers", { trigger: "trg_web" }));
      await vi.waitFor(() => expect(lists()).toBe(3));
      expect(runs()).toBe(2);
      act(() => stream.emit("triggers", { trigger: "trg_cron" }));
      await vi.waitFor(() => expect([lists(), runs()]).toEqual([4, 3]));
    } finally {
      vi.useRealTimers();
    }
  });

  it("pauses and resumes at once, and shows the gateway's refusal", async () => {
    let paused = false;
    let refuse = false;
    const f = stubFetch([
      ["/api/gateway/triggers/trg_web/pause", () => {
        if (refuse) return json(404, { error: "no trigger trg_web" });
        paused = true;
        return json(200, { trigger: webhook({ paused }) });
      }],
      ["/api/gateway/triggers/trg_web/resume", () => {
        paused = false;
        return json(200, { trigger: webhook({ paused }) });
      }],
      ["/api/gateway/triggers", () => json(200, { triggers: [webhook({ paused })] })],
    ]);
    render(<TriggersView />);
    fireEvent.click(await screen.findByRole("button", { name: "Pause trigger trg_web" }));
    const resume = await screen.findByRole("button", { name: "Resume trigger trg_web" });
    expect(within(rowOf("trg_web")).getByTestId("trigger-state").textContent).toBe("paused");
    expect(calls(f, "/api/gateway/triggers/trg_web/pause", "POST")).toBe(1);
    fireEvent.click(resume);
    await screen.findByRole("button", { name: "Pause trigger trg_web" });
    expect(calls(f, "/api/gateway/triggers/trg_web/resume", "POST")).toBe(1);
    expect(within(rowOf("trg_web")).getByTestId("trigger-state").textContent).toBe("active");
    refuse = true;
    fireEvent.click(screen.getByRole("button", { name: "Pause trigger trg_web" }));
    expect((await within(rowOf("trg_web")).findByRole("alert")).textContent).toBe("no trigger trg_web");
  });

  it("removes a trigger only once asked, and shows the gateway's refusal", async () => {
    let gone = false;
    let refuse = true;
    const f = stubFetch([
      ["/api/gateway/triggers/trg_web", (_, method) => {
        if (method !== "DELETE") return json(405, { error: "method" });
        if (refuse) return json(503, { error: "the store does not answer: removing the trigger" });
        gone = true;
        return json(200, { removed: "trg_web" });
      }],
      ["/api/gateway/triggers", () => json(200, { triggers: gone ? [schedule()] : [webhook(), schedule()] })],
    ]);
    render(<TriggersView />);
    fireEvent.click(await screen.findByRole("button", { name: "Remove trigger trg_web" }));
    const dialog = screen.getByRole("dialog");
    expect(dialog.textContent).toMatch(/Remove the webhook trg_web that starts review on laptop\? Its runs are removed with it, and its URL refuses deliveries/);
    fireEvent.click(within(dialog).getByRole("button", { name: "Cancel" }));
    expect(screen.queryByRole("dialog")).toBeNull();
    expect(calls(f, "/api/gateway/triggers/trg_web", "DELETE")).toBe(0);

    fireEvent.click(screen.getByRole("button", { name: "Remove trigger trg_web" }));
    fireEvent.click(screen.getByTestId("confirm"));
    expect((await within(screen.getByRole("dialog")).findByRole("alert")).textContent).toBe("the store does not answer: removing the trigger");
    expect(screen.getAllByTestId("trigger-row")).toHaveLength(2);

    refuse = false;
    fireEvent.click(screen.getByTestId("confirm"));
    await vi.waitFor(() => expect(screen.getAllByTestId("trigger-row").map((r) => r.dataset.trigger)).toEqual(["trg_cron"]));
    expect(screen.queryByRole("dialog")).toBeNull();
    expect(calls(f, "/api/gateway/triggers/trg_web", "DELETE")).toBe(2);
  });

  it("creates a webhook and shows its URL and secret once, saying so", async () => {
    let made = false;
    const f = stubFetch([
      ["/api/gateway/triggers", (_, method) => {
        if (method === "POST") {
          made = true;
          return json(201, { trigger: webhook({ id: "trg_new", url: URL_OF("trg_new"), runs: undefined }), url: URL_OF("trg_new"), secret: "s3cret-value" });
        }
        return json(200, { triggers: made ? [webhook({ id: "trg_new", url: URL_OF("trg_new"), runs: undefined })] : [] });
      }],
    ]);
    render(<TriggersView />);
    await screen.findByTestId("triggers-empty");
    fireEvent.click(screen.getByTestId("new-trigger"));
    const dialog = screen.getByRole("dialog");
    expect(document.activeElement).toBe(within(dialog).getByLabelText("Machine"));
    expect(within(dialog).queryByLabelText("Schedule")).toBeNull();
    fireEvent.change(within(dialog).getByLabelText("Machine"), { target: { value: " laptop " } });
    fireEvent.change(within(dialog).getByLabelText("Workflow"), { target: { value: "review" } });
    fireEvent.change(within(dialog).getByLabelText("Prompt template"), { target: { value: "Review {{.issue.title}}" } });
    fireEvent.change(within(dialog).getByLabelText("Note"), { target: { value: "GitHub issues" } });
    fireEvent.click(within(dialog).getByTestId("trigger-submit"));

    const created = await screen.findByTestId("trigger-created");
    expect(screen.queryByRole("dialog")).toBeNull();
    expect(bodyOf(f, "/api/gateway/triggers", "POST")).toEqual({ machine: "laptop", workflow: "review", webhook: true, prompt: "Review {{.issue.title}}", note: "GitHub issues" });
    expect(created.dataset.trigger).toBe("trg_new");
    expect(created.textContent).toContain("it will not be shown again");
    expect(within(created).getByTestId("trigger-url").textContent).toBe(URL_OF("trg_new"));
    expect(within(created).getByTestId("trigger-secret").textContent).toBe("s3cret-value");
    fireEvent.click(within(created).getByRole("button", { name: "Copy the secret of webhook trg_new" }));
    await vi.waitFor(() => expect(writeText).toHaveBeenCalledWith("s3cret-value"));
    // The list is asked again: the new trigger shows, and its secret only in the note.
    await vi.waitFor(() => expect(screen.getAllByTestId("trigger-row").map((r) => r.dataset.trigger)).toEqual(["trg_new"]));
    expect(rowOf("trg_new").textContent).not.toContain("s3cret-value");
    fireEvent.click(within(created).getByTestId("trigger-created-done"));
    expect(screen.queryByTestId("trigger-created")).toBeNull();
    expect(screen.queryByText("s3cret-value")).toBeNull();
  });

  /** rotating is a gateway whose webhook trg_web answers a rotation with answer, the list showing what the last answer made of it. */
  function rotating(answer: (keepPrevious: string) => [number, { trigger?: ReturnType<typeof webhook>; secret?: string; error?: string }]) {
    let now = webhook();
    const f = stubFetch([
      ["/api/gateway/triggers/trg_web/secret", (_, method) => {
        if (method !== "POST") return json(405, { error: "method" });
        const [status, body] = answer((bodyOf(f, "/api/gateway/triggers/trg_web/secret", "POST") as { keepPrevious: string }).keepPrevious);
        if (body.trigger) now = body.trigger;
        return json(status, body);
      }],
      ["/api/gateway/triggers", () => json(200, { triggers: [now, schedule()] })],
    ]);
    return f;
  }
  const SECRET_URL = "/api/gateway/triggers/trg_web/secret";

  it("rotates a webhook's secret keeping the old one a day: the new one shows once, with until when the old one works", async () => {
    const kept = iso(24 * H - 60_000);
    const f = rotating((keep) => [200, { trigger: webhook({ previousSecretUntil: keep === "24h" ? kept : undefined }), secret: "n3w-secret" }]);
    render(<TriggersView />);
    fireEvent.click(await screen.findByRole("button", { name: "Rotate the secret of webhook trg_web" }));
    const dialog = screen.getByRole("dialog");
    expect(dialog.textContent).toMatch(/trg_web gets a new secret, shown once/);
    expect((within(dialog).getByLabelText("keeps working for 24 hours") as HTMLInputElement).checked).toBe(true);
    expect((within(dialog).getByLabelText("ends now (it may have leaked)") as HTMLInputElement).checked).toBe(false);
    expect(calls(f, SECRET_URL, "POST")).toBe(0);
    const lists = calls(f, "/api/gateway/triggers", "GET");
    fireEvent.click(within(dialog).getByTestId("confirm"));

    const shown = await screen.findByTestId("trigger-rotated");
    expect(screen.queryByRole("dialog")).toBeNull();
    expect(calls(f, SECRET_URL, "POST")).toBe(1);
    expect(bodyOf(f, SECRET_URL, "POST")).toEqual({ keepPrevious: "24h" });
    expect(shown.dataset.trigger).toBe("trg_web");
    expect(within(shown).getByRole("heading").textContent).toBe("New secret of webhook trg_web");
    expect(within(shown).getByRole("alert").textContent).toMatch(/^Copy the secret now: it will not be shown again\./);
    expect(within(shown).getByTestId("trigger-secret").textContent).toBe("n3w-secret");
    expect(within(shown).getByTestId("trigger-url").textContent).toBe(URL_OF("trg_web"));
    expect(within(shown).getByTestId("trigger-old-secret").textContent).toBe(`The old secret is still accepted until ${new Date(kept).toLocaleString()} (in 23 h): deliveries signed with either one are taken until then.`);
    // The secret shows at the top of the page, and takes the focus there from the row
    // (in an effect, which runs after the panel is in the page: waited for).
    await vi.waitFor(() => expect(document.activeElement).toBe(shown));
    fireEvent.click(within(shown).getByRole("button", { name: "Copy the secret of webhook trg_web" }));
    await vi.waitFor(() => expect(writeText).toHaveBeenCalledWith("n3w-secret"));

    // The list is asked again, and says until when the old secret works; the secret is only in the note.
    await vi.waitFor(() => expect(within(rowOf("trg_web")).queryByTestId("trigger-previous-until")).toBeTruthy());
    expect(calls(f, "/api/gateway/triggers", "GET")).toBeGreaterThan(lists);
    expect(rowOf("trg_web").textContent).not.toContain("n3w-secret");
    fireEvent.click(within(shown).getByTestId("trigger-rotated-done"));
    expect(screen.queryByTestId("trigger-rotated")).toBeNull();
    expect(document.body.textContent).not.toContain("n3w-secret");
  });

  it("rotates a secret that may have leaked, ending the old one at once", async () => {
    const f = rotating((keep) => [200, { trigger: webhook({ previousSecretUntil: keep === "24h" ? iso(24 * H) : undefined }), secret: "n3w-secret" }]);
    render(<TriggersView />);
    fireEvent.click(await screen.findByRole("button", { name: "Rotate the secret of webhook trg_web" }));
    const dialog = screen.getByRole("dialog");
    fireEvent.click(within(dialog).getByLabelText("ends now (it may have leaked)"));
    fireEvent.click(within(dialog).getByTestId("confirm"));
    const shown = await screen.findByTestId("trigger-rotated");
    expect(bodyOf(f, SECRET_URL, "POST")).toEqual({ keepPrevious: "0s" });
    expect(within(shown).getByTestId("trigger-secret").textContent).toBe("n3w-secret");
    expect(within(shown).getByTestId("trigger-old-secret").textContent).toBe("The old secret is refused from now on.");
    expect(shown.textContent).not.toMatch(/accepted until/);
    await vi.waitFor(() => expect(calls(f, "/api/gateway/triggers", "GET")).toBeGreaterThan(1));
    expect(within(rowOf("trg_web")).queryByTestId("trigger-previous-until")).toBeNull();

    // Asked again, the dialog offers the default once more.
    fireEvent.click(within(shown).getByTestId("trigger-rotated-done"));
    fireEvent.click(screen.getByRole("button", { name: "Rotate the secret of webhook trg_web" }));
    expect((within(screen.getByRole("dialog")).getByLabelText("keeps working for 24 hours") as HTMLInputElement).checked).toBe(true);
  });

  it("offers no rotation for a schedule, which has no secret", async () => {
    stubFetch([["/api/gateway/triggers", () => json(200, { triggers: [webhook(), schedule()] })]]);
    render(<TriggersView />);
    await screen.findAllByTestId("trigger-row");
    expect(within(rowOf("trg_web")).getAllByTestId("trigger-rotate")).toHaveLength(1);
    expect(within(rowOf("trg_cron")).queryByTestId("trigger-rotate")).toBeNull();
    expect(within(rowOf("trg_cron")).queryByRole("button", { name: /Rotate/ })).toBeNull();
  });

  it("shows the gateway's refusal of a rotation in the dialog, and no secret", async () => {
    const f = rotating(() => [503, { error: "the store does not answer: rotating the secret" }]);
    render(<TriggersView />);
    fireEvent.click(await screen.findByRole("button", { name: "Rotate the secret of webhook trg_web" }));
    const dialog = screen.getByRole("dialog");
    fireEvent.click(within(dialog).getByTestId("confirm"));
    expect((await within(dialog).findByRole("alert")).textContent).toBe("the store does not answer: rotating the secret");
    expect(screen.getByRole("dialog")).toBe(dialog);
    expect(screen.queryByTestId("trigger-rotated")).toBeNull();
    expect(screen.queryByTestId("trigger-secret")).toBeNull();
    expect(calls(f, SECRET_URL, "POST")).toBe(1);
    fireEvent.click(within(dialog).getByRole("button", { name: "Cancel" }));
    expect(screen.queryByRole("dialog")).toBeNull();
  });

  it("keeps a new trigger's secret on the page while another webhook's is rotated", async () => {
    let made = false;
    stubFetch([
      ["/api/gateway/triggers/trg_web/secret", () => json(200, { trigger: webhook({ previousSecretUntil: iso(24 * H) }), secret: "n3w-secret" })],
      ["/api/gateway/triggers", (_, method) => {
        if (method === "POST") {
          made = true;
          return json(201, { trigger: webhook({ id: "trg_new", url: URL_OF("trg_new"), runs: undefined }), url: URL_OF("trg_new"), secret: "s3cret-value" });
        }
        return json(200, { triggers: made ? [webhook(), webhook({ id: "trg_new", url: URL_OF("trg_new") })] : [webhook()] });
      }],
    ]);
    render(<TriggersView />);
    await screen.findByTestId("trigger-row");
    fireEvent.click(screen.getByTestId("new-trigger"));
    const form = screen.getByRole("dialog");
    fireEvent.change(within(form).getByLabelText("Machine"), { target: { value: "laptop" } });
    fireEvent.change(within(form).getByLabelText("Workflow"), { target: { value: "review" } });
    fireEvent.click(within(form).getByTestId("trigger-submit"));
    const created = await screen.findByTestId("trigger-created");
    fireEvent.click(screen.getByRole("button", { name: "Rotate the secret of webhook trg_web" }));
    fireEvent.click(screen.getByTestId("confirm"));
    const rotated = await screen.findByTestId("trigger-rotated");
    expect(within(created).getByTestId("trigger-secret").textContent).toBe("s3cret-value");
    expect(within(rotated).getByTestId("trigger-secret").textContent).toBe("n3w-secret");
    // Two notes, each named by its own heading.
    expect([created, rotated].map((r) => screen.getByRole("region", { name: r.querySelector("h2")!.textContent! }))).toEqual([created, rotated]);
    expect(screen.getAllByRole("region").filter((r) => r.classList.contains("trigger-created"))).toEqual([rotated, created]);
  });

  it("says in the list until when a webhook's previous secret is still accepted", async () => {
    const kept = iso(5 * H + 60_000);
    stubFetch([["/api/gateway/triggers", () => json(200, { triggers: [webhook({ previousSecretUntil: kept }), webhook({ id: "trg_old", previousSecretUntil: iso(-60_000) }), webhook({ id: "trg_one" }), schedule()] })]]);
    render(<TriggersView />);
    await screen.findAllByTestId("trigger-row");
    const note = within(rowOf("trg_web")).getByTestId("trigger-previous-until");
    expect(note.textContent).toBe(`previous secret accepted until ${new Date(kept).toLocaleString()} (in 5 h)`);
    expect(note.querySelector("time")!.getAttribute("dateTime")).toBe(kept);
    expect(note.classList.contains("muted")).toBe(true);
    // A time already past (the list is older than it) and a webhook with one secret say nothing.
    expect(within(rowOf("trg_old")).queryByTestId("trigger-previous-until")).toBeNull();
    expect(within(rowOf("trg_one")).queryByTestId("trigger-previous-until")).toBeNull();
    expect(within(rowOf("trg_cron")).queryByTestId("trigger-previous-until")).toBeNull();
  });

  it("creates a schedule, keeping the form and saying what the gateway refused", async () => {
    let tries = 0;
    const f = stubFetch([
      ["/api/gateway/triggers", (_, method) => {
        if (method !== "POST") return json(200, { triggers: [] });
        tries++;
        if (tries === 1) return json(400, { error: 'time zone "Europe/Pariss": unknown time zone' });
        return json(201, { trigger: schedule({ id: "trg_new" }) });
      }],
    ]);
    render(<TriggersView />);
    await screen.findByTestId("triggers-empty");
    fireEvent.click(screen.getByTestId("new-trigger"));
    const dialog = screen.getByRole("dialog");
    fireEvent.change(within(dialog).getByLabelText("Machine"), { target: { value: "ci-box" } });
    fireEvent.change(within(dialog).getByLabelText("Workflow"), { target: { value: "nightly" } });
    fireEvent.click(within(dialog).getByLabelText("a schedule"));
    expect(within(dialog).getByText(/\.scheduledFor/)).toBeTruthy();
    fireEvent.change(within(dialog).getByLabelText("Schedule"), { target: { value: "0 2 * * *" } });
    fireEvent.change(within(dialog).getByLabelText("Time zone"), { target: { value: "Europe/Pariss" } });
    fireEvent.change(within(dialog).getByLabelText("A time missed while no gateway ran"), { target: { value: "skip" } });
    fireEvent.change(within(dialog).getByLabelText("A run waits for an offline machine for"), { target: { value: "48h" } });
    fireEvent.click(within(dialog).getByTestId("trigger-submit"));
    expect((await within(dialog).findByTestId("trigger-error")).textContent).toBe('time zone "Europe/Pariss": unknown time zone');
    expect(bodyOf(f, "/api/gateway/triggers", "POST")).toEqual({ machine: "ci-box", workflow: "nightly", schedule: "0 2 * * *", timezone: "Europe/Pariss", missed: "skip", expire: "48h" });
    expect((within(dialog).getByLabelText("Schedule") as HTMLInputElement).value).toBe("0 2 * * *");
    expect(screen.queryByTestId("trigger-created")).toBeNull();

    fireEvent.change(within(dialog).getByLabelText("Time zone"), { target: { value: "Europe/Paris" } });
    fireEvent.click(within(dialog).getByTestId("trigger-submit"));
    const created = await screen.findByTestId("trigger-created");
    expect((bodyOf(f, "/api/gateway/triggers", "POST") as { timezone: string }).timezone).toBe("Europe/Paris");
    expect(created.textContent).toMatch(/Schedule trg_new created/);
    expect(created.textContent).toContain("nightly starts on ci-box at 0 2 * * * (Europe/Paris), next in 3 h");
    expect(within(created).queryByTestId("trigger-secret")).toBeNull();
  });

  it("sends nothing while the form lacks a machine, a workflow or a schedule", async () => {
    const f = stubFetch([["/api/gateway/triggers", () => json(200, { triggers: [] })]]);
    render(<TriggersView />);
    await screen.findByTestId("triggers-empty");
    fireEvent.click(screen.getByTestId("new-trigger"));
    const dialog = screen.getByRole("dialog");
    fireEvent.click(within(dialog).getByTestId("trigger-submit"));
    expect(within(dialog).getByTestId("trigger-error").textContent).toMatch(/Name the machine/);
    fireEvent.change(within(dialog).getByLabelText("Machine"), { target: { value: "laptop" } });
    fireEvent.change(within(dialog).getByLabelText("Workflow"), { target: { value: "review" } });
    fireEvent.click(within(dialog).getByLabelText("a schedule"));
    fireEvent.click(within(dialog).getByTestId("trigger-submit"));
    expect(within(dialog).getByTestId("trigger-error").textContent).toMatch(/Give the schedule/);
    await act(async () => {});
    expect(calls(f, "/api/gateway/triggers", "POST")).toBe(0);
    fireEvent.click(within(dialog).getByRole("button", { name: "Cancel" }));
    expect(screen.queryByRole("dialog")).toBeNull();
  });

  it("explains triggers when there are none, with the command that makes one", async () => {
    stubFetch([["/api/gateway/triggers", () => json(200, { triggers: [] })]]);
    render(<TriggersView />);
    const empty = await screen.findByTestId("triggers-empty");
    expect(empty.textContent).toMatch(/starts a thread of a workflow on a machine/);
    expect(empty.querySelector("pre")!.textContent).toBe(CLI_EXAMPLES.join("\n"));
    expect(CLI_EXAMPLES[0]).toMatch(/^uncaged-gateway trigger create --machine \S+ --workflow \S+ --webhook$/);
    expect(screen.queryByRole("table")).toBeNull();
    expect((screen.getByTestId("new-trigger") as HTMLButtonElement).disabled).toBe(false);
  });

  it.each([
    [503, "no triggers: this gateway keeps nothing (no --data-dir or --database-url)", /keeps no store.*--data-dir/],
    [404, "not found", /older than they are/],
  ])("says why a gateway has no triggers (%i)", async (status, error, want) => {
    stubFetch([["/api/gateway/triggers", () => json(status, { error })]]);
    render(<TriggersView />);
    expect((await screen.findByTestId("no-triggers")).textContent).toMatch(want);
    expect(screen.queryByTestId("triggers-empty")).toBeNull();
    expect((screen.getByTestId("new-trigger") as HTMLButtonElement).disabled).toBe(true);
  });

  it("shows any other failure with its message", async () => {
    stubFetch([["/api/gateway/triggers", () => json(500, { error: "the store does not answer: reading the triggers" })]]);
    render(<TriggersView />);
    expect((await screen.findByRole("alert")).textContent).toMatch(/the store does not answer: reading the triggers/);
    expect(screen.queryByTestId("no-triggers")).toBeNull();
  });
});

describe("the Triggers page in the app", () => {
  it("is linked from the top bar, and its form suggests the known machines and their workflows", async () => {
    vi.stubGlobal("EventSource", FakeEventSource);
    setToken("good");
    const f = stubFetch([
      ["/api/gateway/login", () => json(200, { ok: true })],
      ["/api/gateway/endpoints", () => json(200, [{ name: "laptop", status: "online" }])],
      ["/api/gateway/machines", () => json(200, { machines: [{ name: "laptop", online: true }, { name: "ci-box", online: false }] })],
      ["/api/gateway/inbox", () => json(200, { threads: [], total: 0 })],
      ["/api/gateway/triggers", () => json(200, { triggers: [webhook()] })],
      ["/api/clients/laptop/workflows", () => json(200, { workflows: [{ name: "review", hash: "H", timestamp: 1 }] })],
    ]);
    render(<App />);
    await screen.findByTestId("trigger-row");
    const link = screen.getByRole("link", { name: "Triggers" });
    expect(link.getAttribute("href")).toBe("#/triggers");
    expect(link.getAttribute("aria-current")).toBe("page");
    // The machine list is in: the sidebar names the offline machine too.
    await screen.findByRole("link", { name: /ci-box/ });
    fireEvent.click(screen.getByTestId("new-trigger"));
    const options = (id: string) => [...document.getElementById(id)!.querySelectorAll("option")].map((o) => o.value);
    expect(options("trigger-machines")).toEqual(["ci-box", "laptop"]);
    fireEvent.change(screen.getByLabelText("Machine"), { target: { value: "laptop" } });
    await vi.waitFor(() => expect(options("trigger-workflows")).toEqual(["review"]));
    expect(urls(f)).toContain("/api/clients/laptop/workflows");
  });
});
