// TextEncoder and TextDecoder (UTF-8 only, like most of Node's use). The
// byte work is done in Go.
"use strict";

class TextEncoder {
  get encoding() {
    return "utf-8";
  }
  encode(input = "") {
    return new Uint8Array(__host.encode(String(input)));
  }
  encodeInto(source, destination) {
    const s = String(source);
    let read = 0;
    let written = 0;
    for (const ch of s) {
      const bytes = this.encode(ch);
      if (written + bytes.length > destination.length) break;
      destination.set(bytes, written);
      written += bytes.length;
      read += ch.length;
    }
    return { read, written };
  }
}

const utf8Labels = ["utf-8", "utf8", "unicode-1-1-utf-8"];

class TextDecoder {
  constructor(label = "utf-8", options) {
    const l = String(label).trim().toLowerCase();
    if (!utf8Labels.includes(l)) {
      const err = new RangeError(`The "${label}" encoding is not supported`);
      err.code = "ERR_ENCODING_NOT_SUPPORTED";
      throw err;
    }
    Object.defineProperty(this, "_state", {
      value: { fatal: !!(options && options.fatal), ignoreBOM: !!(options && options.ignoreBOM), pending: null, started: false },
    });
  }
  get encoding() {
    return "utf-8";
  }
  get fatal() {
    return this._state.fatal;
  }
  get ignoreBOM() {
    return this._state.ignoreBOM;
  }
  decode(input, options) {
    const st = this._state;
    const stream = !!(options && options.stream);
    let bytes;
    if (input === undefined || input === null) bytes = new Uint8Array(0);
    else if (input instanceof ArrayBuffer) bytes = new Uint8Array(input);
    else if (ArrayBuffer.isView(input)) bytes = new Uint8Array(input.buffer, input.byteOffset, input.byteLength);
    else {
      const err = new TypeError('The "input" argument must be an instance of ArrayBuffer or ArrayBufferView');
      err.code = "ERR_INVALID_ARG_TYPE";
      throw err;
    }
    if (st.pending !== null) {
      const joined = new Uint8Array(st.pending.length + bytes.length);
      joined.set(st.pending, 0);
      joined.set(bytes, st.pending.length);
      bytes = joined;
      st.pending = null;
    }
    const stripBOM = !st.ignoreBOM && !st.started;
    const [text, consumed] = __host.decode(bytes, st.fatal, stripBOM, stream);
    if (bytes.length > 0) st.started = stream;
    if (consumed < bytes.length) st.pending = bytes.slice(consumed);
    if (!stream) st.started = false;
    return text;
  }
}

module.exports = { TextEncoder, TextDecoder };
