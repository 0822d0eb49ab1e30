// The one-click login link (#token=<dashboard token>): consumed at load and
// on a hash change, stored as the login form stores a token, and removed
// from the address bar.
import { act, cleanup, render, screen, waitFor } from "@testing-library/react";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { getToken, setToken, takeTokenFromLink } from "./api";
import { App } from "./App";
import { FakeEventSource, json, stubFetch } from "./testutil/fetch";

beforeEach(() => {
  localStorage.clear();
  window.history.replaceState(null, "", "/");
});
afterEach(() => {
  cleanup();
  vi.unstubAllGlobals();
});

/** loginBodies are the tokens POSTed to /api/gateway/login. */
function loginBodies(f: ReturnType<typeof stubFetch>): string[] {
  return f.mock.calls
    .filter((c) => String(c[0]) === "/api/gateway/login")
    .map((c) => (JSON.parse(String((c[1] as RequestInit).body)) as { token: string }).token);
}

/** gatewayUp answers a logged-in dashboard's first requests. */
function gatewayUp() {
  vi.stubGlobal("EventSource", FakeEventSource);
  return stubFetch([
    ["/api/gateway/login", () => json(200, { ok: true })],
    ["/api/gateway/endpoints", () => json(200, [])],
    ["/api/gateway/machines", () => json(200, { machines: [] })],
    ["/api/gateway/threads", () => json(200, { threads: [], total: 0 })],
  ]);
}

describe("takeTokenFromLink", () => {
  it("stores the link's token and removes the fragment, keeping path and query", () => {
    setToken("older");
    window.history.replaceState(null, "", "/dash/?x=1#token=eyJ.a%2Bb.c");
    const before = window.history.length;
    expect(takeTokenFromLink()).toBe(true);
    expect(getToken()).toBe("eyJ.a+b.c");
    expect(window.location.hash).toBe("");
    expect(window.location.pathname + window.location.search).toBe("/dash/?x=1");
    expect(window.location.href).not.toContain("token");
    expect(window.history.length).toBe(before); // replaced, not pushed
  });

  it("leaves other fragments alone", () => {
    setToken("kept");
    for (const hash of ["", "#/threads?q=token=x", "#/m/laptop/threads", "#tokens=x"]) {
      window.history.replaceState(null, "", "/" + hash);
      expect(takeTokenFromLink()).toBe(false);
      expect(window.location.hash).toBe(hash);
      expect(getToken()).toBe("kept");
    }
  });

  it("removes an empty or malformed token's fragment without storing anything", () => {
    setToken("kept");
    for (const hash of ["#token=", "#token=%20", "#token=%E0%A4%A"]) {
      window.history.replaceState(null, "", "/" + hash);
      expect(takeTokenFromLink()).toBe(false);
      expect(window.location.hash).toBe("");
      expect(getToken()).toBe("kept");
    }
  });
});

describe("the dashboard opened from a login link", () => {
  it("logs in with the link's token at load", async () => {
    const f = gatewayUp();
    window.history.replaceState(null, "", "/#token=from-link");
    takeTokenFromLink(); // what main.tsx does before the first render
    render(<App />);
    expect(await screen.findByRole("button", { name: "Log out" })).toBeTruthy();
    expect(loginBodies(f)).toEqual(["from-link"]);
    expect(window.location.hash).toBe("");
    await act(async () => {});
  });

  it("takes a link opened in a tab that already shows the login page", async () => {
    const f = gatewayUp();
    render(<App />);
    expect(screen.getByLabelText("Dashboard token")).toBeTruthy();
    window.location.hash = "#token=from-link"; // a same-document navigation: no reload
    expect(await screen.findByRole("button", { name: "Log out" })).toBeTruthy();
    expect(loginBodies(f)).toEqual(["from-link"]);
    await waitFor(() => expect(window.location.hash).toBe(""));
    expect(getToken()).toBe("from-link");
    await act(async () => {});
  });

  it("says why the link's token was refused", async () => {
    stubFetch([["/api/gateway/login", () => json(401, { error: "token signature is invalid", reason: "bad-signature" })]]);
    window.history.replaceState(null, "", "/#token=from-an-older-gateway");
    takeTokenFromLink();
    render(<App />);
    expect((await screen.findByRole("alert")).textContent).toMatch(/^This token was signed with another key/);
    expect(getToken()).toBeNull();
    expect(window.location.hash).toBe("");
  });

  it("says why a link with another kind of token was refused", async () => {
    stubFetch([["/api/gateway/login", () => json(403, { error: "token is a connector token", reason: "wrong-kind" })]]);
    window.history.replaceState(null, "", "/#token=a-connector-token");
    takeTokenFromLink();
    render(<App />);
    expect((await screen.findByRole("alert")).textContent).toBe("This is a connector token; log in with a dashboard token.");
  });
});
