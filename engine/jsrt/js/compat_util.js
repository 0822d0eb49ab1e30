// @uncaged/workflow-util as this engine provides it to bundles: Result
// constructors, Crockford Base32 and ULIDs, environment helpers, the JSONL
// logger, refs helpers and the storage-root paths.
import { appendFileSync } from "fs";
import { homedir } from "os";
import { join } from "path";
import { getRandomValues } from "crypto";
import { err, ok } from "@uncaged/workflow-runtime";

export { err, ok };

export const CROCKFORD_BASE32_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";

// Bits are written most significant first, left-padded with zero bits to a
// whole number of 5-bit characters.
const padBits = (bitLength) => (5 - (bitLength % 5)) % 5;

export function encodeCrockfordBase32Bits(value, bitLength) {
  if (!(bitLength > 0)) throw new Error("bitLength must be positive");
  const total = bitLength + padBits(bitLength);
  let v = BigInt(value) << BigInt(padBits(bitLength));
  const chars = [];
  for (let i = 0; i < total / 5; i++) {
    chars.push(CROCKFORD_BASE32_ALPHABET[Number(v & 31n)]);
    v >>= 5n;
  }
  return chars.reverse().join("");
}

export function decodeCrockfordBase32Bits(encoded, bitLength) {
  if (!(bitLength > 0)) return err(new Error("bitLength must be positive"));
  if (typeof encoded !== "string" || encoded.length * 5 !== bitLength + padBits(bitLength)) {
    return err(new Error("encoded length does not match bitLength"));
  }
  let v = 0n;
  for (const ch of encoded) {
    const digit = CROCKFORD_BASE32_ALPHABET.indexOf(ch.toUpperCase());
    if (digit < 0) return err(new Error(`invalid Crockford Base32 character: ${ch}`));
    v = (v << 5n) | BigInt(digit);
  }
  return ok(v >> BigInt(padBits(bitLength)));
}

const UINT64 = (1n << 64n) - 1n;

export function encodeUint64AsCrockford(value) {
  return encodeCrockfordBase32Bits(BigInt(value) & UINT64, 64);
}

export function decodeCrockfordToUint64(encoded) {
  const r = decodeCrockfordBase32Bits(encoded, 64);
  return r.ok ? ok(r.value & UINT64) : r;
}

// generateUlid(nowMs): 48 bits of milliseconds and 80 random bits, 26
// characters.
export function generateUlid(nowMs) {
  if (!Number.isFinite(nowMs) || nowMs < 0 || nowMs >= 2 ** 48) {
    throw new Error("nowMs must be a finite number in [0, 2^48)");
  }
  let random = 0n;
  for (const b of getRandomValues(new Uint8Array(10))) random = (random << 8n) | BigInt(b);
  return encodeCrockfordBase32Bits((BigInt(Math.floor(nowMs)) << 80n) | random, 128);
}

// Environment helpers. `in` asks without reading, so an unset variable is
// not an error while a bundle's top level is validated.
const envValue = (name) => (name in process.env ? process.env[name] : undefined);

export function requireEnv(name, message) {
  const v = envValue(name);
  if (v === undefined || v === "") throw new Error(message);
  return v;
}

export function optionalEnv(name, fallback) {
  const v = envValue(name);
  if (v === undefined || v === "") return fallback === undefined ? null : fallback;
  return v;
}

// createLogger({sink}) returns log(tag, content), which appends one JSONL
// record {tag, content, timestamp} to stderr or a file; tags are 8
// Crockford Base32 characters.
export function createLogger(options) {
  const sink = options !== null && typeof options === "object" ? options.sink : undefined;
  if (sink === null || typeof sink !== "object" || (sink.kind !== "stderr" && sink.kind !== "file")) {
    throw new TypeError('createLogger: options.sink must be { kind: "stderr" } or { kind: "file", path }');
  }
  return (tag, content) => {
    if (typeof tag !== "string" || tag.length !== 8) throw new Error("log tag must be exactly 8 characters");
    for (const ch of tag) {
      if (!CROCKFORD_BASE32_ALPHABET.includes(ch.toUpperCase())) {
        throw new Error(`invalid Crockford Base32 character in log tag: ${ch}`);
      }
    }
    const line = `${JSON.stringify({ tag: tag.toUpperCase(), content, timestamp: Date.now() })}\n`;
    if (sink.kind === "stderr") process.stderr.write(line);
    else appendFileSync(sink.path, line, "utf8");
  };
}

export function mergeRefsWithContentHash(refs, contentHash) {
  const out = refs.slice();
  if (!out.includes(contentHash)) out.push(contentHash);
  return out;
}

export function normalizeRefsField(value) {
  return Array.isArray(value) ? value.filter((x) => typeof x === "string") : [];
}

export function getDefaultWorkflowStorageRoot() {
  return join(homedir(), ".uncaged", "workflow");
}

export function getGlobalCasDir(storageRoot) {
  return join(storageRoot === undefined ? getDefaultWorkflowStorageRoot() : storageRoot, "cas");
}
