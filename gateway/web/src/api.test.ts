import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { ago, api, ApiError, gateway, getToken, initialLive, isOffline, liveReducer, machine, noMemory, onUnauthorized, setToken, threadGraphSource, TOKEN_KEY } from "./api";
import type { RoleRecord, StartRecord } from "./api";

function respond(status: number, body: unknown) {
  return vi.fn(async () => new Response(body === undefined ? "" : JSON.stringify(body), { status, headers: { "Content-Type": "application/json" } }));
}

describe("api fetch wrapper", () => {
  beforeEach(() => localStorage.clear());
  afterEach(() => vi.unstubAllGlobals());

  it("sends the stored token as a Bearer header and JSON bodies", async () => {
    setToken("tok-1");
    const f = respond(201, { threadId: "T1" });
    vi.stubGlobal("fetch", f);
    const out = await machine("lap top").run("wf", "hello");
    expect(out).toEqual({ threadId: "T1" });
    const [url, init] = f.mock.calls[0] as unknown as [string, RequestInit];
    expect(url).toBe("/api/clients/lap%20top/threads");
    expect(init.method).toBe("POST");
    expect((init.headers as Record<string, string>).Authorization).toBe("Bearer tok-1");
    expect(JSON.parse(init.body as string)).toEqual({ workflow: "wf", prompt: "hello" });
  });

  it("builds thread list queries", async () => {
    const f = respond(200, { threads: [], total: 0 });
    vi.stubGlobal("fetch", f);
    await machine("m").threads({ limit: 20, offset: 40, status: "running" });
    expect(f.mock.calls[0][0 as never]).toBe("/api/clients/m/threads?limit=20&offset=40&status=running");
  });

  it("rolls a workflow back to a given version, or to the previous one", async () => {
    const f = respond(200, { name: "my flow", hash: "ABCDEFGHJKMNP", timestamp: 5 });
    vi.stubGlobal("fetch", f);
    expect(await machine("lap top").rollback("my flow", "ABCDEFGHJKMNP")).toEqual({ name: "my flow", hash: "ABCDEFGHJKMNP", timestamp: 5 });
    const [url, init] = f.mock.calls[0] as unknown as [string, RequestInit];
    expect(url).toBe("/api/clients/lap%20top/workflows/my%20flow/rollback");
    expect(init.method).toBe("POST");
    expect(JSON.parse(init.body as string)).toEqual({ hash: "ABCDEFGHJKMNP" });
    await machine("m").rollback("wf");
    expect(JSON.parse((f.mock.calls[1] as unknown as [string, RequestInit])[1].body as string)).toEqual({});
    vi.stubGlobal("fetch", respond(400, { error: "no history entry to rollback to" }));
    await expect(machine("m").rollback("wf")).rejects.toMatchObject({ status: 400, message: "no history entry to rollback to" });
  });

  it("turns a JSON error into an ApiError with the server's message", async () => {
    vi.stubGlobal("fetch", respond(404, { error: "thread not found" }));
    const err = (await api("/api/x").catch((e: unknown) => e)) as ApiError;
    expect(err).toBeInstanceOf(ApiError);
    expect(err.status).toBe(404);
    expect(err.message).toBe("thread not found");
  });

  it("drops the token and tells listeners on 401", async () => {
    setToken("old");
    const seen = vi.fn();
    const off = onUnauthorized(seen);
    vi.stubGlobal("fetch", respond(401, { error: "unauthorized" }));
    await expect(api("/api/gateway/endpoints")).rejects.toMatchObject({ status: 401 });
    expect(seen).toHaveBeenCalledOnce();
    expect(localStorage.getItem(TOKEN_KEY)).toBeNull();
    off();
  });

  it("keeps the refusal's reason and hands it to the 401 listeners", async () => {
    setToken("old");
    const seen = vi.fn();
    const off = onUnauthorized(seen);
    vi.stubGlobal("fetch", respond(401, { error: "token revoked", reason: "revoked" }));
    await expect(api("/api/x")).rejects.toMatchObject({ status: 401, message: "token revoked", reason: "revoked" });
    expect(seen.mock.calls[0][0]).toMatchObject({ status: 401, reason: "revoked" });
    off();
    vi.stubGlobal("fetch", respond(503, { error: "machine m is offline (last seen 2026-01-01T00:00:00Z): actions need it online", reason: "offline" }));
    const err = await api("/api/clients/m/threads/T/kill", { method: "POST" }).catch((e: unknown) => e);
    expect(isOffline(err)).toBe(true);
    expect(isOffline(new ApiError(503, "connector offline: m"))).toBe(true);
    expect(isOffline(new ApiError(502, "bad gateway"))).toBe(false);
  });

  it("asks the gateway's memory with only the filters that are set", async () => {
    const f = respond(200, { threads: [], total: 0 });
    vi.stubGlobal("fetch", f);
    await gateway.threads({ q: "a b", machine: "m", status: "", limit: 50, offset: 0 });
    expect(f.mock.calls[0][0 as never]).toBe("/api/gateway/threads?q=a+b&machine=m&limit=50&offset=0");
    await gateway.audit({ action: "kill", limit: 10, offset: 20 });
    expect(f.mock.calls[1][0 as never]).toBe("/api/gateway/audit?action=kill&limit=10&offset=20");
    await gateway.machines();
    expect(f.mock.calls[2][0 as never]).toBe("/api/gateway/machines");
    expect(noMemory(new ApiError(404, "not found"))).toBe(true);
    expect(noMemory(new ApiError(503, "no audit log: this gateway keeps nothing"))).toBe(true);
    expect(noMemory(new ApiError(503, "store failed; retry later"))).toBe(false);
  });

  it("does not log out on 403", async () => {
    setToken("tok");
    vi.stubGlobal("fetch", respond(403, { error: "forbidden" }));
    await expect(api("/api/x")).rejects.toMatchObject({ status: 403 });
    expect(getToken()).toBe("tok");
  });

  it("login keeps the token only when the gateway accepts it", async () => {
    vi.stubGlobal("fetch", respond(401, { error: "invalid token" }));
    await expect(gateway.login("bad")).rejects.toBeInstanceOf(ApiError);
    expect(getToken()).toBeNull();
    const ok = vi.fn(async (url: string) => new Response(url.endsWith("/login") ? '{"ok":true}' : "[]", { status: 200 }));
    vi.stubGlobal("fetch", ok);
    await gateway.login("good");
    expect(getToken()).toBe("good");
    expect(ok.mock.calls.map((c) => c[0])).toEqual(["/api/gateway/login", "/api/gateway/endpoints"]);
  });

  it("reports network failures as status 0", async () => {
    vi.stubGlobal("fetch", vi.fn(async () => { throw new TypeError("Failed to fetch"); }));
    await expect(api("/api/x")).rejects.toMatchObject({ status: 0 });
  });
});

describe("liveReducer", () => {
  const start = { type: "thread-start", threadId: "T", status: "running" } as StartRecord;
  const step = (role: string) => ({ type: "role", role, content: role }) as RoleRecord;

  it("places records by their event id and ignores replays", () => {
    let s = liveReducer(initialLive, { type: "open" });
    s = liveReducer(s, { type: "record", id: "1:0", record: start });
    s = liveReducer(s, { type: "record", id: "2:10", record: step("a") });
    // A reconnect replays from the start: nothing is duplicated.
    s = liveReducer(s, { type: "record", id: "1:0", record: start });
    s = liveReducer(s, { type: "record", id: "2:10", record: step("a") });
    s = liveReducer(s, { type: "record", id: "3:20", record: step("b") });
    expect(s.records.map((r) => (r.type === "role" ? r.role : r.type))).toEqual(["thread-start", "a", "b"]);
    expect(s.connected).toBe(true);
  });

  it("appends records without an id", () => {
    const s = liveReducer(liveReducer(initialLive, { type: "record", id: "", record: start }), { type: "record", id: "", record: step("x") });
    expect(s.records).toHaveLength(2);
  });

  it("flags a gap instead of leaving holes", () => {
    const s = liveReducer(initialLive, { type: "record", id: "3:0", record: step("c") });
    expect(s.records).toHaveLength(0);
    expect(s.error).toMatch(/missed/);
  });

  it("collects info lines and ends on done", () => {
    let s = liveReducer(initialLive, { type: "info", line: "hello" });
    s = liveReducer(s, { type: "done", reason: "completed" });
    expect(s.info).toEqual(["hello"]);
    expect(s.done).toBe("completed");
    expect(s.connected).toBe(false);
    expect(liveReducer(s, { type: "reset" })).toBe(initialLive);
  });
});

describe("formatting", () => {
  it("says how long ago", () => {
    expect(ago(1000, 13_000)).toBe("12 s ago");
    expect(ago(0)).toBe("never");
    expect(ago(0 + 1, 1 + 5 * 60_000)).toBe("5 min ago");
  });
});

describe("threadGraphSource", () => {
  afterEach(() => vi.unstubAllGlobals());
  const descriptor = (role: string) => ({ roles: { [role]: {} }, graph: { edges: [] } });

  it("takes the version the thread ran", async () => {
    const f = respond(200, { name: "wf", hash: "OLDVERSION123", timestamp: 1, current: false, descriptor: descriptor("old") });
    vi.stubGlobal("fetch", f);
    expect(await threadGraphSource("lap top", "wf", "OLDVERSION123")).toEqual({ descriptor: descriptor("old"), current: false });
    expect(f.mock.calls[0][0 as never]).toBe("/api/clients/lap%20top/workflows/wf/versions/OLDVERSION123");
  });

  it("stands in the current version when that one is gone", async () => {
    const f = vi.fn(async (url: string) =>
      url.includes("/versions/")
        ? new Response(JSON.stringify({ error: "version not found" }), { status: 404 })
        : new Response(JSON.stringify({ name: "wf", hash: "NEWVERSION123", timestamp: 2, history: [], descriptor: descriptor("new") }), { status: 200 }),
    );
    vi.stubGlobal("fetch", f);
    expect(await threadGraphSource("m", "wf", "OLDVERSION123")).toEqual({ descriptor: descriptor("new"), current: true });
  });

  it("reports other failures", async () => {
    vi.stubGlobal("fetch", respond(502, { error: "connector offline" }));
    await expect(threadGraphSource("m", "wf", "OLDVERSION123")).rejects.toMatchObject({ status: 502 });
  });
});
