// @uncaged/workflow-reactor as this engine provides it to bundles:
// createLlmFn(provider), one chat completion with tools, and
// createThreadReactor(config), the ReAct loop over such a function that
// ends when the model hands in the structured result.
import { err, ok } from "@uncaged/workflow-runtime";
import { providerKey } from "internal:compat_agents";

const isRecord = (v) => v !== null && typeof v === "object" && !Array.isArray(v);
const message = (e) => (e instanceof Error ? e.message : String(e));

// createLlmFn(provider) returns llm({messages, tools}): one chat
// completion with tools, resolving ok(the raw response body) or
// err("http_error:<status>:<body>" | "network_error:<message>"). It also
// tells createReactAdapter which model the bundle meant.
export function createLlmFn(provider) {
  if (!isRecord(provider)) {
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
      return err(`network_error:${message(cause)}`);
    }
    const text = await response.text();
    return response.ok ? ok(text) : err(`http_error:${response.status}:${text.slice(0, 4000)}`);
  };
  Object.defineProperty(llm, providerKey, { value: provider });
  return llm;
}

// assistantMessage reads choices[0].message of a raw chat completion.
function assistantMessage(raw) {
  let parsed;
  try {
    parsed = JSON.parse(raw);
  } catch (cause) {
    return err(`invalid_response_json:${message(cause)}`);
  }
  if (!isRecord(parsed)) return err("invalid_response_top_level");
  if (!Array.isArray(parsed.choices) || parsed.choices.length === 0) return err("no_choices_in_response");
  const choice = parsed.choices[0];
  if (!isRecord(choice)) return err("invalid_choice");
  if (!isRecord(choice.message)) return err("invalid_message");
  const m = choice.message;
  if (Array.isArray(m.tool_calls) && m.tool_calls.length > 0) {
    for (const c of m.tool_calls) {
      if (!isRecord(c) || !isRecord(c.function) || typeof c.function.name !== "string" || typeof c.function.arguments !== "string") {
        return err("invalid_tool_call");
      }
    }
    return ok(m);
  }
  if (typeof m.content !== "string") return err("no_tool_calls_and_no_string_content");
  return ok(m);
}

// validated checks a value against a role schema: Zod-like schemas by
// safeParse (so defaults and transforms apply), anything else only as a
// JSON object.
function validated(schema, value) {
  if (isRecord(schema) && typeof schema.safeParse === "function") {
    const r = schema.safeParse(value);
    if (r.success) return ok(r.data);
    const issues = isRecord(r.error) && Array.isArray(r.error.issues) ? r.error.issues : [];
    const text = issues.map((i) => `${Array.isArray(i.path) && i.path.length > 0 ? `${i.path.join(".")}: ` : ""}${i.message}`).join("; ");
    return err(text || message(r.error));
  }
  return isRecord(value) ? ok(value) : err("the result must be a JSON object");
}

// plainJSON reads an answer given as text: a JSON object, possibly in a
// ```json fence.
function plainJSON(text) {
  const fenced = /^\s*```(?:json)?\s*\n([\s\S]*?)\n\s*```\s*$/.exec(text);
  try {
    return ok(JSON.parse(fenced !== null ? fenced[1] : text));
  } catch (_e) {
    return err("it is not JSON");
  }
}

// createThreadReactor(config) returns reactor({thread, input, schema}):
// the conversation starts with systemPromptForStructuredTool(name) and
// input; each round the model may call config.staticTools (answered by
// config.toolHandler(call, thread); a handler that throws answers
// "Error: <message>") or the structured tool made from schema, whose
// arguments end the loop when schema accepts them. A plain JSON answer the
// schema accepts ends it too; anything else is sent back to be corrected.
// It resolves ok(value), or err("max_react_rounds_exceeded") after
// config.maxRounds rounds, or err(the llm's error).
export function createThreadReactor(config) {
  if (!isRecord(config) || typeof config.llm !== "function" || typeof config.structuredToolFromSchema !== "function" ||
    typeof config.systemPromptForStructuredTool !== "function" || typeof config.toolHandler !== "function") {
    throw new TypeError(
      "createThreadReactor: config must be { llm, staticTools, structuredToolFromSchema, systemPromptForStructuredTool, toolHandler, maxRounds }",
    );
  }
  const staticTools = Array.isArray(config.staticTools) ? config.staticTools : [];
  return async ({ thread, input, schema }) => {
    const structured = config.structuredToolFromSchema(schema);
    const messages = [
      { role: "system", content: config.systemPromptForStructuredTool(structured.name) },
      { role: "user", content: input },
    ];
    const tools = staticTools.concat([structured.tool]);
    for (let round = 0; round < config.maxRounds; round++) {
      const res = await config.llm({ messages, tools });
      if (!res.ok) return err(res.error);
      const parsed = assistantMessage(res.value);
      if (!parsed.ok) return parsed;
      const m = parsed.value;
      if (Array.isArray(m.tool_calls) && m.tool_calls.length > 0) {
        messages.push({ role: "assistant", content: typeof m.content === "string" ? m.content : null, tool_calls: m.tool_calls });
        for (const call of m.tool_calls) {
          let result;
          if (call.function.name === structured.name) {
            const args = plainJSON(call.function.arguments);
            const checked = args.ok ? validated(schema, args.value) : err("the arguments are not JSON");
            if (checked.ok) return checked;
            result = `Error: ${checked.error}. Call ${structured.name} again with arguments matching its schema.`;
          } else {
            try {
              result = await config.toolHandler(call, thread);
            } catch (cause) {
              result = `Error: ${message(cause)}`;
            }
          }
          messages.push({ role: "tool", tool_call_id: call.id, content: String(result) });
        }
        continue;
      }
      const answer = plainJSON(m.content);
      const checked = answer.ok ? validated(schema, answer.value) : answer;
      if (checked.ok) return checked;
      messages.push({ role: "assistant", content: m.content });
      messages.push({
        role: "user",
        content: `Your answer was not accepted (${checked.error}). Call the ${structured.name} tool with your result, or reply with only a JSON object matching its schema.`,
      });
    }
    return err("max_react_rounds_exceeded");
  };
}
