import { describe, expect, it } from "vitest";
import { ThreadRecord } from "../api";
import { fmtCost, fmtTokens, readUsage, usageText, withUsage } from "./usage";

describe("readUsage", () => {
  it("reads the connector's totals", () => {
    const u = readUsage({ calls: 2, promptTokens: 1000, completionTokens: 234, totalTokens: 1234, models: ["gpt-x"], costUsd: 0.0123, unknownCalls: 0, unpricedCalls: 0 });
    expect(u).toMatchObject({ calls: 2, totalTokens: 1234, models: ["gpt-x"], costUsd: 0.0123 });
    expect(usageText(u!)).toBe("1,234 tokens (1,000 in, 234 out) · 2 calls · gpt-x · $0.012");
  });
  it("reads the fleet's short form and one model", () => {
    expect(usageText(readUsage({ tokens: 5_500_000, cost: 12.5, model: "m" })!)).toBe("5.50 M tokens · m · $12.50");
    expect(usageText(readUsage({ promptTokens: 3, completionTokens: 4 })!)).toBe("7 tokens (3 in, 4 out) · cost unknown");
  });
  it("shows nothing for nothing, and ignores nonsense", () => {
    for (const v of [null, undefined, 5, "x", [], {}, { totalTokens: -1 }, { totalTokens: "many" }, { calls: 0, totalTokens: 0, models: null }]) expect(readUsage(v)).toBeNull();
    expect(readUsage({ totalTokens: 10, costUsd: NaN, models: [1, "a"] })).toMatchObject({ totalTokens: 10, costUsd: undefined, models: ["a"] });
  });
  it("says which calls it could not count or price", () => {
    expect(usageText(readUsage({ totalTokens: 10, calls: 1, costUsd: 0.5, unpricedCalls: 1, unknownCalls: 2 })!)).toBe("10 tokens · 1 call · $0.50 + 1 unpriced · 2 calls without token counts");
  });
});

describe("formats", () => {
  it("formats tokens and cost", () => {
    expect(fmtTokens(0)).toBe("0");
    expect(fmtTokens(999_999)).toBe("999,999");
    expect(fmtCost(0)).toBe("$0.000");
    expect(fmtCost(1.234)).toBe("$1.23");
  });
});

describe("withUsage", () => {
  const start = { type: "thread-start" } as ThreadRecord;
  const role = (r: string, usage?: unknown) => ({ type: "role", role: r, ...(usage ? { usage } : {}) }) as unknown as ThreadRecord;
  const result = (usage?: unknown) => ({ type: "workflow-result", returnCode: 0, ...(usage ? { usage } : {}) }) as unknown as ThreadRecord;
  it("gives each streamed step the snapshot's usage for its place", () => {
    const out = withUsage([start, role("a"), role("b"), result()], [start, role("a", { calls: 1 }), role("b"), result({ calls: 2 })]);
    expect(out.map((r) => (r as { usage?: unknown }).usage)).toEqual([undefined, { calls: 1 }, undefined, { calls: 2 }]);
  });
  it("keeps a record's own usage, and records the snapshot does not have yet", () => {
    const live = [start, role("a", { calls: 5 }), role("b")];
    expect(withUsage(live, [start, role("a", { calls: 1 })])).toBe(live);
    expect(withUsage(live, undefined)).toBe(live);
    // A different record at that place (the stream moved on) is not matched.
    expect(withUsage([start, result()], [start, role("a", { calls: 1 })])[1]).toEqual(result());
  });
});
