// @uncaged/workflow-agent-react as this engine provides it to bundles:
// createReactAdapter runs the engine's react agent when the config is the
// usual one (an llm from createLlmFn, the default tools and handler), and
// otherwise the ReAct loop of @uncaged/workflow-reactor over the bundle's
// own llm function, tools and handler. The default tools are the
// original's four (read_file, write_file, patch_file, shell_exec), run by
// the engine in the thread's directory.
import { reactAdapter } from "@uncaged/workflow-runtime";
import { createThreadReactor } from "@uncaged/workflow-reactor";
import { buildThreadInput } from "@uncaged/workflow-util-agent";
import { jsonSchemaOf, modelRef, providerKey } from "internal:compat_agents";

const compat = require("internal:compat");

// defaultTools are the engine's workspace tools as tool definitions.
export const defaultTools = Object.freeze(JSON.parse(compat.toolDefinitions()));

// defaultToolHandler(name, args) runs one of them in the thread's
// directory; an unknown name answers "Unknown tool: <name>".
export async function defaultToolHandler(name, args) {
  return compat.runTool(String(name), String(args));
}

const toolName = (t) => (t !== null && typeof t === "object" && t.function !== null && typeof t.function === "object" ? t.function.name : undefined);

// structuredTool is the tool a role's result is handed in with: named by
// the schema's title, else "resolve".
function structuredTool(schema) {
  const parameters = jsonSchemaOf(schema);
  const title = typeof parameters.title === "string" ? parameters.title.trim() : "";
  const description = typeof parameters.description === "string" ? parameters.description.trim() : "";
  const name = title !== "" ? title : "resolve";
  return {
    name,
    tool: { type: "function", function: { name, description: description !== "" ? description : "Submit the final structured result.", parameters } },
  };
}

// createReactAdapter({llm, tools, toolHandler, maxRounds}) returns an
// AdapterFn whose role runs a ReAct loop with the role's system prompt,
// the thread input and the given tools until the model hands in a result
// matching the role's schema.
export function createReactAdapter(config) {
  if (config === null || typeof config !== "object") {
    throw new TypeError("createReactAdapter: config must be an object { llm, tools, toolHandler, maxRounds }");
  }
  if (typeof config.llm !== "function") {
    throw new TypeError("createReactAdapter: config.llm must be a function ({ messages, tools }) => Promise<Result<string, string>> (createLlmFn)");
  }
  if (!Array.isArray(config.tools)) {
    throw new TypeError("createReactAdapter: config.tools must be an array of tool definitions");
  }
  if (typeof config.toolHandler !== "function") {
    throw new TypeError("createReactAdapter: config.toolHandler must be a function (name, args) => Promise<string>");
  }
  const maxRounds = config.maxRounds;
  if (!(Number.isInteger(maxRounds) && maxRounds > 0)) {
    throw new TypeError(`createReactAdapter: config.maxRounds must be a positive integer, got ${String(maxRounds)}`);
  }
  const known = defaultTools.map(toolName);
  const names = config.tools.map(toolName);
  const engineRuns =
    config.llm[providerKey] !== undefined && config.toolHandler === defaultToolHandler && names.every((n) => known.includes(n));
  if (engineRuns) {
    return (prompt, schema) => async (ctx, runtime, info) => {
      const adapter = reactAdapter({ model: modelRef(config.llm[providerKey]), workspace: process.cwd(), tools: names, maxRounds });
      return adapter(prompt, schema)(ctx, runtime, info);
    };
  }
  return (prompt, schema) => {
    const reactor = createThreadReactor({
      llm: config.llm,
      staticTools: config.tools,
      structuredToolFromSchema: structuredTool,
      systemPromptForStructuredTool: () => prompt,
      toolHandler: (call) => config.toolHandler(call.function.name, call.function.arguments),
      maxRounds,
    });
    return async (ctx) => {
      const result = await reactor({ thread: ctx, input: await buildThreadInput(ctx), schema });
      if (!result.ok) throw new Error(result.error);
      return { meta: result.value, childThread: null };
    };
  };
}
