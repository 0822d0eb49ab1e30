// Whether the gateway answers: one state for the whole page, fed by every
// request (api) and every live stream, so that no view goes on showing
// machines online, or actions enabled, while nothing gets through. While it
// does not answer, a probe asks again until it does; every view then
// refreshes at once (useApi, useLive).
import { useSyncExternalStore } from "react";

/**
 * Reach is the gateway's reachability as this page last saw it. lastContact
 * is when the gateway last answered (ms), null before its first answer;
 * since is when it stopped answering, null while it answers.
 */
export type Reach = { reachable: boolean; lastContact: number | null; since: number | null };

/** RETRY_MS is how long the probe waits between two tries while the gateway does not answer. */
export const RETRY_MS = 2000;

let state: Reach = { reachable: true, lastContact: null, since: null };
// Kept apart from state: every answer moves it, and only a change of
// reachability is news to the views.
let lastContact: number | null = null;
const listeners = new Set<() => void>();
let probe: (() => Promise<unknown>) | null = null;
let probing = false;
let retry: ReturnType<typeof setTimeout> | undefined;

function set(next: Reach) {
  state = next;
  listeners.forEach((fn) => fn());
}

/** answered records that the gateway answered (any answer of its own, an error too). */
export function answered(now = Date.now()) {
  lastContact = now;
  if (state.reachable) return;
  clearTimeout(retry);
  retry = undefined;
  set({ reachable: true, lastContact: now, since: null });
}

/** unanswered records that a request got no answer from the gateway; the probe then tries again until it answers. */
export function unanswered(now = Date.now()) {
  if (state.reachable) set({ reachable: false, lastContact, since: now });
  if (retry === undefined && !probing) retry = setTimeout(check, RETRY_MS);
}

/**
 * check asks the gateway now (the probe api.ts set), unless a check is
 * under way; the probe's request reports its own outcome (answered or
 * unanswered). A stream that failed calls it: a stream fails for other
 * reasons too (its machine went away), so that alone says nothing.
 */
export function check() {
  clearTimeout(retry);
  retry = undefined;
  if (!probe || probing) return;
  probing = true;
  probe()
    .catch(() => {
      /* the request reported it */
    })
    .finally(() => {
      probing = false;
      if (!state.reachable && retry === undefined) retry = setTimeout(check, RETRY_MS);
    });
}

/** setProbe sets the request check makes: a cheap one to the gateway itself. */
export function setProbe(fn: () => Promise<unknown>) {
  probe = fn;
}

/** reach is the current state, for code outside React. */
export const reach = () => state;

/** onReach calls fn whenever reachability changes; it returns the unsubscriber. */
export function onReach(fn: () => void): () => void {
  listeners.add(fn);
  return () => listeners.delete(fn);
}

/** useReach is the current state; the component renders again when it changes. */
export function useReach(): Reach {
  return useSyncExternalStore(onReach, reach);
}

/** UNREACHABLE_REASON is why an action is disabled while the gateway does not answer. */
export const UNREACHABLE_REASON = "the gateway does not answer: actions need it";

/** resetReach forgets everything (tests). */
export function resetReach() {
  clearTimeout(retry);
  retry = undefined;
  probing = false;
  lastContact = null;
  state = { reachable: true, lastContact: null, since: null };
}
