// @uncaged/workflow-util-agent as this engine provides it to bundles: the
// thread input the engine's own agents send, the AgentFn → AdapterFn
// bridge, and spawnCli.
import { spawn } from "child_process";
import { createAgentAdapter, err, ok } from "@uncaged/workflow-runtime";

const compat = require("internal:compat");

export { createAgentAdapter };

// buildThreadInput(ctx) is the user message for a thread: the task, the
// previous steps and where to read more; the system prompt is not in it.
export async function buildThreadInput(ctx) {
  return compat.threadInput(ctx);
}

// buildAgentPrompt(ctx) is the original's deprecated form: the current
// role's system prompt, a blank line, then the thread input.
export async function buildAgentPrompt(ctx) {
  const role = ctx !== null && typeof ctx === "object" ? ctx.currentRole : undefined;
  if (role === null || typeof role !== "object" || typeof role.systemPrompt !== "string") {
    throw new TypeError("buildAgentPrompt: ctx.currentRole.systemPrompt must be a string");
  }
  return `${role.systemPrompt}\n\n${await buildThreadInput(ctx)}`;
}

// createSimpleAgentAdapter(agent) bridges an AgentFn that takes no options.
export function createSimpleAgentAdapter(agent) {
  return createAgentAdapter(agent, async () => undefined);
}

// spawnCli(command, args, {cwd, timeoutMs}) runs a program without a shell,
// stdin closed, and resolves with ok(stdout) on exit 0, else err with kind
// non_zero_exit {exitCode, stdout, stderr}, timeout (SIGTERM after
// timeoutMs) or spawn_failed {message}. It never rejects.
export function spawnCli(command, args, options) {
  const opts = options !== null && typeof options === "object" ? options : {};
  return new Promise((resolve) => {
    let child;
    try {
      child = spawn(command, args, {
        cwd: opts.cwd === null || opts.cwd === undefined ? undefined : opts.cwd,
        env: process.env,
        shell: false,
        stdio: ["ignore", "pipe", "pipe"],
      });
    } catch (cause) {
      resolve(err({ kind: "spawn_failed", message: cause instanceof Error ? cause.message : String(cause) }));
      return;
    }
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk) => {
      stdout += chunk.toString();
    });
    child.stderr.on("data", (chunk) => {
      stderr += chunk.toString();
    });
    let timedOut = false;
    let settled = false;
    const timer =
      typeof opts.timeoutMs === "number" && opts.timeoutMs !== null
        ? setTimeout(() => {
            timedOut = true;
            child.kill("SIGTERM");
          }, opts.timeoutMs)
        : null;
    const finish = (r) => {
      if (settled) return;
      settled = true;
      if (timer !== null) clearTimeout(timer);
      resolve(r);
    };
    child.on("error", (cause) => finish(err({ kind: "spawn_failed", message: cause instanceof Error ? cause.message : String(cause) })));
    child.on("close", (code) => {
      if (timedOut) finish(err({ kind: "timeout" }));
      else if (code === 0) finish(ok(stdout));
      else finish(err({ kind: "non_zero_exit", exitCode: code, stdout, stderr }));
    });
  });
}
