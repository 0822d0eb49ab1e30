import { ThreadStatus } from "../api";

/** THREAD_STATUSES are every status a thread can have, in the order the filters offer them. */
export const THREAD_STATUSES: ThreadStatus[] = ["running", "waiting", "pausing", "paused", "completed", "failed", "killed", "interrupted", "damaged"];

/**
 * STATUS_WORDS say what a status means, for the badge's tooltip; "pausing"
 * above all, which is neither running nor paused.
 */
const STATUS_WORDS: Partial<Record<string, string>> = {
  waiting: "waits for a person's answer: the thread page and the Inbox take it",
  pausing: "a pause was asked for: the role at work finishes its step, then the thread pauses",
  paused: "paused between two steps: Resume continues it",
  interrupted: "nothing runs this thread now: Resume starts it again",
  damaged: "its head or start is missing or damaged: `uncaged-workflow doctor` says what is wrong",
};

export function Status({ s }: { s: string }) {
  return (
    <span className={`badge st-${s}`} title={STATUS_WORDS[s]}>
      {s}
    </span>
  );
}
