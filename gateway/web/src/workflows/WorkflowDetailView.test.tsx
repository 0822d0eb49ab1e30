import { cleanup, fireEvent, render, screen, within } from "@testing-library/react";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { WorkflowDetailView } from "./WorkflowDetailView";

const json = (status: number, body: unknown) => new Response(JSON.stringify(body), { status, headers: { "Content-Type": "application/json" } });

afterEach(() => {
  cleanup();
  vi.unstubAllGlobals();
});

describe("WorkflowDetailView history", () => {
  beforeEach(() => localStorage.clear());
  const OLD = "ABCDEFGHJKMNP", CUR = "QRSTVWXYZ0123";

  it("makes an earlier version current after confirming, shows the API's error, and reloads on success", async () => {
    let current = CUR;
    let fail = true;
    const posts: unknown[] = [];
    const f = vi.fn(async (url: string, init?: RequestInit) => {
      if (url === "/api/clients/laptop/workflows/wf" && (!init?.method || init.method === "GET"))
        return json(200, {
          name: "wf", hash: current, timestamp: 2000, descriptor: null,
          history: current === CUR ? [{ hash: OLD, timestamp: 1000 }] : [{ hash: CUR, timestamp: 2000 }],
        });
      if (url === "/api/clients/laptop/workflows/wf/rollback" && init?.method === "POST") {
        posts.push(JSON.parse(init.body as string));
        if (fail) return json(400, { error: `bundle file not found for hash ${OLD}` });
        current = OLD;
        return json(200, { name: "wf", hash: OLD, timestamp: 1000 });
      }
      return json(404, { error: "unexpected " + url });
    });
    vi.stubGlobal("fetch", f);
    render(<WorkflowDetailView machine="laptop" name="wf" />);
    const item = await screen.findByText(OLD);
    const li = item.closest("li")!;
    fireEvent.click(within(li as HTMLElement).getByRole("button", { name: "Make current" }));
    const dialog = screen.getByRole("dialog");
    expect(dialog.textContent).toContain(OLD);
    fireEvent.click(within(dialog).getByTestId("confirm"));
    expect((await within(dialog).findByRole("alert")).textContent).toBe(`bundle file not found for hash ${OLD}`);
    expect(posts).toEqual([{ hash: OLD }]);
    fail = false;
    fireEvent.click(within(dialog).getByTestId("confirm"));
    await screen.findByText(CUR, { selector: "li .mono" });
    expect(screen.queryByRole("dialog")).toBeNull();
    expect(document.querySelector(".kv dd.mono")!.textContent).toBe(OLD);
    expect(posts).toEqual([{ hash: OLD }, { hash: OLD }]);
  });

  it("offers no button for a history entry with the current bundle", async () => {
    vi.stubGlobal("fetch", vi.fn(async () => json(200, { name: "wf", hash: CUR, timestamp: 2, descriptor: null, history: [{ hash: CUR, timestamp: 1 }] })));
    render(<WorkflowDetailView machine="laptop" name="wf" />);
    await screen.findByText(/same bundle as the current version/);
    expect(screen.queryByRole("button", { name: "Make current" })).toBeNull();
  });
});

describe("WorkflowDetailView version link", () => {
  const OLD = "ABCDEFGHJKMNP", CUR = "QRSTVWXYZ0123";
  const desc = (role: string) => ({ description: role + " flow", roles: { [role]: { description: "the " + role } }, graph: { edges: [] } });
  beforeEach(() => localStorage.clear());
  afterEach(() => {
    window.location.hash = "";
  });

  it("shows the version the URL names, with its own roles, and follows the URL to the current one", async () => {
    const urls: string[] = [];
    vi.stubGlobal("fetch", vi.fn(async (url: string) => {
      urls.push(url);
      if (url === "/api/clients/laptop/workflows/wf") return json(200, { name: "wf", hash: CUR, timestamp: 2000, descriptor: desc("writer"), history: [{ hash: OLD, timestamp: 1000 }] });
      if (url === `/api/clients/laptop/workflows/wf/versions/${OLD}`) return json(200, { name: "wf", hash: OLD, timestamp: 1000, current: false, descriptor: desc("drafter") });
      return json(404, { error: "unexpected " + url });
    }));
    window.location.hash = `#/m/laptop/workflows/wf?version=${OLD}`;
    render(<WorkflowDetailView machine="laptop" name="wf" />);
    await screen.findByText("the drafter");
    expect(document.querySelector(".kv dd.mono")!.textContent).toBe(OLD);
    expect(screen.getByTestId("older-version").textContent).toContain(CUR);
    expect(screen.queryByText("the writer")).toBeNull();
    expect(document.querySelector(`li[data-hash="${OLD}"]`)!.getAttribute("aria-current")).toBe("page");
    expect(urls).toContain(`/api/clients/laptop/workflows/wf/versions/${OLD}`);
    // The history links to each version, the way back to the current one.
    expect(document.querySelector(`li[data-hash="${OLD}"] a`)!.getAttribute("href")).toBe(`#/m/laptop/workflows/wf?version=${OLD}`);
    expect(within(screen.getByTestId("older-version")).getByRole("link").getAttribute("href")).toBe("#/m/laptop/workflows/wf");
    window.location.hash = "#/m/laptop/workflows/wf";
    window.dispatchEvent(new HashChangeEvent("hashchange"));
    await screen.findByText("the writer");
    expect(document.querySelector(".kv dd.mono")!.textContent).toBe(CUR);
    expect(screen.queryByTestId("older-version")).toBeNull();
  });

  it("says so when the URL names a version the workflow does not have", async () => {
    vi.stubGlobal("fetch", vi.fn(async (url: string) => {
      if (url === "/api/clients/laptop/workflows/wf") return json(200, { name: "wf", hash: CUR, timestamp: 2000, descriptor: desc("writer"), history: [] });
      return json(404, { error: "version not found: wf has no version ZZZZZZZZZZZZZ" });
    }));
    window.location.hash = "#/m/laptop/workflows/wf?version=ZZZZZZZZZZZZZ";
    render(<WorkflowDetailView machine="laptop" name="wf" />);
    expect((await screen.findByText(/version not found/)).textContent).toContain("ZZZZZZZZZZZZZ");
    expect(screen.queryByText("the writer")).toBeNull();
    expect(document.querySelector(".kv")).toBeNull();
  });
});

describe("WorkflowDetailView roles' agents", () => {
  beforeEach(() => localStorage.clear());
  const desc = { description: "review", roles: { plan: { description: "the plan" }, review: { description: "the review" } }, graph: { edges: [] } };
  const page = (roleAgents: unknown) => {
    vi.stubGlobal("fetch", vi.fn(async (url: string) => {
      if (url === "/api/clients/laptop/workflows/wf") return json(200, { name: "wf", hash: "H", timestamp: 1, descriptor: desc, history: [], ...(roleAgents === undefined ? {} : { roleAgents }) });
      return json(404, { error: "unexpected " + url });
    }));
    render(<WorkflowDetailView machine="laptop" name="wf" />);
  };
  const agentOf = (role: string) => document.querySelector(`article[data-role="${role}"] [data-testid=role-agent]`)!.textContent;

  it("names each role's agent, as the connector reports it", async () => {
    page({ plan: { type: "llm", model: "default" }, review: { type: "cli", name: "reviewer", model: "sonnet", command: "/usr/bin/claude" } });
    await screen.findByText("the review");
    expect(agentOf("plan")).toBe("Agent: llm · model default");
    expect(agentOf("review")).toBe("Agent: reviewer: cli · model sonnet · /usr/bin/claude");
  });

  it("says where the agent is chosen when no role names one: a JavaScript bundle's code, or a connector that does not say", async () => {
    page(null);
    await screen.findByText("the review");
    expect(agentOf("plan")).toBe("Agent: chosen in the bundle's code");
    cleanup();
    page(undefined);
    await screen.findByText("the review");
    expect(agentOf("plan")).toMatch(/^Agent: not reported by this machine's connector/);
  });
});
