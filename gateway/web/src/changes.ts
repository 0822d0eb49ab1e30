// The gateway's change hints (GET /api/gateway/changes): one Server-Sent
// Events stream for the whole page, open while any view listens. A hint
// says only what changed (the machines, one machine's threads, a trigger);
// the views load what they show again. A view polls only while the stream
// is not up, or does not push its topic (an older gateway answers 404).
//
// api.ts imports this module too (useApi); nothing here runs at import
// time, so the two may import each other.
import { useSyncExternalStore } from "react";
import { credentialEnded, endSession } from "./api";
import { answered, check, onReach, reach } from "./reach";

/** ChangeTopic is what a change hint can be about. */
export type ChangeTopic = "machines" | "threads" | "triggers";

/**
 * ChangeEvent is one hint: machine is the machine whose threads changed,
 * trigger the trigger that changed (either may be absent: then anything of
 * the topic may have). "resync": the stream (re)opened, and hints may have
 * been missed while it was down.
 */
export type ChangeEvent = { topic: ChangeTopic | "resync"; machine?: string; trigger?: string };

/** ChangeStream is whether the stream is up (hello received, no error since) and the topics it pushes. */
export type ChangeStream = { up: boolean; topics: ChangeTopic[] };

/** CHANGES_URL is the stream's address. */
export const CHANGES_URL = "/api/gateway/changes";
/** CHANGES_RETRY_MS is how long a closed stream waits before it is opened again, doubling each time… */
export const CHANGES_RETRY_MS = 5_000;
/** …up to CHANGES_RETRY_MAX_MS. */
export const CHANGES_RETRY_MAX_MS = 60_000;

const TOPICS: ChangeTopic[] = ["machines", "threads", "triggers"];
const DOWN: ChangeStream = { up: false, topics: [] };

const listeners = new Set<(e: ChangeEvent) => void>();
const watchers = new Set<() => void>();
let stream: ChangeStream = DOWN;
let source: EventSource | null = null;
let retry: ReturnType<typeof setTimeout> | undefined;
let retryMs = CHANGES_RETRY_MS;
// After the gateway said the session's credential ended: no stream until the views go.
let refused = false;
let offReach: (() => void) | null = null;

function setStream(next: ChangeStream) {
  if (next.up === stream.up && next.topics.join() === stream.topics.join()) return;
  stream = next;
  watchers.forEach((fn) => fn());
}

function emit(e: ChangeEvent) {
  listeners.forEach((fn) => fn(e));
}

/** parseData is an event's JSON object; anything else counts as an empty one. */
function parseData(ev: Event): Record<string, unknown> {
  try {
    const v: unknown = JSON.parse((ev as MessageEvent<string>).data);
    return v && typeof v === "object" ? (v as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}

const nonEmptyString = (v: unknown) => (typeof v === "string" && v ? v : undefined);

function open() {
  clearTimeout(retry);
  retry = undefined;
  // jsdom, and some tests, have no EventSource: the views just poll.
  if (typeof EventSource === "undefined") return;
  const es = new EventSource(CHANGES_URL, { withCredentials: true });
  source = es;
  es.addEventListener("hello", (ev) => {
    if (source !== es) return;
    const named = parseData(ev).topics;
    retryMs = CHANGES_RETRY_MS;
    answered();
    setStream({ up: true, topics: TOPICS.filter((t) => Array.isArray(named) && named.includes(t)) });
    emit({ topic: "resync" });
  });
  for (const topic of TOPICS) {
    es.addEventListener(topic, (ev) => {
      if (source !== es) return;
      const d = parseData(ev);
      emit({ topic, machine: nonEmptyString(d.machine), trigger: nonEmptyString(d.trigger) });
    });
  }
  es.onerror = (ev?: Event) => {
    if (source !== es) return;
    setStream(DOWN);
    const refusal = credentialEnded(ev);
    if (refusal) {
      // Opening it again would only be refused: the session ends here.
      refused = true;
      shut();
      endSession(refusal);
      return;
    }
    // A stream fails when the gateway goes away: ask whether it still answers.
    check();
    if (es.readyState !== EventSource.CLOSED) return; // the browser reconnects by itself, and hello comes again
    shut();
    retry = setTimeout(open, retryMs);
    retryMs = Math.min(retryMs * 2, CHANGES_RETRY_MAX_MS);
  };
}

function shut() {
  clearTimeout(retry);
  retry = undefined;
  source?.close();
  source = null;
}

/** reopenNow opens the stream at once when the gateway answers again, rather than when the back-off says. */
function reopenNow() {
  if (refused || !reach().reachable || stream.up) return;
  shut();
  retryMs = CHANGES_RETRY_MS;
  open();
}

function start() {
  refused = false;
  retryMs = CHANGES_RETRY_MS;
  offReach = onReach(reopenNow);
  open();
}

function stop() {
  offReach?.();
  offReach = null;
  shut();
  refused = false;
  setStream(DOWN);
}

/**
 * subscribeChanges hears every change hint, and "resync" when the stream
 * (re)opens. The first subscriber opens the page's one stream, the last
 * one to leave closes it. It returns the unsubscriber.
 */
export function subscribeChanges(listener: (e: ChangeEvent) => void): () => void {
  listeners.add(listener);
  if (listeners.size === 1) start();
  return () => {
    if (!listeners.delete(listener)) return;
    if (listeners.size === 0) stop();
  };
}

/** onChangeStream calls fn whenever the stream goes up or down or its topics change; it returns the unsubscriber. */
export function onChangeStream(fn: () => void): () => void {
  watchers.add(fn);
  return () => {
    watchers.delete(fn);
  };
}

/** changeStream is the stream's state now, for code outside React. */
export const changeStream = (): ChangeStream => stream;

/** pushes tells whether the stream is up and pushes the topic's hints (else what shows it polls). */
export function pushes(topic: ChangeTopic): boolean {
  return stream.up && stream.topics.includes(topic);
}

/** usePushes tells whether the stream is up and pushes every one of topics (none: false); the component renders again when that changes. */
export function usePushes(topics: ChangeTopic[]): boolean {
  return useSyncExternalStore(onChangeStream, () => topics.length > 0 && topics.every(pushes));
}

/** useChangeStream is the stream's state; the component renders again when it changes. */
export function useChangeStream(): ChangeStream {
  return useSyncExternalStore(onChangeStream, changeStream);
}
