// Web platform globals Node has and goja lacks: DOMException, Event,
// EventTarget, AbortController/AbortSignal, structuredClone, performance.
"use strict";

const timers = require("timers");

const domCodes = { IndexSizeError: 1, NotFoundError: 8, NotSupportedError: 9, InvalidStateError: 11, SyntaxError: 12, AbortError: 20, TimeoutError: 23, DataCloneError: 25 };

class DOMException extends Error {
  constructor(message = "", options) {
    super(message);
    const name = typeof options === "string" ? options : options && options.name !== undefined ? String(options.name) : "Error";
    Object.defineProperty(this, "name", { value: name, writable: true, configurable: true });
    if (options && typeof options === "object" && "cause" in options) this.cause = options.cause;
  }
  get code() {
    return domCodes[this.name] || 0;
  }
}

const kStop = Symbol("stop");

class Event {
  constructor(type, init) {
    if (arguments.length === 0) throw new TypeError('The "type" argument must be specified');
    this.type = String(type);
    this.bubbles = !!(init && init.bubbles);
    this.cancelable = !!(init && init.cancelable);
    this.composed = !!(init && init.composed);
    this.defaultPrevented = false;
    this.timeStamp = __host.now();
    this.target = null;
    this.currentTarget = null;
    this[kStop] = false;
  }
  preventDefault() {
    if (this.cancelable) this.defaultPrevented = true;
  }
  stopPropagation() {}
  stopImmediatePropagation() {
    this[kStop] = true;
  }
}

const kListeners = Symbol("listeners");

class EventTarget {
  constructor() {
    Object.defineProperty(this, kListeners, { value: new Map() });
  }
  addEventListener(type, listener, options) {
    if (listener === null || listener === undefined) return;
    const once = typeof options === "object" && options !== null && !!options.once;
    const signal = typeof options === "object" && options !== null ? options.signal : undefined;
    if (signal && signal.aborted) return;
    const list = this[kListeners].get(type) || [];
    if (list.some((l) => l.listener === listener)) return;
    this[kListeners].set(type, list.concat([{ listener, once }]));
    if (signal) signal.addEventListener("abort", () => this.removeEventListener(type, listener), { once: true });
  }
  removeEventListener(type, listener) {
    const list = this[kListeners].get(type);
    if (!list) return;
    this[kListeners].set(
      type,
      list.filter((l) => l.listener !== listener),
    );
  }
  dispatchEvent(event) {
    event.target = this;
    event.currentTarget = this;
    const list = this[kListeners].get(event.type) || [];
    for (const l of list) {
      if (l.once) this.removeEventListener(event.type, l.listener);
      try {
        if (typeof l.listener === "function") l.listener.call(this, event);
        else if (l.listener && typeof l.listener.handleEvent === "function") l.listener.handleEvent(event);
      } catch (e) {
        // A throwing listener does not stop the others; the exception
        // surfaces as uncaught, as in Node.
        timers.queueMicrotask(() => {
          throw e;
        });
      }
      if (event[kStop]) break;
    }
    event.currentTarget = null;
    return !event.defaultPrevented;
  }
}

const kInternal = Symbol("internal");

class AbortSignal extends EventTarget {
  constructor(key) {
    if (key !== kInternal) throw new TypeError("Illegal constructor");
    super();
    this.aborted = false;
    this.reason = undefined;
    this.onabort = null;
  }
  throwIfAborted() {
    if (this.aborted) throw this.reason;
  }
  static abort(reason) {
    const s = new AbortSignal(kInternal);
    abortSignal(s, reason);
    return s;
  }
  static timeout(ms) {
    const s = new AbortSignal(kInternal);
    // The timer does not keep a step waiting: only what uses the signal
    // (a fetch, say) does.
    timers
      .setTimeout(() => abortSignal(s, new DOMException("The operation was aborted due to timeout", "TimeoutError")), ms)
      .unref();
    return s;
  }
  static any(signals) {
    const s = new AbortSignal(kInternal);
    for (const sig of signals) {
      if (sig.aborted) {
        abortSignal(s, sig.reason);
        return s;
      }
    }
    for (const sig of signals) sig.addEventListener("abort", () => abortSignal(s, sig.reason), { once: true });
    return s;
  }
}

function abortSignal(signal, reason) {
  if (signal.aborted) return;
  signal.aborted = true;
  signal.reason = reason === undefined ? new DOMException("This operation was aborted", "AbortError") : reason;
  const event = new Event("abort");
  if (typeof signal.onabort === "function") {
    try {
      signal.onabort.call(signal, event);
    } catch (e) {
      timers.queueMicrotask(() => {
        throw e;
      });
    }
  }
  signal.dispatchEvent(event);
}

class AbortController {
  constructor() {
    this.signal = new AbortSignal(kInternal);
  }
  abort(reason) {
    abortSignal(this.signal, reason);
  }
}

function structuredClone(value, seen = new Map()) {
  if (value === null || typeof value !== "object") {
    if (typeof value === "function" || typeof value === "symbol") {
      throw new DOMException(`${String(value)} could not be cloned.`, "DataCloneError");
    }
    return value;
  }
  if (seen.has(value)) return seen.get(value);
  let out;
  if (value instanceof Date) out = new Date(value.getTime());
  else if (value instanceof RegExp) out = new RegExp(value.source, value.flags);
  else if (value instanceof ArrayBuffer) out = value.slice(0);
  else if (ArrayBuffer.isView(value)) out = new value.constructor(value);
  else if (value instanceof Map) {
    out = new Map();
    seen.set(value, out);
    for (const [k, v] of value) out.set(structuredClone(k, seen), structuredClone(v, seen));
    return out;
  } else if (value instanceof Set) {
    out = new Set();
    seen.set(value, out);
    for (const v of value) out.add(structuredClone(v, seen));
    return out;
  } else if (value instanceof Error) {
    out = new Error(value.message);
    out.name = value.name;
    out.stack = value.stack;
  } else if (Array.isArray(value)) {
    out = [];
    seen.set(value, out);
    for (let i = 0; i < value.length; i++) out[i] = structuredClone(value[i], seen);
    return out;
  } else {
    out = {};
    seen.set(value, out);
    for (const k of Object.keys(value)) out[k] = structuredClone(value[k], seen);
    return out;
  }
  seen.set(value, out);
  return out;
}

const performance = {
  timeOrigin: __host.timeOrigin,
  now: () => __host.now(),
  mark() {},
  measure() {},
  toJSON() {
    return { timeOrigin: this.timeOrigin };
  },
};

module.exports = {
  DOMException,
  Event,
  EventTarget,
  AbortSignal,
  AbortController,
  structuredClone: (value) => structuredClone(value),
  performance,
};
