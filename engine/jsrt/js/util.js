// node:util — format and inspect (what console prints), promisify and a
// few helpers. inspect follows Node's single-line style; it does not wrap
// long output or color it.
"use strict";

const kCustom = Symbol.for("nodejs.util.inspect.custom");
const kPromisify = Symbol.for("nodejs.util.promisify.custom");

const identifier = /^[A-Za-z_$][A-Za-z0-9_$]*$/;

function quote(s) {
  return "'" + String(s).replace(/\\/g, "\\\\").replace(/'/g, "\\'").replace(/\n/g, "\\n") + "'";
}

function fnName(fn) {
  const src = Function.prototype.toString.call(fn);
  if (/^class\b/.test(src)) return fn.name ? `[class ${fn.name}]` : "[class (anonymous)]";
  return fn.name ? `[Function: ${fn.name}]` : "[Function (anonymous)]";
}

function isBufferLike(v) {
  const B = globalThis.Buffer;
  return typeof B === "function" && typeof B.isBuffer === "function" && B.isBuffer(v);
}

function inspectValue(v, depth, seen, opts) {
  switch (typeof v) {
    case "string":
      return seen.length === 0 ? v : quote(v);
    case "number":
      return Object.is(v, -0) ? "-0" : String(v);
    case "bigint":
      return `${v}n`;
    case "boolean":
    case "undefined":
      return String(v);
    case "symbol":
      return v.toString();
    case "function": {
      const keys = Object.keys(v);
      if (keys.length === 0 || depth > opts.depth) return fnName(v);
      return `${fnName(v)} ${inspectObjectBody(v, keys, depth, seen.concat([v]), opts)}`;
    }
  }
  if (v === null) return "null";
  if (seen.includes(v)) return "[Circular *1]";
  if (typeof v[kCustom] === "function" && v[kCustom] !== inspect) {
    const r = v[kCustom](opts.depth - depth, opts, inspect);
    return typeof r === "string" ? r : inspectValue(r, depth, seen, opts);
  }
  if (v instanceof Error) {
    const stack = typeof v.stack === "string" && v.stack !== "" ? v.stack : `${v.name}: ${v.message}`;
    return seen.length === 0 ? stack : `[${stack.split("\n")[0]}]`;
  }
  if (v instanceof Date) return isNaN(v.getTime()) ? "Invalid Date" : v.toISOString();
  if (v instanceof RegExp) return String(v);
  if (v instanceof Promise) return "Promise { <unknown> }";
  if (isBufferLike(v)) {
    const bytes = Array.from(v.subarray(0, 50), (b) => b.toString(16).padStart(2, "0"));
    const more = v.length > 50 ? ` ... ${v.length - 50} more bytes` : "";
    return `<Buffer${bytes.length ? " " + bytes.join(" ") : ""}${more}>`;
  }
  if (ArrayBuffer.isView(v) && !(v instanceof DataView)) {
    const name = v.constructor ? v.constructor.name : "TypedArray";
    if (depth > opts.depth) return `[${name}]`;
    const items = Array.from(v.subarray(0, 100), (x) => inspectValue(x, depth + 1, seen.concat([v]), opts));
    if (v.length > 100) items.push(`... ${v.length - 100} more items`);
    return `${name}(${v.length}) ${items.length ? "[ " + items.join(", ") + " ]" : "[]"}`;
  }
  if (v instanceof ArrayBuffer) return `ArrayBuffer { byteLength: ${v.byteLength} }`;
  const nextSeen = seen.concat([v]);
  if (v instanceof Map) {
    if (depth > opts.depth) return "[Map]";
    const items = [...v].map(([k, x]) => `${inspectValue(k, depth + 1, nextSeen, opts)} => ${inspectValue(x, depth + 1, nextSeen, opts)}`);
    return `Map(${v.size}) ${items.length ? "{ " + items.join(", ") + " }" : "{}"}`;
  }
  if (v instanceof Set) {
    if (depth > opts.depth) return "[Set]";
    const items = [...v].map((x) => inspectValue(x, depth + 1, nextSeen, opts));
    return `Set(${v.size}) ${items.length ? "{ " + items.join(", ") + " }" : "{}"}`;
  }
  if (Array.isArray(v)) {
    if (depth > opts.depth) return "[Array]";
    const items = [];
    for (let i = 0; i < Math.min(v.length, 100); i++) {
      items.push(i in v ? inspectValue(v[i], depth + 1, nextSeen, opts) : "<1 empty item>");
    }
    if (v.length > 100) items.push(`... ${v.length - 100} more items`);
    const extra = Object.keys(v).filter((k) => !/^\d+$/.test(k));
    for (const k of extra) items.push(`${identifier.test(k) ? k : quote(k)}: ${inspectValue(v[k], depth + 1, nextSeen, opts)}`);
    return items.length ? `[ ${items.join(", ")} ]` : "[]";
  }
  const proto = Object.getPrototypeOf(v);
  const ctor = proto && proto.constructor && proto.constructor !== Object ? proto.constructor.name : "";
  const prefix = proto === null ? "[Object: null prototype] " : ctor ? `${ctor} ` : "";
  if (depth > opts.depth) return ctor ? `[${ctor}]` : "[Object]";
  return prefix + inspectObjectBody(v, Object.keys(v), depth, nextSeen, opts);
}

function inspectObjectBody(v, keys, depth, seen, opts) {
  const items = keys.map((k) => `${identifier.test(k) ? k : quote(k)}: ${inspectValue(v[k], depth + 1, seen, opts)}`);
  for (const s of Object.getOwnPropertySymbols(v)) {
    if (Object.prototype.propertyIsEnumerable.call(v, s)) {
      items.push(`[${s.toString()}]: ${inspectValue(v[s], depth + 1, seen, opts)}`);
    }
  }
  return items.length ? `{ ${items.join(", ")} }` : "{}";
}

function inspect(value, opts) {
  const o = { depth: 2 };
  if (opts && typeof opts === "object") {
    if (opts.depth === null || opts.depth === Infinity) o.depth = Infinity;
    else if (typeof opts.depth === "number") o.depth = opts.depth;
  }
  // Top-level strings are quoted by inspect itself; format() passes them
  // through before calling here.
  return typeof value === "string" ? quote(value) : inspectValue(value, 0, [], o);
}
inspect.custom = kCustom;

function formatArg(v) {
  return typeof v === "string" ? v : inspect(v);
}

function format(...args) {
  if (args.length === 0) return "";
  const first = args[0];
  if (typeof first !== "string") return args.map(formatArg).join(" ");
  let i = 1;
  let out = "";
  let last = 0;
  for (let p = 0; p < first.length - 1; p++) {
    if (first[p] !== "%") continue;
    const c = first[p + 1];
    if (c === "%") {
      out += first.slice(last, p) + "%";
      last = p + 2;
      p++;
      continue;
    }
    if (i >= args.length || !"sdifjoOc".includes(c)) continue;
    const a = args[i++];
    let s;
    switch (c) {
      case "s":
        s = typeof a === "string" ? a : typeof a === "bigint" ? `${a}n` : typeof a === "object" && a !== null ? inspect(a, { depth: 0 }) : String(a);
        break;
      case "d":
        s = typeof a === "bigint" ? `${a}n` : typeof a === "object" && a !== null ? "NaN" : String(Number(a));
        break;
      case "i":
        s = typeof a === "bigint" ? `${a}n` : String(parseInt(a, 10));
        break;
      case "f":
        s = String(parseFloat(a));
        break;
      case "j":
        try {
          s = JSON.stringify(a);
        } catch (e) {
          s = "[Circular]";
        }
        break;
      case "o":
      case "O":
        s = inspect(a, { depth: c === "o" ? 4 : 2 });
        break;
      case "c":
        s = "";
        break;
    }
    out += first.slice(last, p) + s;
    last = p + 2;
    p++;
  }
  out += first.slice(last);
  for (; i < args.length; i++) out += " " + formatArg(args[i]);
  return out;
}

function promisify(fn) {
  if (typeof fn !== "function") throw new TypeError('The "original" argument must be of type function');
  if (typeof fn[kPromisify] === "function") return fn[kPromisify];
  function promisified(...args) {
    return new Promise((resolve, reject) => {
      fn.call(this, ...args, (err, ...values) => {
        if (err) reject(err);
        else resolve(values[0]);
      });
    });
  }
  Object.setPrototypeOf(promisified, Object.getPrototypeOf(fn));
  return promisified;
}
promisify.custom = kPromisify;

function callbackify(fn) {
  return function (...args) {
    const cb = args.pop();
    fn.apply(this, args).then(
      (v) => cb(null, v),
      (e) => cb(e || new Error("Promise was rejected with a falsy value")),
    );
  };
}

function inherits(ctor, superCtor) {
  Object.defineProperty(ctor, "super_", { value: superCtor, writable: true, configurable: true });
  Object.setPrototypeOf(ctor.prototype, superCtor.prototype);
}

function isDeepStrictEqual(a, b) {
  if (Object.is(a, b)) return true;
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null) return false;
  if (Object.getPrototypeOf(a) !== Object.getPrototypeOf(b)) return false;
  if (a instanceof Date) return a.getTime() === b.getTime();
  if (a instanceof Map || a instanceof Set) {
    if (a.size !== b.size) return false;
    const bi = [...b];
    return [...a].every((x, i) => isDeepStrictEqual(x, bi[i]));
  }
  const ka = Object.keys(a);
  const kb = Object.keys(b);
  if (ka.length !== kb.length) return false;
  return ka.every((k) => Object.prototype.hasOwnProperty.call(b, k) && isDeepStrictEqual(a[k], b[k]));
}

const types = {
  isPromise: (v) => v instanceof Promise,
  isDate: (v) => v instanceof Date,
  isRegExp: (v) => v instanceof RegExp,
  isMap: (v) => v instanceof Map,
  isSet: (v) => v instanceof Set,
  isUint8Array: (v) => v instanceof Uint8Array,
  isTypedArray: (v) => ArrayBuffer.isView(v) && !(v instanceof DataView),
  isArrayBuffer: (v) => v instanceof ArrayBuffer,
  isNativeError: (v) => v instanceof Error,
};

const encoding = require("internal:encoding");

module.exports = {
  format,
  inspect,
  promisify,
  callbackify,
  inherits,
  isDeepStrictEqual,
  deprecate: (fn) => fn,
  debuglog: () => () => {},
  types,
  isArray: Array.isArray,
  TextEncoder: encoding.TextEncoder,
  TextDecoder: encoding.TextDecoder,
};
