// An exec role that never finishes: it records its pid and sleeps, for
// kill tests. The adapter is built inside run, where process.env is the
// thread's environment.
import { createWorkflow, buildDescriptor, execAdapter, START, END } from "@uncaged/workflow-runtime";

const definition = {
  description: "Hangs.",
  roles: { sleeper: { description: "Sleeps", systemPrompt: "Sleep.", schema: { type: "object" } } },
  table: { [START]: [{ condition: "FALLBACK", role: "sleeper" }], sleeper: [{ condition: "FALLBACK", role: END }] },
};

const lazy = (prompt, schema) =>
  execAdapter({
    command: "sh",
    args: ["-c", `echo $$ > "$PIDFILE.tmp" && mv "$PIDFILE.tmp" "$PIDFILE"; exec sleep 300`],
    env: { PIDFILE: process.env.PIDFILE },
  })(prompt, schema);

export const run = createWorkflow(definition, { adapter: lazy, overrides: null });
export const descriptor = buildDescriptor(definition);
