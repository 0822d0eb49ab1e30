// node:buffer — goja_nodejs's Buffer (a Uint8Array subclass with the
// read/write helpers), completed with what it lacks: the encodings
// base64url, latin1/binary, ascii and utf16le, case-insensitive encoding
// names, byteLength, isBuffer, compare, copy, string fill/indexOf, toJSON.
// String codecs are Go (__host).
"use strict";

const Buffer = __host.Buffer;
const proto = Buffer.prototype;
const baseFrom = Buffer.from;
const baseAlloc = Buffer.alloc;

const encodings = {
  utf8: "utf8",
  "utf-8": "utf8",
  hex: "hex",
  base64: "base64",
  base64url: "base64url",
  latin1: "latin1",
  binary: "latin1",
  ascii: "ascii",
  ucs2: "utf16le",
  "ucs-2": "utf16le",
  utf16le: "utf16le",
  "utf-16le": "utf16le",
};

function encodingOf(enc) {
  if (enc === undefined || enc === null) return "utf8";
  const e = encodings[String(enc).toLowerCase()];
  if (e === undefined) {
    const err = new TypeError(`Unknown encoding: ${enc}`);
    err.code = "ERR_UNKNOWN_ENCODING";
    throw err;
  }
  return e;
}

function wrap(arrayBuffer) {
  return baseFrom(arrayBuffer);
}

Buffer.from = function from(value, encodingOrOffset, length) {
  if (typeof value === "string") return wrap(__host.encode(value, encodingOf(encodingOrOffset)));
  if (value instanceof ArrayBuffer) {
    const offset = encodingOrOffset === undefined ? 0 : Number(encodingOrOffset);
    const len = length === undefined ? value.byteLength - offset : Number(length);
    return baseFrom(value, offset, len);
  }
  return baseFrom(value);
};

Buffer.alloc = function alloc(size, fill, encoding) {
  if (typeof fill === "string") {
    const buf = baseAlloc(size);
    const pattern = Buffer.from(fill, encoding);
    if (pattern.length > 0) for (let i = 0; i < buf.length; i++) buf[i] = pattern[i % pattern.length];
    return buf;
  }
  return fill === undefined ? baseAlloc(size) : baseAlloc(size, fill);
};
Buffer.allocUnsafe = (size) => baseAlloc(size);
Buffer.allocUnsafeSlow = (size) => baseAlloc(size);

Buffer.isBuffer = (v) => v instanceof Buffer;
Buffer.isEncoding = (e) => typeof e === "string" && encodings[e.toLowerCase()] !== undefined;

Buffer.byteLength = function byteLength(value, encoding) {
  if (typeof value === "string") return __host.byteLength(value, encodingOf(encoding));
  if (value instanceof ArrayBuffer || ArrayBuffer.isView(value)) return value.byteLength;
  const err = new TypeError('The "string" argument must be of type string or an instance of Buffer or ArrayBuffer.');
  err.code = "ERR_INVALID_ARG_TYPE";
  throw err;
};

Buffer.compare = function compare(a, b) {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    if (a[i] !== b[i]) return a[i] < b[i] ? -1 : 1;
  }
  return a.length === b.length ? 0 : a.length < b.length ? -1 : 1;
};

function clampRange(len, start, end) {
  let s = start === undefined ? 0 : Math.trunc(Number(start)) || 0;
  let e = end === undefined ? len : Math.trunc(Number(end)) || 0;
  if (s < 0) s = 0;
  if (e > len) e = len;
  return [s, e];
}

proto.toString = function toString(encoding, start, end) {
  const [s, e] = clampRange(this.length, start, end);
  if (s >= e) return "";
  return __host.decode(this.subarray(s, e), encodingOf(encoding));
};
proto.toLocaleString = proto.toString;

proto.toJSON = function toJSON() {
  return { type: "Buffer", data: Array.from(this) };
};

proto.slice = function slice(start, end) {
  return this.subarray(start, end);
};

proto.compare = function compare(target) {
  return Buffer.compare(this, target);
};

proto.copy = function copy(target, targetStart = 0, sourceStart = 0, sourceEnd = this.length) {
  const src = this.subarray(sourceStart, sourceEnd);
  const n = Math.min(src.length, target.length - targetStart);
  if (n <= 0) return 0;
  target.set(src.subarray(0, n), targetStart);
  return n;
};

proto.write = function write(string, offset, length, encoding) {
  if (typeof offset === "string") {
    encoding = offset;
    offset = 0;
    length = undefined;
  } else if (typeof length === "string") {
    encoding = length;
    length = undefined;
  }
  const o = offset === undefined ? 0 : Number(offset);
  const bytes = Buffer.from(String(string), encoding);
  const n = Math.min(bytes.length, this.length - o, length === undefined ? Infinity : Number(length));
  if (n <= 0) return 0;
  this.set(bytes.subarray(0, n), o);
  return n;
};

const baseFill = Uint8Array.prototype.fill;
proto.fill = function fill(value, offset, end, encoding) {
  if (typeof offset === "string") {
    encoding = offset;
    offset = 0;
    end = this.length;
  }
  if (typeof value === "string") {
    const [s, e] = clampRange(this.length, offset, end);
    const pattern = Buffer.from(value, encoding);
    if (pattern.length === 0) return baseFill.call(this, 0, s, e);
    for (let i = s; i < e; i++) this[i] = pattern[(i - s) % pattern.length];
    return this;
  }
  return baseFill.call(this, value, offset, end);
};

function needle(value, encoding) {
  if (typeof value === "string") return Buffer.from(value, encoding);
  if (typeof value === "number") return null;
  return value;
}

const baseIndexOf = Uint8Array.prototype.indexOf;
const baseLastIndexOf = Uint8Array.prototype.lastIndexOf;

proto.indexOf = function indexOf(value, byteOffset = 0, encoding) {
  const n = needle(value, encoding);
  if (n === null) return baseIndexOf.call(this, value & 0xff, byteOffset);
  let start = byteOffset < 0 ? Math.max(this.length + byteOffset, 0) : byteOffset;
  if (n.length === 0) return Math.min(start, this.length);
  outer: for (let i = start; i <= this.length - n.length; i++) {
    for (let j = 0; j < n.length; j++) if (this[i + j] !== n[j]) continue outer;
    return i;
  }
  return -1;
};

proto.lastIndexOf = function lastIndexOf(value, byteOffset, encoding) {
  const n = needle(value, encoding);
  if (n === null) return baseLastIndexOf.call(this, value & 0xff, byteOffset === undefined ? this.length - 1 : byteOffset);
  let start = byteOffset === undefined ? this.length - n.length : Math.min(byteOffset, this.length - n.length);
  outer: for (let i = start; i >= 0; i--) {
    for (let j = 0; j < n.length; j++) if (this[i + j] !== n[j]) continue outer;
    return i;
  }
  return -1;
};

proto.includes = function includes(value, byteOffset, encoding) {
  return this.indexOf(value, byteOffset, encoding) !== -1;
};

function atob(data) {
  return __host.atob(String(data));
}

function btoa(data) {
  return __host.btoa(String(data));
}

const kMaxLength = 2 ** 32;

module.exports = { Buffer, atob, btoa, kMaxLength, constants: { MAX_LENGTH: kMaxLength, MAX_STRING_LENGTH: 2 ** 29 } };
