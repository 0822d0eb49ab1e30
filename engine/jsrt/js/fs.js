// node:fs — the synchronous calls, their promise forms (fs.promises,
// node:fs/promises) and callback forms. The work is done in Go (__host);
// errors carry Node's code, errno, syscall and path.
"use strict";

const { Buffer } = require("buffer");

const constants = { F_OK: 0, R_OK: 4, W_OK: 2, X_OK: 1, COPYFILE_EXCL: 1 };

function toPath(p, name = "path") {
  if (typeof p === "string") return p;
  if (typeof URL === "function" && p instanceof URL) {
    if (p.protocol !== "file:") throw new TypeError("The URL must be of scheme file");
    return decodeURIComponent(p.pathname);
  }
  if (Buffer.isBuffer(p)) return p.toString("utf8");
  const err = new TypeError(`The "${name}" argument must be of type string or an instance of Buffer or URL. Received ${p === null ? "null" : typeof p}`);
  err.code = "ERR_INVALID_ARG_TYPE";
  throw err;
}

function encodingOf(options, fallback) {
  if (typeof options === "string") return options;
  if (options && typeof options === "object" && options.encoding !== undefined && options.encoding !== null) return options.encoding;
  return fallback;
}

function decode(bytes, encoding) {
  const buf = Buffer.from(bytes);
  return encoding && encoding !== "buffer" ? buf.toString(encoding) : buf;
}

function toBytes(data, encoding) {
  if (typeof data === "string") return Buffer.from(data, encoding || "utf8");
  if (data instanceof ArrayBuffer) return new Uint8Array(data);
  if (ArrayBuffer.isView(data)) return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  const err = new TypeError(`The "data" argument must be of type string or an instance of Buffer, TypedArray, or DataView. Received ${data === null ? "null" : typeof data}`);
  err.code = "ERR_INVALID_ARG_TYPE";
  throw err;
}

function modeOf(options, fallback) {
  if (typeof options === "number") return options;
  if (options && typeof options === "object" && typeof options.mode === "number") return options.mode;
  return fallback;
}

class Stats {
  constructor(s) {
    this.dev = s.dev;
    this.ino = s.ino;
    this.mode = s.mode;
    this.nlink = s.nlink;
    this.uid = s.uid;
    this.gid = s.gid;
    this.rdev = 0;
    this.size = s.size;
    this.blksize = 4096;
    this.blocks = Math.ceil(s.size / 512);
    this.atimeMs = s.atimeMs;
    this.mtimeMs = s.mtimeMs;
    this.ctimeMs = s.ctimeMs;
    this.birthtimeMs = s.birthtimeMs;
    this.atime = new Date(s.atimeMs);
    this.mtime = new Date(s.mtimeMs);
    this.ctime = new Date(s.ctimeMs);
    this.birthtime = new Date(s.birthtimeMs);
    Object.defineProperty(this, "_type", { value: s.type });
  }
  isFile() {
    return this._type === "file";
  }
  isDirectory() {
    return this._type === "dir";
  }
  isSymbolicLink() {
    return this._type === "symlink";
  }
  isFIFO() {
    return this._type === "fifo";
  }
  isSocket() {
    return this._type === "socket";
  }
  isBlockDevice() {
    return this._type === "block";
  }
  isCharacterDevice() {
    return this._type === "char";
  }
}

class Dirent {
  constructor(name, type, parentPath) {
    this.name = name;
    this.parentPath = parentPath;
    this.path = parentPath;
    Object.defineProperty(this, "_type", { value: type });
  }
}
for (const m of ["isFile", "isDirectory", "isSymbolicLink", "isFIFO", "isSocket", "isBlockDevice", "isCharacterDevice"]) {
  Dirent.prototype[m] = Stats.prototype[m];
}

function statResult(s) {
  return s === null ? undefined : new Stats(s);
}

const sync = {
  readFileSync(path, options) {
    return decode(__host.readFile(toPath(path)), encodingOf(options, null));
  },
  writeFileSync(path, data, options) {
    __host.writeFile(toPath(path), toBytes(data, encodingOf(options, "utf8")), modeOf(options, 0o666), options && options.flag === "a");
  },
  appendFileSync(path, data, options) {
    __host.writeFile(toPath(path), toBytes(data, encodingOf(options, "utf8")), modeOf(options, 0o666), true);
  },
  mkdirSync(path, options) {
    const recursive = !!(options && typeof options === "object" && options.recursive);
    return __host.mkdir(toPath(path), recursive, modeOf(options, 0o777));
  },
  readdirSync(path, options) {
    const p = toPath(path);
    const entries = __host.readdir(p);
    if (options && typeof options === "object" && options.withFileTypes) return entries.map(([n, t]) => new Dirent(n, t, p));
    return entries.map((e) => e[0]);
  },
  statSync(path, options) {
    return statResult(__host.stat(toPath(path), false, !(options && options.throwIfNoEntry === false)));
  },
  lstatSync(path, options) {
    return statResult(__host.stat(toPath(path), true, !(options && options.throwIfNoEntry === false)));
  },
  existsSync(path) {
    try {
      return __host.exists(toPath(path));
    } catch (e) {
      return false;
    }
  },
  accessSync(path, mode) {
    __host.access(toPath(path), mode === undefined ? constants.F_OK : mode);
  },
  rmSync(path, options) {
    __host.rm(toPath(path), !!(options && options.recursive), !!(options && options.force));
  },
  rmdirSync(path, options) {
    __host.rmdir(toPath(path), !!(options && options.recursive));
  },
  unlinkSync(path) {
    __host.unlink(toPath(path));
  },
  renameSync(from, to) {
    __host.rename(toPath(from, "oldPath"), toPath(to, "newPath"));
  },
  copyFileSync(src, dest, mode) {
    __host.copyFile(toPath(src, "src"), toPath(dest, "dest"), ((mode || 0) & constants.COPYFILE_EXCL) !== 0);
  },
  realpathSync(path) {
    return __host.realpath(toPath(path));
  },
  mkdtempSync(prefix) {
    return __host.mkdtemp(String(prefix));
  },
  readlinkSync(path) {
    return __host.readlink(toPath(path));
  },
  symlinkSync(target, path) {
    __host.symlink(toPath(target, "target"), toPath(path));
  },
  chmodSync(path, mode) {
    __host.chmod(toPath(path), typeof mode === "string" ? parseInt(mode, 8) : mode);
  },
};

const promises = { constants };
const callbacks = {};
for (const name of Object.keys(sync)) {
  if (name === "existsSync") continue;
  const base = name.slice(0, -"Sync".length);
  const fn = sync[name];
  promises[base] = (...args) => new Promise((resolve) => resolve(fn(...args)));
  callbacks[base] = (...args) => {
    const cb = args.pop();
    if (typeof cb !== "function") {
      const err = new TypeError(`The "cb" argument must be of type function. Received ${typeof cb}`);
      err.code = "ERR_INVALID_ARG_TYPE";
      throw err;
    }
    promises[base](...args).then(
      (v) => cb(null, v),
      (e) => cb(e),
    );
  };
}
callbacks.exists = (path, cb) => {
  Promise.resolve().then(() => cb(sync.existsSync(path)));
};

module.exports = { ...sync, ...callbacks, promises, constants, Stats, Dirent };
