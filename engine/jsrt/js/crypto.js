// node:crypto — random values, UUIDs, hashes and HMACs (Go's crypto).
// The global `crypto` is webcrypto without `subtle`.
"use strict";

const { Buffer } = require("buffer");
const { DOMException } = require("internal:web");

function bytesOf(data, encoding) {
  if (typeof data === "string") return Buffer.from(data, encoding || "utf8");
  if (data instanceof ArrayBuffer) return new Uint8Array(data);
  if (ArrayBuffer.isView(data)) return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  const err = new TypeError('The "data" argument must be of type string or an instance of Buffer, TypedArray, or DataView.');
  err.code = "ERR_INVALID_ARG_TYPE";
  throw err;
}

function randomUUID() {
  return __host.randomUUID();
}

function getRandomValues(array) {
  if (!ArrayBuffer.isView(array) || array instanceof DataView || array instanceof Float32Array || array instanceof Float64Array) {
    throw new DOMException("The data argument must be an integer-type TypedArray", "TypeMismatchError");
  }
  if (array.byteLength > 65536) {
    throw new DOMException(`The ArrayBufferView's byte length (${array.byteLength}) exceeds the number of bytes of entropy available via this API (65536)`, "QuotaExceededError");
  }
  __host.fillRandom(new Uint8Array(array.buffer, array.byteOffset, array.byteLength));
  return array;
}

function randomBytes(size, callback) {
  const buf = Buffer.alloc(size);
  __host.fillRandom(buf);
  if (typeof callback === "function") {
    queueMicrotask(() => callback(null, buf));
    return undefined;
  }
  return buf;
}

function randomInt(min, max, callback) {
  if (max === undefined || typeof max === "function") {
    callback = max;
    max = min;
    min = 0;
  }
  const n = __host.randomInt(min, max);
  if (typeof callback === "function") {
    queueMicrotask(() => callback(null, n));
    return undefined;
  }
  return n;
}

const algorithms = ["md5", "sha1", "sha224", "sha256", "sha384", "sha512"];

function algorithm(name) {
  const a = String(name).toLowerCase().replace(/^sha-/, "sha");
  if (!algorithms.includes(a)) {
    const err = new Error(`Digest method not supported: ${name}`);
    err.code = "ERR_CRYPTO_INVALID_DIGEST";
    throw err;
  }
  return a;
}

class Hash {
  constructor(alg, key) {
    this._alg = alg;
    this._key = key;
    this._chunks = [];
    this._done = false;
  }
  update(data, encoding) {
    if (this._done) {
      const err = new Error("Digest already called");
      err.code = "ERR_CRYPTO_HASH_FINALIZED";
      throw err;
    }
    this._chunks.push(Buffer.from(bytesOf(data, encoding)));
    return this;
  }
  digest(encoding) {
    this._done = true;
    const out = Buffer.from(__host.digest(this._alg, Buffer.concat(this._chunks), this._key));
    return encoding && encoding !== "buffer" ? out.toString(encoding) : out;
  }
  copy() {
    const h = new Hash(this._alg, this._key);
    h._chunks = this._chunks.slice();
    return h;
  }
}

function createHash(name) {
  return new Hash(algorithm(name), null);
}

function createHmac(name, key) {
  return new Hash(algorithm(name), Buffer.from(bytesOf(key)));
}

function hash(name, data, encoding = "hex") {
  return createHash(name).update(data).digest(encoding);
}

function timingSafeEqual(a, b) {
  const x = bytesOf(a);
  const y = bytesOf(b);
  if (x.length !== y.length) {
    const err = new RangeError("Input buffers must have the same byte length");
    err.code = "ERR_CRYPTO_TIMING_SAFE_EQUAL_LENGTH";
    throw err;
  }
  let d = 0;
  for (let i = 0; i < x.length; i++) d |= x[i] ^ y[i];
  return d === 0;
}

const webcrypto = { getRandomValues, randomUUID };

module.exports = {
  randomUUID,
  getRandomValues,
  randomBytes,
  randomInt,
  createHash,
  createHmac,
  hash,
  timingSafeEqual,
  getHashes: () => algorithms.slice(),
  webcrypto,
};
