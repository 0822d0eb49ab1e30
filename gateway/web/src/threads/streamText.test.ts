import { describe, expect, it } from "vitest";
import { ThreadRecord } from "../api";
import { endedAs, streamText } from "./streamText";

const result = (returnCode: number): ThreadRecord => ({ type: "workflow-result", returnCode, content: "", timestamp: 1 });
const done = (reason: string) => ({ done: reason, connected: false, error: null });

describe("streamText", () => {
  it("says how the thread ended, not the server's reason", () => {
    expect(streamText(done("completed"), [result(130)], "killed")).toBe("Stream ended: the thread was killed (return code 130).");
    // The result decides, even before the status caught up.
    expect(streamText(done("completed"), [result(130)], "running")).toMatch(/killed/);
    expect(streamText(done("completed"), [result(2)], "failed")).toBe("Stream ended: the thread failed (return code 2).");
    expect(streamText(done("completed"), [result(0)], "completed")).toBe("Stream ended: the thread completed.");
    expect(streamText(done("completed"), [], "killed")).toBe("Stream ended: the thread was killed (return code 130).");
  });
  it("says why an unfinished thread's stream stopped", () => {
    expect(streamText(done("not-running"), [], "interrupted")).toMatch(/interrupted/);
    expect(streamText(done("not-running"), [], "paused")).toMatch(/paused/);
    expect(streamText(done("not-running"), [], "waiting")).toBe("Stream ended: the thread waits for a person's answer.");
    expect(streamText(done("not-running"), [], undefined)).toBe("Stream ended: nothing runs this thread now.");
    expect(streamText(done("something-new"), [], undefined)).toBe("Stream ended (something-new).");
  });
  it("never gives a damaged thread a status it cannot back", () => {
    expect(streamText(done("damaged"), [], "damaged")).toMatch(/cannot be known.*doctor/);
    // Even when its records end in a result: the head that would back it is gone.
    expect(streamText(done("damaged"), [result(0)], undefined)).toMatch(/cannot be known/);
  });
  it("says live, or why not yet", () => {
    expect(streamText({ done: null, connected: true, error: null }, [], "running")).toBe("● live");
    expect(streamText({ done: null, connected: false, error: "reconnecting" }, [], "running")).toBe("reconnecting");
    expect(streamText({ done: null, connected: false, error: null }, [], "running")).toBe("connecting…");
  });
  it("reads the end from the return code", () => {
    expect(endedAs([result(0)], undefined)).toBe("completed");
    expect(endedAs([], "paused")).toBe("paused");
  });
});
