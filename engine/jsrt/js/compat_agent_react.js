// @uncaged/workflow-agent-react as this engine provides it to bundles:
// createReactAdapter runs the engine's react agent, whose tools are the
// original's four (read_file, write_file, patch_file, shell_exec) working
// in the thread's directory.
import { reactAdapter } from "@uncaged/workflow-runtime";
import { modelRef, providerKey } from "internal:compat_agents";

const compat = require("internal:compat");

// defaultTools are the engine's workspace tools as tool definitions.
export const defaultTools = Object.freeze(JSON.parse(compat.toolDefinitions()));

// defaultToolHandler(name, args) runs one of them in the thread's
// directory; an unknown name answers "Unknown tool: <name>".
export async function defaultToolHandler(name, args) {
  return compat.runTool(String(name), String(args));
}

// createReactAdapter({llm, tools, toolHandler, maxRounds}) returns an
// AdapterFn. The model is the one llm (from createLlmFn) names, when
// workflow.yaml knows it, else the default model; tools must be among
// defaultTools and toolHandler defaultToolHandler, since the engine runs
// the tools itself.
export function createReactAdapter(config) {
  if (config === null || typeof config !== "object") {
    throw new TypeError("createReactAdapter: config must be an object { llm, tools, toolHandler, maxRounds }");
  }
  if (typeof config.llm !== "function") {
    throw new TypeError("createReactAdapter: config.llm must be a function (createLlmFn from @uncaged/workflow-reactor)");
  }
  if (!Array.isArray(config.tools)) {
    throw new TypeError("createReactAdapter: config.tools must be an array of tool definitions");
  }
  const known = defaultTools.map((t) => t.function.name);
  const names = config.tools.map((t, i) => {
    const name = t !== null && typeof t === "object" && t.function !== null && typeof t.function === "object" ? t.function.name : undefined;
    if (!known.includes(name)) {
      throw new TypeError(
        `createReactAdapter: config.tools[${i}] (${String(name)}) is not one of this engine's tools (${known.join(", ")}); custom tools are not supported`,
      );
    }
    return name;
  });
  if (config.toolHandler !== defaultToolHandler) {
    throw new TypeError(
      "createReactAdapter: config.toolHandler must be defaultToolHandler; this engine runs its own tools, so custom tool handlers are not supported",
    );
  }
  const maxRounds = config.maxRounds;
  if (maxRounds !== undefined && !(Number.isInteger(maxRounds) && maxRounds > 0)) {
    throw new TypeError(`createReactAdapter: config.maxRounds must be a positive integer, got ${String(maxRounds)}`);
  }
  return (prompt, schema) => async (ctx, runtime, info) => {
    const adapter = reactAdapter({
      model: modelRef(config.llm[providerKey]),
      workspace: process.cwd(),
      tools: names,
      maxRounds,
    });
    return adapter(prompt, schema)(ctx, runtime, info);
  };
}
