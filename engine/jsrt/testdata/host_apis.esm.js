// Exercises the Node-compatible host surface. The prompt picks the check;
// each check yields one step whose meta reports what it saw.
import { setTimeout as sleep } from "node:timers/promises";
import { spawn, execFile, execSync } from "node:child_process";
import { promisify } from "node:util";
import * as path from "node:path";
import os from "node:os";
import { readFile, writeFile, mkdir, readdir, stat, rm, access } from "node:fs/promises";
import fs from "fs";
import { Buffer } from "node:buffer";
import { createHash, randomUUID } from "node:crypto";
import EventEmitter from "node:events";

export const descriptor = { description: "host APIs", roles: {}, graph: { edges: [] } };

async function step(runtime, meta) {
  const contentHash = await runtime.cas.put(JSON.stringify(meta));
  return { role: "check", contentHash, meta, refs: [contentHash], childThread: null };
}

const checks = {
  async timers() {
    const order = [];
    const started = Date.now();
    await new Promise((resolve) => setTimeout(resolve, 20));
    order.push("timeout");
    setImmediate(() => order.push("immediate"));
    queueMicrotask(() => order.push("microtask"));
    await sleep(5);
    let ticks = 0;
    await new Promise((resolve) => {
      const id = setInterval(() => {
        ticks++;
        if (ticks === 3) {
          clearInterval(id);
          resolve();
        }
      }, 1);
    });
    const cleared = setTimeout(() => order.push("never"), 1);
    clearTimeout(cleared);
    await sleep(10);
    return { order, ticks, elapsedAtLeast20: Date.now() - started >= 20 };
  },

  async fetch() {
    const base = process.env.TEST_SERVER;
    const res = await fetch(`${base}/json?x=1`, { headers: { "X-Test": "yes" } });
    const body = await res.json();
    const post = await fetch(`${base}/echo`, { method: "POST", body: "hello body", headers: { "content-type": "text/plain" } });
    const echoed = await post.text();
    const missing = await fetch(`${base}/missing`);
    let aborted = "";
    try {
      await fetch(`${base}/slow`, { signal: AbortSignal.timeout(50) });
    } catch (e) {
      aborted = e.name;
    }
    return {
      ok: res.ok,
      status: res.status,
      contentType: res.headers.get("content-type"),
      body,
      echoed,
      missingStatus: missing.status,
      missingOk: missing.ok,
      aborted,
    };
  },

  async spawn() {
    const child = spawn("sh", ["-c", "echo hi; echo err >&2; exit 3"]);
    let out = "";
    let err = "";
    child.stdout.on("data", (d) => (out += d.toString()));
    child.stderr.setEncoding("utf8");
    child.stderr.on("data", (d) => (err += d));
    const [code, exitCode] = await new Promise((resolve) => {
      let exit = null;
      child.on("exit", (c) => (exit = c));
      child.on("close", (c) => resolve([c, exit]));
    });
    const run = promisify(execFile);
    const { stdout } = await run("sh", ["-c", "printf '%s' \"$GREETING\""], { env: { GREETING: "from env", PATH: process.env.PATH } });
    let failed = null;
    try {
      await run("sh", ["-c", "exit 7"]);
    } catch (e) {
      failed = e.code;
    }
    const sync = execSync("echo sync").toString().trim();
    const missing = await new Promise((resolve) => {
      const c = spawn("definitely-not-a-command-xyz");
      c.on("error", (e) => resolve(e.code));
    });
    const piped = await new Promise((resolve) => {
      const c = spawn("cat");
      let got = "";
      c.stdout.on("data", (d) => (got += d));
      c.on("close", () => resolve(got));
      c.stdin.write("through ");
      c.stdin.end("stdin");
    });
    const killed = await new Promise((resolve) => {
      const c = spawn("sleep", ["10"], { stdio: "ignore" });
      c.on("close", (code, signal) => resolve({ code, signal, killed: c.killed }));
      c.on("spawn", () => c.kill());
    });
    return { out, err, code, exitCode, stdout, failed, sync, missing, piped, killed };
  },

  async sleeper() {
    const child = spawn("sh", ["-c", "sleep 30 & echo $!; wait"]);
    const grandchild = await new Promise((resolve) => child.stdout.once("data", (d) => resolve(Number(d.toString().trim()))));
    console.log(`pids ${child.pid} ${grandchild}`);
    await new Promise(() => {
      // keep the run busy until it is killed; the child keeps the loop alive
    });
  },

  async roundtrip() {
    const enc = new TextEncoder().encode("héllo ✓");
    const dec = new TextDecoder().decode(enc);
    const b64 = Buffer.from("héllo", "utf8").toString("base64");
    const hex = Buffer.from("hi").toString("hex");
    const back = Buffer.from(b64, "base64").toString();
    const concat = Buffer.concat([Buffer.from("a"), Buffer.from([98]), new Uint8Array([99])]).toString();
    const dir = path.join(os.tmpdir(), `jsrt-${randomUUID()}`);
    const made = await mkdir(path.join(dir, "sub", "deeper"), { recursive: true });
    const file = path.join(dir, "sub", "note.txt");
    await writeFile(file, "written ✓");
    const text = await readFile(file, "utf8");
    const raw = await readFile(file);
    const st = await stat(file);
    const listed = await readdir(path.join(dir, "sub"));
    const typed = (await readdir(path.join(dir, "sub"), { withFileTypes: true })).map((d) => `${d.name}:${d.isDirectory() ? "d" : "f"}`);
    fs.appendFileSync(file, "!");
    const appended = fs.readFileSync(file, "utf8");
    let missingCode = "";
    try {
      await readFile(path.join(dir, "nope"));
    } catch (e) {
      missingCode = e.code;
    }
    await rm(dir, { recursive: true, force: true });
    let gone = false;
    try {
      await access(dir);
    } catch (e) {
      gone = e.code === "ENOENT";
    }
    const emitter = new EventEmitter();
    let heard = 0;
    emitter.on("ping", (n) => (heard += n));
    emitter.once("ping", (n) => (heard += 10 * n));
    emitter.emit("ping", 1);
    emitter.emit("ping", 2);
    return {
      dec,
      encLength: enc.length,
      b64,
      hex,
      back,
      concat,
      byteLength: Buffer.byteLength("✓"),
      made: made === dir,
      text,
      rawIsBuffer: Buffer.isBuffer(raw) && raw.length === Buffer.byteLength("written ✓"),
      size: st.size,
      isFile: st.isFile(),
      listed,
      typed,
      appended,
      missingCode,
      gone,
      join: path.join("/a/b", "../c", "d.txt"),
      resolve: path.resolve("/x", "y", "..", "z"),
      dirname: path.dirname("/a/b/c.txt"),
      basename: path.basename("/a/b/c.txt", ".txt"),
      extname: path.extname("archive.tar.gz"),
      relative: path.relative("/a/b/c", "/a/d"),
      isAbsolute: [path.isAbsolute("/x"), path.isAbsolute("x")],
      sep: path.sep,
      eol: os.EOL,
      platform: os.platform(),
      homedirIsAbsolute: path.isAbsolute(os.homedir()),
      hostname: typeof os.hostname(),
      sha256: createHash("sha256").update("abc").digest("hex"),
      uuid: /^[0-9a-f-]{36}$/.test(crypto.randomUUID()),
      heard,
      cwd: process.cwd() === process.env.EXPECTED_CWD,
      platformMatches: process.platform === os.platform(),
    };
  },

  async console() {
    console.log("hello %s, %d items", "world", 3, { nested: { a: [1, 2] } });
    console.error(new Error("shown").message);
    return { logged: true };
  },
};

export const run = async function* (thread, runtime) {
  const check = checks[thread.start.content];
  if (!check) throw new Error(`no check named ${thread.start.content}`);
  yield await step(runtime, await check());
  return { returnCode: 0, summary: `checked ${thread.start.content}` };
};
