// @uncaged/workflow-agent-llm as this engine provides it to bundles:
// createLlmAdapter(provider) runs the engine's llm agent (one model call
// with a structured output tool, through workflow.yaml's providers), and
// chatCompletionText is the original's plain chat call.
import { err, llmAdapter, ok } from "@uncaged/workflow-runtime";
import { deferredAdapter, modelRef } from "internal:compat_agents";

const isRecord = (v) => v !== null && typeof v === "object" && !Array.isArray(v);

// createLlmAdapter(provider) returns an AdapterFn. provider.model names the
// workflow.yaml model when workflow.yaml knows it, else the default model
// is used.
export function createLlmAdapter(provider) {
  return deferredAdapter(
    "createLlmAdapter",
    provider,
    () => ok(undefined),
    () => llmAdapter({ model: modelRef(provider) }),
  );
}

// chatCompletionText({provider, messages}) posts one chat completion to
// provider.baseUrl and resolves with ok(the assistant's text) or err({kind,
// ...}): http_error, network_error, invalid_response_json, empty_choices or
// no_assistant_text. It never rejects.
export async function chatCompletionText(options) {
  const provider = isRecord(options) ? options.provider : undefined;
  if (!isRecord(provider) || typeof provider.baseUrl !== "string") {
    return err({ kind: "network_error", message: "chatCompletionText: options.provider.baseUrl must be a string" });
  }
  let response;
  try {
    response = await fetch(`${provider.baseUrl.replace(/\/+$/, "")}/chat/completions`, {
      method: "POST",
      headers: { Authorization: `Bearer ${provider.apiKey}`, "Content-Type": "application/json" },
      body: JSON.stringify({ model: provider.model, messages: options.messages }),
    });
  } catch (cause) {
    return err({ kind: "network_error", message: cause instanceof Error ? cause.message : String(cause) });
  }
  const text = await response.text();
  if (!response.ok) return err({ kind: "http_error", status: response.status, body: text.slice(0, 4000) });
  let parsed;
  try {
    parsed = JSON.parse(text);
  } catch (cause) {
    return err({ kind: "invalid_response_json", message: cause instanceof Error ? cause.message : String(cause) });
  }
  if (!isRecord(parsed)) return err({ kind: "invalid_response_json", message: "Not an object" });
  const choice = Array.isArray(parsed.choices) ? parsed.choices[0] : undefined;
  if (!isRecord(choice)) return err({ kind: "empty_choices" });
  if (!isRecord(choice.message) || typeof choice.message.content !== "string") return err({ kind: "no_assistant_text" });
  return ok(choice.message.content);
}
