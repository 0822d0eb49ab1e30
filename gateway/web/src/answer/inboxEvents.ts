// The inbox's count lives in the top bar, far from the forms that change it:
// an answer taken (or refused as already given) tells the count to ask again
// now rather than at its next poll.

type Listener = () => void;
const listeners = new Set<Listener>();

/** inboxChanged says that a waiting thread was answered, or found answered. */
export function inboxChanged() {
  listeners.forEach((fn) => fn());
}

/** onInboxChange registers fn for inboxChanged; it returns the unsubscriber. */
export function onInboxChange(fn: Listener): () => void {
  listeners.add(fn);
  return () => {
    listeners.delete(fn);
  };
}
