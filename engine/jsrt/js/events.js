// node:events — the EventEmitter subset bundles and the child_process
// module use. Listener errors propagate to the emitter as in Node.
"use strict";

const kEvents = Symbol("events");

function listenersOf(emitter) {
  if (!Object.prototype.hasOwnProperty.call(emitter, kEvents)) {
    Object.defineProperty(emitter, kEvents, { value: new Map(), enumerable: false, configurable: true });
  }
  return emitter[kEvents];
}

function checkListener(listener) {
  if (typeof listener !== "function") {
    const err = new TypeError(`The "listener" argument must be of type function. Received ${typeof listener}`);
    err.code = "ERR_INVALID_ARG_TYPE";
    throw err;
  }
}

class EventEmitter {
  constructor() {
    listenersOf(this);
  }

  on(name, listener) {
    return this.addListener(name, listener);
  }

  addListener(name, listener) {
    checkListener(listener);
    if (name !== "newListener" && this.listenerCount("newListener") > 0) this.emit("newListener", name, listener);
    const map = listenersOf(this);
    const list = map.get(name) || [];
    map.set(name, [...list, { fn: listener, once: false }]);
    return this;
  }

  prependListener(name, listener) {
    checkListener(listener);
    const map = listenersOf(this);
    map.set(name, [{ fn: listener, once: false }, ...(map.get(name) || [])]);
    return this;
  }

  once(name, listener) {
    checkListener(listener);
    const map = listenersOf(this);
    map.set(name, [...(map.get(name) || []), { fn: listener, once: true }]);
    return this;
  }

  prependOnceListener(name, listener) {
    checkListener(listener);
    const map = listenersOf(this);
    map.set(name, [{ fn: listener, once: true }, ...(map.get(name) || [])]);
    return this;
  }

  off(name, listener) {
    return this.removeListener(name, listener);
  }

  removeListener(name, listener) {
    const map = listenersOf(this);
    const list = map.get(name);
    if (!list) return this;
    const i = list.findIndex((l) => l.fn === listener);
    if (i >= 0) {
      const next = list.slice(0, i).concat(list.slice(i + 1));
      if (next.length === 0) map.delete(name);
      else map.set(name, next);
      if (this.listenerCount("removeListener") > 0) this.emit("removeListener", name, listener);
    }
    return this;
  }

  removeAllListeners(name) {
    const map = listenersOf(this);
    if (name === undefined) map.clear();
    else map.delete(name);
    return this;
  }

  emit(name, ...args) {
    const map = listenersOf(this);
    const list = map.get(name);
    if (!list || list.length === 0) {
      if (name === "error") {
        const err = args[0];
        if (err instanceof Error) throw err;
        const e = new Error(`Unhandled error. (${String(err)})`);
        e.code = "ERR_UNHANDLED_ERROR";
        e.context = err;
        throw e;
      }
      return false;
    }
    for (const l of list) {
      if (l.once) this.removeListener(name, l.fn);
      l.fn.apply(this, args);
    }
    return true;
  }

  listenerCount(name) {
    const list = listenersOf(this).get(name);
    return list ? list.length : 0;
  }

  listeners(name) {
    return (listenersOf(this).get(name) || []).map((l) => l.fn);
  }

  rawListeners(name) {
    return this.listeners(name);
  }

  eventNames() {
    return [...listenersOf(this).keys()];
  }

  setMaxListeners() {
    return this;
  }

  getMaxListeners() {
    return EventEmitter.defaultMaxListeners;
  }
}

EventEmitter.defaultMaxListeners = 10;
EventEmitter.EventEmitter = EventEmitter;

// once(emitter, name) resolves with the arguments of the next `name`
// event, or rejects on 'error'.
EventEmitter.once = function once(emitter, name, options) {
  return new Promise((resolve, reject) => {
    const signal = options && options.signal;
    const onEvent = (...args) => {
      if (name !== "error") emitter.removeListener("error", onError);
      resolve(args);
    };
    const onError = (err) => {
      emitter.removeListener(name, onEvent);
      reject(err);
    };
    emitter.once(name, onEvent);
    if (name !== "error") emitter.once("error", onError);
    if (signal) {
      signal.addEventListener(
        "abort",
        () => {
          emitter.removeListener(name, onEvent);
          emitter.removeListener("error", onError);
          reject(signal.reason);
        },
        { once: true },
      );
    }
  });
};

module.exports = EventEmitter;
