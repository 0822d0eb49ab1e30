// An exec role whose output fails the Zod-like schema's safeParse.
import { createWorkflow, buildDescriptor, execAdapter, START, END } from "@uncaged/workflow-runtime";

const schema = {
  toJSONSchema: () => ({ type: "object", properties: { status: { type: "string" } } }),
  safeParse: (v) =>
    v.status === "ok"
      ? { success: true, data: v }
      : { success: false, error: { issues: [{ path: ["status"], message: "Invalid input: expected \"ok\"" }] } },
};

const definition = {
  description: "Fails validation.",
  roles: { checker: { description: "Checks", systemPrompt: "Check.", schema } },
  table: { [START]: [{ condition: "FALLBACK", role: "checker" }], checker: [{ condition: "FALLBACK", role: END }] },
};

export const run = createWorkflow(definition, {
  adapter: execAdapter({ command: "sh", args: ["-c", `echo '{"status":"nope"}'`] }),
  overrides: null,
});
export const descriptor = buildDescriptor(definition);
