// What the thread page says about its live stream, in words that match
// how the thread ended.
import { ThreadRecord, ThreadStatus } from "../api";

/** KILLED_CODE is the return code of a killed thread. */
export const KILLED_CODE = 130;

/**
 * endedAs is how a thread ended, from its result record (the return code:
 * 130 killed, 0 completed, else failed), else from its status.
 */
export function endedAs(records: ThreadRecord[], status: ThreadStatus | undefined): ThreadStatus | undefined {
  const result = records.find((r) => r.type === "workflow-result");
  if (result?.type === "workflow-result") return result.returnCode === KILLED_CODE ? "killed" : result.returnCode === 0 ? "completed" : "failed";
  return status;
}

/**
 * streamText is the live line: "● live" while it streams, and once the
 * server said done, why, without calling a killed or failed thread
 * completed (the server's reason "completed" means the thread finished,
 * however it did).
 */
export function streamText(s: { done: string | null; connected: boolean; error: string | null }, records: ThreadRecord[], status: ThreadStatus | undefined): string {
  if (!s.done) return s.connected ? "● live" : s.error ?? "connecting…";
  const result = records.find((r) => r.type === "workflow-result");
  const code = result?.type === "workflow-result" ? result.returnCode : undefined;
  if (s.done === "damaged" || status === "damaged") {
    return "Stream ended: this thread's head or start is missing or damaged in its machine's store, so its status cannot be known; `uncaged-workflow doctor` on that machine says what is wrong.";
  }
  if (s.done === "not-running") {
    if (status === "waiting") return "Stream ended: the thread waits for a person's answer.";
    if (status === "paused") return "Stream ended: the thread is paused; Resume continues it.";
    if (status === "interrupted") return "Stream ended: nothing runs this thread now (interrupted); Resume starts it again.";
    return "Stream ended: nothing runs this thread now.";
  }
  switch (endedAs(records, status)) {
    case "killed":
      return `Stream ended: the thread was killed (return code ${KILLED_CODE}).`;
    case "failed":
      return `Stream ended: the thread failed${code !== undefined ? ` (return code ${code})` : ""}.`;
    case "completed":
      return "Stream ended: the thread completed.";
  }
  return `Stream ended (${s.done}).`;
}
