import { describe, expect, it } from "vitest";
import { ThreadRecord } from "../api";
import { fmtTokens, formatCost, readUsage, usageText, withUsage } from "./usage";

describe("readUsage", () => {
  it("reads the connector's totals", () => {
    const u = readUsage({ calls: 2, promptTokens: 1000, completionTokens: 234, totalTokens: 1234, models: ["gpt-x"], costUsd: 0.0123, unknownCalls: 0, unpricedCalls: 0 });
    expect(u).toMatchObject({ calls: 2, totalTokens: 1234, models: ["gpt-x"], costUsd: 0.0123 });
    expect(usageText(u!)).toBe("1,234 tokens (1,000 in, 234 out) · 2 calls · gpt-x · $0.0123");
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
  it("formats tokens", () => {
    expect(fmtTokens(0)).toBe("0");
    expect(fmtTokens(999_999)).toBe("999,999");
  });
});

// The one cost rule, the CLI's too (engine/usage.FormatCost has the same table).
describe("formatCost", () => {
  const rows: [number, string][] = [
    [NaN, "—"],
    [-0.5, "—"],
    [Infinity, "—"],
    [-Infinity, "—"],
    [0, "$0"],
    [0.0000001, "<$0.001"],
    [0.00029, "<$0.001"],
    [0.000999, "<$0.001"],
    [0.001, "$0.001"],
    [0.00123, "$0.00123"],
    [0.012, "$0.012"],
    [0.0456, "$0.0456"],
    [0.123456, "$0.123"],
    [0.5, "$0.50"],
    [0.9996, "$1.00"],
    [1.5, "$1.50"],
    [123.456, "$123.46"],
    [1234.5, "$1234.50"],
  ];
  it("follows the table", () => {
    for (const [usd, want] of rows) expect(formatCost(usd), String(usd)).toBe(want);
  });

  it("never reads as free, and keeps three significant digits below a dollar", () => {
    // Random costs across ten orders of magnitude: the rule, not the table.
    let seed = 27;
    const random = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
    for (let i = 0; i < 2000; i++) {
      const usd = 10 ** (random() * 10 - 7);
      const s = formatCost(usd);
      expect(s, String(usd)).not.toMatch(/^\$0(\.0*)?$/);
      if (usd < 0.001) {
        expect(s).toBe("<$0.001");
        continue;
      }
      const shown = Number(s.slice(1));
      const decimals = s.split(".")[1] ?? "";
      expect(decimals.length, s).toBeGreaterThanOrEqual(2);
      if (shown >= 1) {
        expect(decimals.length, s).toBe(2);
        expect(Math.abs(shown - usd), s).toBeLessThanOrEqual(0.005 + 1e-9);
      } else {
        expect(Math.abs(shown - usd) / usd, s).toBeLessThanOrEqual(0.005 + 1e-9);
        // Trailing zeros dropped, down to two decimals.
        if (decimals.length > 2) expect(decimals.endsWith("0"), s).toBe(false);
      }
    }
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
