// node:child_process — spawn, execFile, exec and their sync forms. Each
// child runs in its own process group; the host kills the group when the
// run is killed or closed, so no child outlives its thread.
"use strict";

const EventEmitter = require("events");
const { Buffer } = require("buffer");
const { promisify } = require("util");

function stdioOf(options) {
  const s = options && options.stdio !== undefined ? options.stdio : "pipe";
  const arr = typeof s === "string" ? [s, s, s] : Array.isArray(s) ? s : ["pipe", "pipe", "pipe"];
  return [0, 1, 2].map((i) => {
    const v = arr[i];
    if (v === undefined || v === null || v === "pipe" || v === "overlapped") return "pipe";
    if (v === "ignore" || v === "inherit") return v;
    throw new TypeError(`stdio[${i}] = ${String(v)} is not supported (use "pipe", "ignore" or "inherit")`);
  });
}

function envOf(options) {
  const env = options && options.env;
  if (env === undefined || env === null) return null;
  return Object.keys(env)
    .filter((k) => env[k] !== undefined)
    .map((k) => `${k}=${env[k]}`);
}

function commandOf(file, args, options) {
  if (options && options.shell) {
    const shell = typeof options.shell === "string" ? options.shell : "/bin/sh";
    return { file: shell, args: ["-c", [file, ...args].join(" ")] };
  }
  return { file, args };
}

class Readable extends EventEmitter {
  constructor() {
    super();
    this.encoding = null;
    this.readable = true;
  }
  setEncoding(enc) {
    this.encoding = enc;
    return this;
  }
  _push(bytes) {
    const buf = Buffer.from(bytes);
    this.emit("data", this.encoding ? buf.toString(this.encoding) : buf);
  }
  _end() {
    this.readable = false;
    this.emit("end");
    this.emit("close");
  }
  pipe(dest) {
    this.on("data", (d) => dest.write(d));
    return dest;
  }
  resume() {
    return this;
  }
  pause() {
    return this;
  }
  destroy() {
    return this;
  }
}

class Writable extends EventEmitter {
  constructor(id) {
    super();
    this._id = id;
    this.writable = true;
  }
  write(chunk, encoding, cb) {
    if (!this.writable) {
      const err = new Error("write after end");
      err.code = "ERR_STREAM_WRITE_AFTER_END";
      throw err;
    }
    const enc = typeof encoding === "string" ? encoding : "utf8";
    const bytes = typeof chunk === "string" ? Buffer.from(chunk, enc) : Buffer.from(chunk);
    __host.write(this._id, bytes);
    const done = typeof encoding === "function" ? encoding : cb;
    if (typeof done === "function") queueMicrotask(done);
    return true;
  }
  end(chunk, encoding, cb) {
    if (typeof chunk === "function") {
      cb = chunk;
      chunk = undefined;
    }
    if (chunk !== undefined && chunk !== null) this.write(chunk, encoding);
    if (this.writable) {
      this.writable = false;
      __host.end(this._id);
    }
    if (typeof cb === "function") queueMicrotask(cb);
    this.emit("finish");
    return this;
  }
  destroy() {
    return this.end();
  }
}

class ChildProcess extends EventEmitter {
  constructor() {
    super();
    this.pid = undefined;
    this.exitCode = null;
    this.signalCode = null;
    this.killed = false;
    this.stdin = null;
    this.stdout = null;
    this.stderr = null;
    this.spawnfile = "";
    this.spawnargs = [];
  }
  kill(signal = "SIGTERM") {
    if (this._id === undefined || this.exitCode !== null || this.signalCode !== null) return false;
    const ok = __host.kill(this._id, signal);
    if (ok) this.killed = true;
    return ok;
  }
  ref() {
    return this;
  }
  unref() {
    return this;
  }
}

function spawn(file, args, options) {
  if (!Array.isArray(args)) {
    options = args;
    args = [];
  }
  if (typeof file !== "string" || file === "") {
    const err = new TypeError(`The "file" argument must be a non-empty string. Received ${typeof file}`);
    err.code = "ERR_INVALID_ARG_TYPE";
    throw err;
  }
  options = options || {};
  const stdio = stdioOf(options);
  const cmd = commandOf(file, args.map(String), options);
  const child = new ChildProcess();
  child.spawnfile = cmd.file;
  child.spawnargs = [cmd.file, ...cmd.args];
  if (stdio[1] === "pipe") child.stdout = new Readable();
  if (stdio[2] === "pipe") child.stderr = new Readable();
  let open = (child.stdout ? 1 : 0) + (child.stderr ? 1 : 0);
  let exited = false;
  const maybeClose = () => {
    if (exited && open === 0) child.emit("close", child.exitCode, child.signalCode);
  };
  const onEvent = (kind, a, b) => {
    switch (kind) {
      case "spawn":
        child.emit("spawn");
        break;
      case "stdout":
        child.stdout._push(a);
        break;
      case "stderr":
        child.stderr._push(a);
        break;
      case "stdout-end":
        child.stdout._end();
        open--;
        maybeClose();
        break;
      case "stderr-end":
        child.stderr._end();
        open--;
        maybeClose();
        break;
      case "exit":
        child.exitCode = a;
        child.signalCode = b;
        exited = true;
        child.emit("exit", a, b);
        maybeClose();
        break;
      case "error":
        child.emit("error", a);
        if (child.listenerCount("close") > 0) child.emit("close", -2, null);
        break;
    }
  };
  const handle = __host.spawn(cmd.file, cmd.args, {
    cwd: options.cwd === undefined ? null : String(options.cwd),
    env: envOf(options),
    stdio,
  }, onEvent);
  child._id = handle.id;
  child.pid = handle.pid === 0 ? undefined : handle.pid;
  if (stdio[0] === "pipe") child.stdin = new Writable(handle.id);
  if (typeof options.timeout === "number" && options.timeout > 0) {
    const t = setTimeout(() => child.kill(options.killSignal || "SIGTERM"), options.timeout);
    child.once("exit", () => clearTimeout(t));
    child.once("error", () => clearTimeout(t));
  }
  return child;
}

function normalizeExecArgs(args, options, callback) {
  if (typeof args === "function") return { args: [], options: {}, callback: args };
  if (!Array.isArray(args)) {
    callback = options;
    options = args;
    args = [];
  }
  if (typeof options === "function") {
    callback = options;
    options = {};
  }
  return { args: args || [], options: options || {}, callback };
}

function execFile(file, argsIn, optionsIn, callbackIn) {
  const { args, options, callback } = normalizeExecArgs(argsIn, optionsIn, callbackIn);
  const encoding = options.encoding === undefined ? "utf8" : options.encoding;
  const maxBuffer = options.maxBuffer === undefined ? 1024 * 1024 : options.maxBuffer;
  const child = spawn(file, args, { ...options, stdio: ["pipe", "pipe", "pipe"], timeout: undefined });
  child.stdin.end();
  const out = [];
  const err = [];
  let size = 0;
  let overflow = false;
  const collect = (list) => (chunk) => {
    size += chunk.length;
    if (size > maxBuffer && !overflow) {
      overflow = true;
      child.kill(options.killSignal || "SIGTERM");
    }
    list.push(chunk);
  };
  child.stdout.on("data", collect(out));
  child.stderr.on("data", collect(err));
  let timer = null;
  if (options.timeout > 0) {
    timer = setTimeout(() => child.kill(options.killSignal || "SIGTERM"), options.timeout);
  }
  const result = (list) => {
    const buf = Buffer.concat(list);
    return encoding && encoding !== "buffer" ? buf.toString(encoding) : buf;
  };
  let done = false;
  const finish = (error) => {
    if (done) return;
    done = true;
    if (timer) clearTimeout(timer);
    const stdout = result(out);
    const stderr = result(err);
    if (error) {
      error.stdout = stdout;
      error.stderr = stderr;
    }
    if (callback) callback(error, stdout, stderr);
  };
  child.on("error", (e) => finish(e));
  child.on("close", (code, signal) => {
    if (code === 0 && signal === null && !overflow) {
      finish(null);
      return;
    }
    const cmd = [file, ...args].join(" ");
    const e = new Error(overflow ? "stdout maxBuffer length exceeded" : `Command failed: ${cmd}\n${result(err)}`);
    if (overflow) e.code = "ERR_CHILD_PROCESS_STDIO_MAXBUFFER";
    else e.code = code;
    e.killed = child.killed;
    e.signal = signal;
    e.cmd = cmd;
    finish(e);
  });
  return child;
}

execFile[promisify.custom] = (file, args, options) =>
  new Promise((resolve, reject) => {
    execFile(file, args, options, (err, stdout, stderr) => {
      if (err) reject(err);
      else resolve({ stdout, stderr });
    });
  });

function exec(command, options, callback) {
  if (typeof options === "function") {
    callback = options;
    options = {};
  }
  options = options || {};
  const shell = typeof options.shell === "string" ? options.shell : "/bin/sh";
  return execFile(shell, ["-c", command], { ...options, shell: false }, callback);
}

exec[promisify.custom] = (command, options) =>
  new Promise((resolve, reject) => {
    exec(command, options, (err, stdout, stderr) => {
      if (err) reject(err);
      else resolve({ stdout, stderr });
    });
  });

function spawnSync(file, args, options) {
  if (!Array.isArray(args)) {
    options = args;
    args = [];
  }
  options = options || {};
  const cmd = commandOf(file, args.map(String), options);
  const input = options.input === undefined ? null : typeof options.input === "string" ? Buffer.from(options.input) : Buffer.from(options.input);
  const r = __host.spawnSync(cmd.file, cmd.args, {
    cwd: options.cwd === undefined ? null : String(options.cwd),
    env: envOf(options),
    input,
    timeout: typeof options.timeout === "number" ? options.timeout : 0,
    killSignal: options.killSignal || "SIGTERM",
    maxBuffer: options.maxBuffer === undefined ? 1024 * 1024 : options.maxBuffer,
  });
  const encoding = options.encoding;
  const conv = (b) => {
    const buf = Buffer.from(b);
    return encoding && encoding !== "buffer" ? buf.toString(encoding) : buf;
  };
  const stdout = conv(r.stdout);
  const stderr = conv(r.stderr);
  return { pid: r.pid, output: [null, stdout, stderr], stdout, stderr, status: r.status, signal: r.signal, error: r.error || undefined };
}

function checkSync(r, cmd) {
  if (r.error) throw r.error;
  if (r.status !== 0) {
    const e = new Error(`Command failed: ${cmd}${r.stderr && r.stderr.length ? "\n" + r.stderr.toString() : ""}`);
    e.status = r.status;
    e.signal = r.signal;
    e.stdout = r.stdout;
    e.stderr = r.stderr;
    e.output = r.output;
    e.pid = r.pid;
    throw e;
  }
  return r.stdout;
}

function execFileSync(file, args, options) {
  if (!Array.isArray(args)) {
    options = args;
    args = [];
  }
  const r = spawnSync(file, args, options);
  return checkSync(r, [file, ...args].join(" "));
}

function execSync(command, options) {
  options = options || {};
  const shell = typeof options.shell === "string" ? options.shell : "/bin/sh";
  const r = spawnSync(shell, ["-c", command], { ...options, shell: false });
  return checkSync(r, command);
}

module.exports = { spawn, execFile, exec, spawnSync, execFileSync, execSync, ChildProcess };
