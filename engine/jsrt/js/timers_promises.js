// node:timers/promises — promise-returning timers, abortable with a signal.
"use strict";

const timers = require("timers");

function abortError(signal) {
  const err = new Error("The operation was aborted");
  err.name = "AbortError";
  err.code = "ABORT_ERR";
  err.cause = signal.reason;
  return err;
}

function delayed(schedule, value, options) {
  const signal = options && options.signal;
  return new Promise((resolve, reject) => {
    if (signal && signal.aborted) {
      reject(abortError(signal));
      return;
    }
    const onAbort = () => {
      timers.clearTimeout(handle);
      reject(abortError(signal));
    };
    const handle = schedule(() => {
      if (signal) signal.removeEventListener("abort", onAbort);
      resolve(value);
    });
    if (options && options.ref === false) handle.unref();
    if (signal) signal.addEventListener("abort", onAbort, { once: true });
  });
}

function setTimeout(ms, value, options) {
  return delayed((fn) => timers.setTimeout(fn, ms), value, options);
}

function setImmediate(value, options) {
  return delayed((fn) => timers.setImmediate(fn), value, options);
}

module.exports = {
  setTimeout,
  setImmediate,
  scheduler: {
    wait: (ms, options) => setTimeout(ms, undefined, options),
    yield: () => setImmediate(),
  },
};
