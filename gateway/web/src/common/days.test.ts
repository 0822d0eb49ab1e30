import { describe, expect, it } from "vitest";
import { dayStart } from "./days";

describe("dayStart", () => {
  it("is the day's local midnight, days later, as ISO", () => {
    expect(dayStart("2026-03-01")).toBe(new Date(2026, 2, 1).toISOString());
    expect(dayStart("2026-02-28", 1)).toBe(new Date(2026, 2, 1).toISOString());
  });
  it("is undefined for no day or no date", () => {
    expect(dayStart("")).toBeUndefined();
    expect(dayStart("yesterday")).toBeUndefined();
    expect(dayStart("2026-13-45")).toBeUndefined();
  });
});
