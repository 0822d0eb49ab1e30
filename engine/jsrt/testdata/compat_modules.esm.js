// A bundle as the original's build wrote it: ESM, every @uncaged/* import
// kept external. Its one role reports what the compatibility packages
// return, for TestCompatPackages.
import { buildThreadContext, createWorkflow, END, err, ok, START } from "@uncaged/workflow-runtime";
import * as protocol from "@uncaged/workflow-protocol";
import {
  createLogger,
  decodeCrockfordToUint64,
  encodeUint64AsCrockford,
  generateUlid,
  getGlobalCasDir,
  mergeRefsWithContentHash,
  normalizeRefsField,
  optionalEnv,
  requireEnv,
} from "@uncaged/workflow-util";
import { buildAgentPrompt, buildThreadInput, spawnCli } from "@uncaged/workflow-util-agent";
import { getContentMerklePayload, putContentNodeWithRefs } from "@uncaged/workflow-cas";
import { buildDescriptor } from "@uncaged/workflow-register";
import { validateCursorAgentConfig } from "@uncaged/workflow-agent-cursor";
import { validateHermesAgentConfig } from "@uncaged/workflow-agent-hermes";
import { createReactAdapter, defaultToolHandler, defaultTools } from "@uncaged/workflow-agent-react";
import { createLlmFn, createThreadReactor } from "@uncaged/workflow-reactor";
import { chatCompletionText } from "@uncaged/workflow-agent-llm";
import { workflowAdapter } from "@uncaged/workflow-execute";

// Read at the top level, where the environment is only asked about.
const unsetAtTopLevel = optionalEnv("COMPAT_SURELY_UNSET_VARIABLE");
const fallbackAtTopLevel = optionalEnv("COMPAT_SURELY_UNSET_VARIABLE", "fallback");

const thrown = (fn) => {
  try {
    fn();
    return null;
  } catch (e) {
    return e instanceof Error ? e.message : String(e);
  }
};

// scriptedReact runs createReactAdapter with the bundle's own llm function
// and tool, which the engine's react agent cannot run: the model looks
// something up, answers prose, hands in a result the schema refuses, then
// one it accepts. With stubborn, it only ever answers prose.
async function scriptedReact(ctx, runtime, stubborn) {
  const seen = [];
  const answer = (message) => ({ ok: true, value: JSON.stringify({ choices: [{ message }] }) });
  const call = (name, args) => answer({ content: null, tool_calls: [{ id: `c${seen.length}`, type: "function", function: { name, arguments: JSON.stringify(args) } }] });
  const script = [
    () => call("lookup", { q: 1 }),
    () => answer({ content: "Let me think." }),
    () => call("resolve", { answer: 42 }),
    () => call("resolve", { answer: "42" }),
  ];
  const llm = async ({ messages, tools }) => {
    seen.push({ last: messages[messages.length - 1], tools: tools.map((t) => t.function.name), system: messages[0].content });
    return stubborn ? answer({ content: "no" }) : script[seen.length - 1]();
  };
  const lookup = { type: "function", function: { name: "lookup", description: "Looks up", parameters: { type: "object" } } };
  const schema = {
    toJSONSchema: () => ({ type: "object", properties: { answer: { type: "string" } }, required: ["answer"] }),
    safeParse: (v) =>
      typeof v.answer === "string"
        ? { success: true, data: { answer: v.answer, checked: true } }
        : { success: false, error: { issues: [{ path: ["answer"], message: "expected string" }] } },
  };
  const adapter = createReactAdapter({ llm, tools: [lookup], toolHandler: async (name, args) => `${name} says ${args}`, maxRounds: 4 });
  const result = await adapter("You are the scripted one.", schema)(ctx, runtime, { role: "report" });
  return { result, seen };
}

async function report(ctx, runtime) {
  const hash = await putContentNodeWithRefs(runtime.cas, "hello", []);
  const decoded = decodeCrockfordToUint64("4V3R4ZC8KXPT6");
  const logger = createLogger({ sink: { kind: "stderr" } });
  const rebuilt = ctx.start.content.startsWith("head:")
    ? await buildThreadContext(ctx.start.content.slice(5), runtime.cas)
    : null;
  const echo = await spawnCli("/bin/sh", ["-c", "echo out; echo err >&2; exit 3"], { cwd: null, timeoutMs: null });
  const echoed = await spawnCli("/bin/echo", ["hi"], { cwd: null, timeoutMs: 10000 });
  const missing = await spawnCli("/surely/not/a/program", [], { cwd: null, timeoutMs: null });
  const url = process.env.COMPAT_CHAT_URL;
  const provider = (path) => ({ baseUrl: url + path, apiKey: "k1", model: "m1" });
  const messages = [{ role: "user", content: "hi" }];
  const child = await workflowAdapter("leaf", { storageRoot: null })("prompt", { type: "object" })(ctx, runtime, { role: "report" });
  return {
    chat: await chatCompletionText({ provider: provider("/ok/"), messages }),
    chatFailed: await chatCompletionText({ provider: provider("/fail"), messages }),
    llmFn: await createLlmFn(provider("/ok"))({ messages, tools: [] }),
    child,
    cursorNoCommand: validateCursorAgentConfig({}),
    sameConstants: protocol.START === START && protocol.END === END && START === "__start__",
    okValue: ok(1),
    errValue: protocol.err("no"),
    contentHash: hash,
    contentBack: await getContentMerklePayload(runtime.cas, hash),
    crockfordRoundTrip: decoded.ok ? encodeUint64AsCrockford(decoded.value) : "decode failed",
    badCrockford: decodeCrockfordToUint64("UUUUUUUUUUUUU").ok,
    ulidLength: generateUlid(Date.now()).length,
    ulidFirst: generateUlid(0)[0],
    badLogTag: thrown(() => logger("short", "x")),
    refs: mergeRefsWithContentHash(["A", "B"], "B").concat(normalizeRefsField([1, "C", null])),
    casDir: getGlobalCasDir("/root"),
    unsetAtTopLevel,
    fallbackAtTopLevel,
    requireMessage: thrown(() => requireEnv("COMPAT_SURELY_UNSET_VARIABLE", "set it")),
    threadInput: await buildThreadInput(ctx),
    agentPrompt: await buildAgentPrompt({ ...ctx, currentRole: { systemPrompt: "SYSTEM" } }),
    echo,
    echoed,
    missingKind: missing.ok ? "ok" : missing.error.kind,
    cursorRelative: validateCursorAgentConfig({ command: "cursor-agent", model: null, timeout: 0, workspace: null }),
    cursorWorkspace: validateCursorAgentConfig({ command: "/bin/true", model: null, timeout: 0, workspace: "rel" }),
    cursorGood: validateCursorAgentConfig({ command: "/bin/true", model: null, timeout: 0, workspace: null }),
    hermesTimeout: validateHermesAgentConfig({ command: "/bin/true", model: null, timeout: -1 }),
    toolNames: defaultTools.map((t) => t.function.name),
    unknownTool: await defaultToolHandler("nope", "{}"),
    reactor: thrown(() => createThreadReactor({})),
    badRounds: thrown(() => createReactAdapter({ llm: async () => null, tools: [], toolHandler: defaultToolHandler, maxRounds: 0 })),
    scripted: await scriptedReact(ctx, runtime),
    exhausted: await scriptedReact(ctx, runtime, true).catch((e) => e.message),
    rebuilt,
  };
}

const definition = {
  description: "Reports what the original's packages return here",
  roles: { report: { description: "reports", systemPrompt: "Report.", schema: { type: "object" } } },
  table: { [START]: [{ condition: "FALLBACK", role: "report" }], report: [{ condition: "FALLBACK", role: END }] },
};

export const descriptor = buildDescriptor(definition);
export const run = createWorkflow(definition, {
  adapter: () => async (ctx, runtime) => ({ meta: await report(ctx, runtime), childThread: null }),
  overrides: null,
});
