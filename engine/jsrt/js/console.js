// The console global: every method formats its arguments like Node's
// util.format and appends one line to the thread's debug log (tag
// CONSOLE) through __host.log. There is no stdout to write to.
"use strict";

const { format, inspect } = require("util");

let indent = "";
const counts = new Map();
const timers = new Map();

function emit(line) {
  __host.log(indent === "" ? line : line.split("\n").map((l) => indent + l).join("\n"));
}

const log = (...args) => emit(format(...args));

module.exports = {
  log,
  info: log,
  debug: log,
  warn: log,
  error: log,
  trace(...args) {
    const stack = new Error().stack || "";
    emit("Trace" + (args.length ? ": " + format(...args) : "") + "\n" + stack.split("\n").slice(2).join("\n"));
  },
  dir(value, options) {
    emit(inspect(value, options));
  },
  table: log,
  assert(condition, ...args) {
    if (!condition) emit("Assertion failed" + (args.length ? ": " + format(...args) : ""));
  },
  count(label = "default") {
    const n = (counts.get(label) || 0) + 1;
    counts.set(label, n);
    emit(`${label}: ${n}`);
  },
  countReset(label = "default") {
    counts.delete(label);
  },
  time(label = "default") {
    timers.set(label, Date.now());
  },
  timeLog(label = "default", ...args) {
    const t = timers.get(label);
    if (t !== undefined) emit(`${label}: ${Date.now() - t}ms` + (args.length ? " " + format(...args) : ""));
  },
  timeEnd(label = "default") {
    const t = timers.get(label);
    if (t !== undefined) {
      timers.delete(label);
      emit(`${label}: ${Date.now() - t}ms`);
    }
  },
  group(...args) {
    if (args.length) log(...args);
    indent += "  ";
  },
  groupCollapsed(...args) {
    if (args.length) log(...args);
    indent += "  ";
  },
  groupEnd() {
    indent = indent.slice(2);
  },
};
