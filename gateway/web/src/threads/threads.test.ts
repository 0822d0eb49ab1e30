import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import type { Endpoint, ThreadSummary } from "../api";
import { ApiError, setToken } from "../api";
import { ariaSort, loadMachines, mergeThreads, nextSort, sortThreads, splitEndpoints, threadDuration } from "./threads";

const t = (threadId: string, startedAt: string, o: Partial<ThreadSummary> = {}): ThreadSummary => ({
  threadId, workflow: "wf", hash: "H", startedAt, updatedAt: startedAt, status: "completed", source: "cli", ...o,
});

describe("loadMachines", () => {
  beforeEach(() => localStorage.clear());
  afterEach(() => vi.unstubAllGlobals());

  it("asks every machine in parallel and keeps each failure to its machine", async () => {
    setToken("tok");
    const pending: ((r: Response) => void)[] = [];
    const f = vi.fn((url: string) => {
      if (url.includes("/broken/")) return Promise.resolve(new Response('{"error":"machine timed out"}', { status: 504 }));
      return new Promise<Response>((resolve) => pending.push(resolve));
    });
    vi.stubGlobal("fetch", f);
    const out = loadMachines(["laptop", "broken", "ci box"]);
    // All three requests are out before any answer came back.
    await vi.waitFor(() => expect(f).toHaveBeenCalledTimes(3));
    expect(f.mock.calls.map((c) => c[0])).toEqual([
      "/api/clients/laptop/threads?limit=50&offset=0",
      "/api/clients/broken/threads?limit=50&offset=0",
      "/api/clients/ci%20box/threads?limit=50&offset=0",
    ]);
    pending.forEach((resolve, i) => resolve(new Response(JSON.stringify({ threads: [t(`T${i}`, "2026-01-01T00:00:00Z")], total: 70 }), { status: 200 })));
    const res = await out;
    expect(res.map((r) => r.machine)).toEqual(["laptop", "broken", "ci box"]);
    expect(res[0].threads).toHaveLength(1);
    expect(res[0].total).toBe(70);
    expect(res[1].error).toBeInstanceOf(ApiError);
    expect(res[1].error?.message).toBe("machine timed out");
  });
});

describe("mergeThreads", () => {
  it("merges every machine's threads newest first and lists the failures", () => {
    const all = mergeThreads([
      { machine: "laptop", threads: [t("A", "2026-01-01T10:00:00Z"), t("B", "2026-01-01T08:00:00Z")], total: 2 },
      { machine: "down", error: new Error("bad gateway") },
      { machine: "ci-box", threads: [t("C", "2026-01-01T09:00:00Z")], total: 80 },
    ]);
    expect(all.rows.map((r) => `${r.machine}/${r.threadId}`)).toEqual(["laptop/A", "ci-box/C", "laptop/B"]);
    expect(all.failed.map((f) => [f.machine, f.error.message])).toEqual([["down", "bad gateway"]]);
    expect(all.loaded).toEqual([
      { machine: "ci-box", shown: 1, total: 80 },
      { machine: "laptop", shown: 2, total: 2 },
    ]);
  });

  it("keeps the same thread id on two machines apart", () => {
    const all = mergeThreads([
      { machine: "a", threads: [t("X", "2026-01-01T10:00:00Z")] },
      { machine: "b", threads: [t("X", "2026-01-01T10:00:00Z")] },
    ]);
    expect(all.rows.map((r) => r.machine)).toEqual(["a", "b"]);
  });
});

describe("splitEndpoints", () => {
  it("separates online from offline machines by name", () => {
    const eps = [
      { name: "zeta", status: "online" },
      { name: "ci-box", status: "offline" },
      { name: "alpha", status: "online" },
    ] as Endpoint[];
    expect(splitEndpoints(eps)).toEqual({ online: ["alpha", "zeta"], offline: ["ci-box"] });
  });
});

describe("sortThreads", () => {
  const now = Date.parse("2026-01-01T12:00:00Z");
  const rows = [
    t("A", "2026-01-01T10:00:00Z", { status: "completed", workflow: "beta", updatedAt: "2026-01-01T10:00:05Z" }),
    t("B", "2026-01-01T11:00:00Z", { status: "running", workflow: null, updatedAt: "2026-01-01T11:00:01Z" }),
    t("C", "2026-01-01T09:00:00Z", { status: "failed", workflow: "alpha", updatedAt: "2026-01-01T11:30:00Z" }),
  ];
  const ids = (key: Parameters<typeof sortThreads>[1]["key"], dir: "asc" | "desc") => sortThreads(rows, { key, dir }, now).map((r) => r.threadId).join("");

  it("sorts by each column, both ways", () => {
    expect(ids("started", "desc")).toBe("BAC");
    expect(ids("started", "asc")).toBe("CAB");
    expect(ids("updated", "desc")).toBe("CBA");
    expect(ids("status", "asc")).toBe("BCA"); // running, failed, completed
    expect(ids("status", "desc")).toBe("ACB");
    // B runs: its duration counts to now (1 h); C took 2.5 h; A 5 s.
    expect(ids("duration", "desc")).toBe("CBA");
    expect(ids("duration", "asc")).toBe("ABC");
  });

  it("puts unknown workflows last both ways", () => {
    expect(ids("workflow", "asc")).toBe("CAB");
    expect(ids("workflow", "desc")).toBe("ACB");
  });

  it("does not change its input and breaks ties newest first", () => {
    const copy = [...rows];
    const same = [t("P", "2026-01-01T08:00:00Z"), t("Q", "2026-01-01T09:00:00Z")];
    expect(sortThreads(same, { key: "status", dir: "asc" }).map((r) => r.threadId)).toEqual(["Q", "P"]);
    expect(rows).toEqual(copy);
  });

  it("measures a running thread up to now", () => {
    expect(threadDuration(rows[1], now)).toBe(3600_000);
    expect(threadDuration(rows[0], now)).toBe(5000);
  });
});

describe("header clicks", () => {
  it("flips the same column, starts a new one in its natural direction", () => {
    const s = { key: "started", dir: "desc" } as const;
    expect(nextSort(s, "started")).toEqual({ key: "started", dir: "asc" });
    expect(nextSort(s, "status")).toEqual({ key: "status", dir: "asc" });
    expect(nextSort(s, "duration")).toEqual({ key: "duration", dir: "desc" });
    expect(ariaSort(s, "started")).toBe("descending");
    expect(ariaSort({ key: "status", dir: "asc" }, "status")).toBe("ascending");
    expect(ariaSort(s, "workflow")).toBe("none");
  });
});
