// @uncaged/workflow-reactor as this engine provides it to bundles:
// createLlmFn(provider), the model function createReactAdapter takes. The
// ReAct loop itself is the engine's (createReactAdapter runs the engine's
// react agent), so createThreadReactor is not provided.
import { err, ok } from "@uncaged/workflow-runtime";
import { providerKey } from "internal:compat_agents";

// createLlmFn(provider) returns llm({messages, tools}): one chat
// completion with tools, resolving ok(the raw response body) or
// err("http_error:<status>:<body>" | "network_error:<message>"). It also
// tells createReactAdapter which model the bundle meant.
export function createLlmFn(provider) {
  if (provider === null || typeof provider !== "object") {
    throw new TypeError("createLlmFn: provider must be an object { baseUrl, apiKey, model }");
  }
  const llm = async (input) => {
    let response;
    try {
      response = await fetch(`${String(provider.baseUrl).replace(/\/+$/, "")}/chat/completions`, {
        method: "POST",
        headers: { Authorization: `Bearer ${provider.apiKey}`, "Content-Type": "application/json" },
        body: JSON.stringify({ model: provider.model, messages: input.messages, tools: input.tools, tool_choice: "auto" }),
      });
    } catch (cause) {
      return err(`network_error:${cause instanceof Error ? cause.message : String(cause)}`);
    }
    const text = await response.text();
    return response.ok ? ok(text) : err(`http_error:${response.status}:${text.slice(0, 4000)}`);
  };
  Object.defineProperty(llm, providerKey, { value: provider });
  return llm;
}

// createThreadReactor is the original's generic ReAct loop; this engine
// runs its own loop (reactAdapter, createReactAdapter), so a bundle that
// calls it gets an error that says what to use instead.
export function createThreadReactor() {
  throw new Error(
    "createThreadReactor is not provided by this engine: use createReactAdapter (@uncaged/workflow-agent-react) or reactAdapter (@uncaged/workflow-runtime), which run the engine's ReAct loop",
  );
}
