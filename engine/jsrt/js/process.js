// node:process — the parts a workflow bundle can use. env reads the
// thread's environment (read-only); exit() is refused because a workflow
// ends by returning a completion from run.
"use strict";

const EventEmitter = require("events");

const process = new EventEmitter();

function hrtime(previous) {
  const ns = __host.hrtime();
  let sec = Math.floor(ns / 1e9);
  let nsec = ns - sec * 1e9;
  if (Array.isArray(previous)) {
    sec -= previous[0];
    nsec -= previous[1];
    if (nsec < 0) {
      sec -= 1;
      nsec += 1e9;
    }
  }
  return [sec, nsec];
}
hrtime.bigint = () => BigInt(Math.floor(__host.hrtime()));

function stream(fd) {
  return {
    fd,
    isTTY: false,
    write(chunk, encoding, cb) {
      const text = typeof chunk === "string" ? chunk : require("buffer").Buffer.from(chunk).toString(typeof encoding === "string" ? encoding : "utf8");
      __host.log(text.endsWith("\n") ? text.slice(0, -1) : text);
      const done = typeof encoding === "function" ? encoding : cb;
      if (typeof done === "function") queueMicrotask(done);
      return true;
    },
    on() {
      return this;
    },
    once() {
      return this;
    },
    end() {},
  };
}

Object.assign(process, {
  env: __host.env,
  platform: __host.platform,
  arch: __host.arch,
  pid: __host.pid,
  ppid: __host.ppid,
  argv: ["uncaged-workflow", __host.bundle],
  argv0: "uncaged-workflow",
  execArgv: [],
  execPath: "",
  title: "uncaged-workflow",
  version: "",
  versions: {},
  release: { name: "uncaged-workflow" },
  exitCode: undefined,
  cwd: () => __host.cwd(),
  chdir() {
    throw new Error("process.chdir() is not available in workflow bundles; pass cwd to the call that needs it");
  },
  exit() {
    throw new Error("process.exit() is not available in workflow bundles; return { returnCode, summary } from run instead");
  },
  abort() {
    throw new Error("process.abort() is not available in workflow bundles");
  },
  kill() {
    throw new Error("process.kill() is not available in workflow bundles; kill child processes through their handle");
  },
  nextTick(fn, ...args) {
    queueMicrotask(() => fn(...args));
  },
  hrtime,
  uptime: () => __host.hrtime() / 1e9,
  memoryUsage: () => ({ rss: 0, heapTotal: 0, heapUsed: 0, external: 0, arrayBuffers: 0 }),
  emitWarning(warning) {
    __host.log(`Warning: ${warning instanceof Error ? warning.message : String(warning)}`);
  },
  stdout: stream(1),
  stderr: stream(2),
});

module.exports = process;
