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
