// fetch, Headers, Request and Response over Go's net/http (__host.fetch).
// Bodies are read whole before the promise resolves; there are no
// streams. Requests are cancelled with their AbortSignal and with the run.
"use strict";

const { Buffer } = require("buffer");
const { DOMException } = require("internal:web");
const { URLSearchParams } = require("url");

function normalizeName(name) {
  const n = String(name).toLowerCase();
  if (!/^[!#$%&'*+\-.^_`|~0-9a-z]+$/.test(n)) throw new TypeError(`Invalid header name: "${name}"`);
  return n;
}

class Headers {
  constructor(init) {
    Object.defineProperty(this, "_map", { value: new Map() });
    if (init === undefined || init === null) return;
    if (init instanceof Headers) {
      for (const [k, v] of init) this.append(k, v);
    } else if (typeof init[Symbol.iterator] === "function") {
      for (const pair of init) {
        if (pair.length !== 2) throw new TypeError("Header pairs must contain exactly two items");
        this.append(pair[0], pair[1]);
      }
    } else if (typeof init === "object") {
      for (const k of Object.keys(init)) this.append(k, init[k]);
    } else {
      throw new TypeError("Headers init must be an object, an iterable of pairs or a Headers");
    }
  }
  append(name, value) {
    const n = normalizeName(name);
    const v = String(value).trim();
    const prev = this._map.get(n);
    this._map.set(n, prev === undefined ? v : `${prev}, ${v}`);
  }
  set(name, value) {
    this._map.set(normalizeName(name), String(value).trim());
  }
  get(name) {
    const v = this._map.get(normalizeName(name));
    return v === undefined ? null : v;
  }
  has(name) {
    return this._map.has(normalizeName(name));
  }
  delete(name) {
    this._map.delete(normalizeName(name));
  }
  forEach(fn, thisArg) {
    for (const [k, v] of this) fn.call(thisArg, v, k, this);
  }
  *entries() {
    yield* [...this._map.entries()].sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
  }
  *keys() {
    for (const [k] of this.entries()) yield k;
  }
  *values() {
    for (const [, v] of this.entries()) yield v;
  }
  [Symbol.iterator]() {
    return this.entries();
  }
}

function bodyBytes(body) {
  if (body === undefined || body === null) return { bytes: null, type: null };
  if (typeof body === "string") return { bytes: Buffer.from(body, "utf8"), type: "text/plain;charset=UTF-8" };
  if (body instanceof URLSearchParams) {
    return { bytes: Buffer.from(body.toString(), "utf8"), type: "application/x-www-form-urlencoded;charset=UTF-8" };
  }
  if (body instanceof ArrayBuffer) return { bytes: new Uint8Array(body.slice(0)), type: null };
  if (ArrayBuffer.isView(body)) {
    return { bytes: new Uint8Array(body.buffer.slice(body.byteOffset, body.byteOffset + body.byteLength)), type: null };
  }
  throw new TypeError("fetch: unsupported body type; use a string, ArrayBuffer, typed array, Buffer or URLSearchParams");
}

class Body {
  _initBody(bytes) {
    Object.defineProperty(this, "_body", { value: bytes, writable: true });
    Object.defineProperty(this, "_used", { value: false, writable: true });
  }
  get bodyUsed() {
    return this._used;
  }
  get body() {
    return null; // no streams: read the body with text(), json() or arrayBuffer()
  }
  _consume() {
    if (this._used) return Promise.reject(new TypeError("Body is unusable: Body has already been read"));
    this._used = true;
    const b = this._body === null ? new Uint8Array(0) : this._body;
    return Promise.resolve(b);
  }
  arrayBuffer() {
    return this._consume().then((b) => b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength));
  }
  bytes() {
    return this._consume().then((b) => new Uint8Array(b));
  }
  text() {
    return this._consume().then((b) => __host.utf8(b));
  }
  json() {
    return this.text().then((t) => JSON.parse(t));
  }
}

class Request extends Body {
  constructor(input, init = {}) {
    super();
    const base = input instanceof Request ? input : null;
    this.url = base ? base.url : String(input instanceof URL ? input.href : input);
    this.method = String(init.method !== undefined ? init.method : base ? base.method : "GET").toUpperCase();
    this.headers = new Headers(init.headers !== undefined ? init.headers : base ? base.headers : undefined);
    this.signal = init.signal !== undefined ? init.signal : base ? base.signal : null;
    this.redirect = init.redirect || (base ? base.redirect : "follow");
    let bytes = base ? base._body : null;
    if (init.body !== undefined && init.body !== null) {
      if (this.method === "GET" || this.method === "HEAD") throw new TypeError("Request with GET/HEAD method cannot have body.");
      const b = bodyBytes(init.body);
      bytes = b.bytes;
      if (b.type && !this.headers.has("content-type")) this.headers.set("content-type", b.type);
    }
    this._initBody(bytes);
  }
  clone() {
    return new Request(this);
  }
}

class Response extends Body {
  constructor(body, init = {}) {
    super();
    const b = bodyBytes(body);
    this.status = init.status === undefined ? 200 : Number(init.status);
    this.statusText = init.statusText === undefined ? "" : String(init.statusText);
    this.headers = new Headers(init.headers);
    if (b.type && !this.headers.has("content-type")) this.headers.set("content-type", b.type);
    this.url = "";
    this.redirected = false;
    this.type = "default";
    this._initBody(b.bytes);
  }
  get ok() {
    return this.status >= 200 && this.status < 300;
  }
  clone() {
    if (this._used) throw new TypeError("Response.clone: Body has already been consumed.");
    const r = new Response(null, { status: this.status, statusText: this.statusText, headers: this.headers });
    r._body = this._body;
    r.url = this.url;
    r.redirected = this.redirected;
    return r;
  }
  static json(data, init = {}) {
    const headers = new Headers(init.headers);
    if (!headers.has("content-type")) headers.set("content-type", "application/json");
    return new Response(JSON.stringify(data), { ...init, headers });
  }
  static error() {
    const r = new Response(null, { status: 0 });
    r.type = "error";
    return r;
  }
}

function fetch(input, init) {
  return new Promise((resolve, reject) => {
    const req = new Request(input, init);
    const signal = req.signal;
    if (signal && signal.aborted) {
      reject(signal.reason);
      return;
    }
    let settled = false;
    let id = 0;
    const onAbort = () => {
      if (settled) return;
      settled = true;
      __host.abort(id);
      reject(signal.reason !== undefined ? signal.reason : new DOMException("This operation was aborted", "AbortError"));
    };
    const headers = [...req.headers];
    id = __host.fetch(req.url, req.method, headers, req._body, req.redirect, (err, res) => {
      if (signal) signal.removeEventListener("abort", onAbort);
      if (settled) return;
      settled = true;
      if (err && err.code === "ERR_MEMORY_BUDGET") {
        reject(err); // the body would not fit: the budget's error, not a network one
        return;
      }
      if (err) {
        const e = new TypeError("fetch failed");
        e.cause = err;
        reject(e);
        return;
      }
      const r = new Response(null, { status: res.status, statusText: res.statusText, headers: res.headers });
      r._body = new Uint8Array(res.body);
      r.url = res.url;
      r.redirected = res.redirected;
      resolve(r);
    });
    if (signal) signal.addEventListener("abort", onAbort, { once: true });
  });
}

module.exports = { fetch, Headers, Request, Response };
