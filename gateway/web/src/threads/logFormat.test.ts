import { describe, expect, it } from "vitest";
import { filterLog, formatLogLine, logTags, logTime, NO_TAG, parseLogLine, tagName } from "./logFormat";

// 2026-01-02 03:04:05 local time.
const T = new Date(2026, 0, 2, 3, 4, 5).getTime();

describe("parseLogLine", () => {
  it("reads the debug log's {tag, content, timestamp}, as text or parsed", () => {
    expect(parseLogLine(JSON.stringify({ tag: "N7BW4YHQ", content: "thread T wrote role a", timestamp: T }))).toEqual({ time: T, tag: "N7BW4YHQ", text: "thread T wrote role a" });
    expect(parseLogLine({ tag: "model", content: "hi", timestamp: T })).toEqual({ time: T, tag: "model", text: "hi" });
  });

  it("keeps what it cannot read whole, without a tag or time", () => {
    expect(parseLogLine("plain text")).toEqual({ time: null, tag: "", text: "plain text" });
    expect(parseLogLine("{broken")).toEqual({ time: null, tag: "", text: "{broken" });
    expect(parseLogLine("[1,2]")).toEqual({ time: null, tag: "", text: "[1,2]" });
    expect(parseLogLine('"a string"')).toEqual({ time: null, tag: "", text: '"a string"' });
    expect(parseLogLine("{}")).toEqual({ time: null, tag: "", text: "{}" });
    expect(parseLogLine(null)).toEqual({ time: null, tag: "", text: "null" });
  });

  it("drops a timestamp that is not a time, and shows non-text content as JSON", () => {
    expect(parseLogLine({ tag: "x", content: "y", timestamp: "yesterday" })).toEqual({ time: null, tag: "x", text: "y" });
    expect(parseLogLine({ tag: "x", content: "y", timestamp: -5 })).toEqual({ time: null, tag: "x", text: "y" });
    expect(parseLogLine({ tag: 7, content: { a: 1 }, timestamp: T })).toEqual({ time: T, tag: "", text: '{"a":1}' });
  });
});

describe("formatLogLine", () => {
  it("prints as live --debug does: [time] [tag] text, one line", () => {
    expect(logTime(T)).toBe("03:04:05");
    expect(logTime(null)).toBe("--:--:--");
    expect(formatLogLine({ time: T, tag: "model", text: "two\nlines\r\nhere" })).toBe("[03:04:05] [model] two lines here");
    expect(formatLogLine(parseLogLine("not json"))).toBe("[--:--:--] [] not json");
  });
});

describe("filtering by tag", () => {
  const lines = [
    { time: T, tag: "model", text: "Thinking about it" },
    { time: T, tag: "N7BW4YHQ", text: "thread T wrote role a" },
    { time: T, tag: "model", text: "done" },
    { time: null, tag: "", text: "raw" },
  ];
  it("counts the tags, most frequent first", () => {
    expect(logTags(lines)).toEqual([
      { tag: "model", count: 2 },
      { tag: NO_TAG, count: 1 },
      { tag: "N7BW4YHQ", count: 1 },
    ]);
    expect(logTags([])).toEqual([]);
  });
  it("keeps the shown tags' lines; none chosen shows all; a query narrows", () => {
    expect(filterLog(lines, new Set())).toEqual(lines);
    expect(filterLog(lines, new Set(["model"])).map((l) => l.text)).toEqual(["Thinking about it", "done"]);
    expect(filterLog(lines, new Set([NO_TAG])).map((l) => l.text)).toEqual(["raw"]);
    expect(filterLog(lines, new Set(["nothing-has-this"]))).toEqual([]);
    expect(filterLog(lines, new Set(), "THINK").map((l) => l.text)).toEqual(["Thinking about it"]);
    expect(filterLog(lines, new Set(["N7BW4YHQ"]), "think")).toEqual([]);
    expect(filterLog(lines, new Set(), "  ")).toEqual(lines);
  });
});

describe("tagName", () => {
  it("names the engine's coded tags and leaves words alone", () => {
    expect(tagName("N7BW4YHQ")).toBe("step");
    expect(tagName("R2XK8MDA")).toBe("finished");
    expect(tagName("model")).toBe("model");
    expect(tagName("")).toBe("");
  });
});
