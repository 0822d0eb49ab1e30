// Roles run by Go agents: exec commands (JSON Schema and Zod-like schemas,
// casRef artifacts) and createAgentAdapter over runtime.extract.
import { createWorkflow, buildDescriptor, execAdapter, createAgentAdapter, START, END } from "@uncaged/workflow-runtime";

const plannerSchema = {
  $schema: "https://json-schema.org/draft/2020-12/schema",
  type: "object",
  required: ["plan", "artifact"],
  properties: {
    plan: { type: "string" },
    artifact: { type: "string", casRef: true },
    files: { type: "array", items: { type: "object", properties: { hash: { type: "string", casRef: true } } } },
    note: { type: "string" },
  },
};

// A Zod-like schema: toJSONSchema for the agent, safeParse for the result.
const coderSchema = {
  toJSONSchema() {
    return {
      $schema: "https://json-schema.org/draft/2020-12/schema",
      type: "object",
      required: ["status"],
      properties: { status: { type: "string" }, role: { type: "string" }, log: { type: "string", casRef: true } },
    };
  },
  safeParse(v) {
    if (v.status !== "ok") return { success: false, error: { issues: [{ path: ["status"], message: "expected ok" }] } };
    return { success: true, data: Object.assign({}, v, { parsed: true }) };
  },
};

const definition = {
  description: "Agents in Go.",
  roles: {
    planner: { description: "Plans", systemPrompt: "You plan.", schema: plannerSchema },
    coder: { description: "Codes", systemPrompt: "You code.", schema: coderSchema },
    reviewer: { description: "Reviews", systemPrompt: "You review.", schema: { type: "object", required: ["threadId"] } },
    summarizer: { description: "Summarizes", systemPrompt: "You summarize.", schema: { type: "object" } },
  },
  table: {
    [START]: [{ condition: "FALLBACK", role: "planner" }],
    planner: [{ condition: "FALLBACK", role: "coder" }],
    coder: [{ condition: "FALLBACK", role: "reviewer" }],
    reviewer: [{ condition: "FALLBACK", role: "summarizer" }],
    summarizer: [{ condition: "FALLBACK", role: END }],
  },
};

const planner = execAdapter({
  command: "sh",
  args: ["-c", `echo '{"plan":"p","artifact":"SSVQ0RZ55P9Y4","files":[{"hash":"4V3R4ZC8KXPT6"},{"hash":"SSVQ0RZ55P9Y4"}],"note":"not a ref"}'`],
});
const coder = execAdapter({
  command: "sh",
  args: ["-c", `echo "{\\"status\\":\\"ok\\",\\"role\\":\\"$WORKFLOW_ROLE\\",\\"log\\":\\"4V3R4ZC8KXPT6\\"}"`],
});
// cat: the meta is the thread context the agent got on stdin.
const reviewer = execAdapter({ command: "/bin/sh", args: ["-c", "cat"], timeout: 60000 });
const summarizer = createAgentAdapter(
  async (ctx, options) => `summary of ${options.topic} after ${ctx.steps.length} steps`,
  async (ctx, prompt) => ({ topic: `${ctx.start.content} (${prompt})` }),
);

export const run = createWorkflow(definition, { adapter: planner, overrides: { coder, reviewer, summarizer } });
export const descriptor = buildDescriptor(definition);
