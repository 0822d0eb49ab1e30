// node:timers and the timer globals. The timers themselves live in the Go
// event loop (__host); these classes give them Node's handle API.
"use strict";

class Timeout {
  constructor(id) {
    Object.defineProperty(this, "_id", { value: id });
  }
  ref() {
    __host.ref(this._id, true);
    return this;
  }
  unref() {
    __host.ref(this._id, false);
    return this;
  }
  hasRef() {
    return __host.hasRef(this._id);
  }
  refresh() {
    __host.refresh(this._id);
    return this;
  }
  close() {
    __host.clear(this._id);
    return this;
  }
  [Symbol.toPrimitive]() {
    return this._id;
  }
}

class Immediate extends Timeout {}

function checkCallback(fn) {
  if (typeof fn !== "function") {
    const err = new TypeError(`The "callback" argument must be of type function. Received ${fn === null ? "null" : typeof fn}`);
    err.code = "ERR_INVALID_ARG_TYPE";
    throw err;
  }
}

function setTimeout(fn, ms, ...args) {
  checkCallback(fn);
  return new Timeout(__host.start(fn, ms, args, false));
}

function setInterval(fn, ms, ...args) {
  checkCallback(fn);
  return new Timeout(__host.start(fn, ms, args, true));
}

function setImmediate(fn, ...args) {
  checkCallback(fn);
  return new Immediate(__host.immediate(fn, args));
}

function clear(handle) {
  if (handle === null || handle === undefined) return;
  const id = typeof handle === "object" ? handle._id : Number(handle);
  if (typeof id === "number" && !Number.isNaN(id)) __host.clear(id);
}

function queueMicrotask(fn) {
  checkCallback(fn);
  Promise.resolve().then(() => {
    try {
      fn();
    } catch (e) {
      __host.uncaught(e);
    }
  });
}

module.exports = {
  setTimeout,
  setInterval,
  setImmediate,
  clearTimeout: clear,
  clearInterval: clear,
  clearImmediate: clear,
  queueMicrotask,
  Timeout,
  Immediate,
};
Object.defineProperty(module.exports, "promises", {
  enumerable: true,
  get: () => require("timers/promises"),
});
