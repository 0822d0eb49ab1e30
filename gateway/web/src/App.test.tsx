import { act, cleanup, fireEvent, render, screen } from "@testing-library/react";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { getToken, setToken } from "./api";
import { App, Login } from "./App";
import { FakeEventSource, json, stubFetch } from "./testutil/fetch";

afterEach(() => {
  cleanup();
  vi.unstubAllGlobals();
});

describe("login", () => {
  beforeEach(() => {
    localStorage.clear();
    window.location.hash = "";
  });

  it("says why the gateway refused the token", async () => {
    stubFetch([["/api/gateway/login", () => json(401, { error: "token is a connector token", reason: "wrong-kind" })]]);
    const onIn = vi.fn();
    render(<Login onIn={onIn} />);
    fireEvent.change(screen.getByLabelText("Dashboard token"), { target: { value: "eyJconnector" } });
    fireEvent.click(screen.getByRole("button", { name: "Sign in" }));
    expect((await screen.findByRole("alert")).textContent).toBe("This is a connector token; log in with a dashboard token.");
    expect(onIn).not.toHaveBeenCalled();
    expect(getToken()).toBeNull();
  });

  it("says when an expired token expired", async () => {
    stubFetch([["/api/gateway/login", () => json(401, { error: "token expired at 2026-01-02T03:04:05Z", reason: "expired" })]]);
    render(<Login onIn={() => {}} />);
    fireEvent.change(screen.getByLabelText("Dashboard token"), { target: { value: "old" } });
    fireEvent.click(screen.getByRole("button", { name: "Sign in" }));
    expect((await screen.findByRole("alert")).textContent).toBe(`This token expired on ${new Date("2026-01-02T03:04:05Z").toLocaleString()}. Ask for a new one.`);
  });

  it("returns to the login page, saying why, when the token is revoked while in", async () => {
    vi.stubGlobal("EventSource", FakeEventSource);
    setToken("good");
    let revoked = false;
    stubFetch([
      ["/api/gateway/login", () => json(200, { ok: true })],
      ["/api/gateway/endpoints", () => (revoked ? json(401, { error: "token revoked", reason: "revoked" }) : json(200, []))],
      ["/api/gateway/machines", () => json(200, { machines: [] })],
      ["/api/gateway/threads", () => {
        revoked = true;
        return json(401, { error: "token revoked", reason: "revoked" });
      }],
    ]);
    render(<App />);
    expect((await screen.findByRole("alert")).textContent).toMatch(/^This token was revoked/);
    expect(screen.getByLabelText("Dashboard token")).toBeTruthy();
    expect(getToken()).toBeNull();
    await act(async () => {});
  });
});
