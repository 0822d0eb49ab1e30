// hello-world as a hand-written JavaScript bundle: the same roles, schemas
// and routing as hello-world.yaml, run by the same shell scripts through the
// runtime's execAdapter, so both versions store identical steps.
//
// The scripts are found in $HELLO_WORLD_ROLES, else in ./roles under the
// engine host's working directory. The directory is read when a role runs,
// never at the top level: the descriptor must be static data.
import { createWorkflow, buildDescriptor, execAdapter, START, END } from "@uncaged/workflow-runtime";
import path from "node:path";

const rolesDir = () => process.env.HELLO_WORLD_ROLES || path.join(process.cwd(), "roles");

// script runs roles/<role>.sh for whichever role is being run.
const script = (prompt, schema) => async (ctx, runtime, info) =>
  execAdapter({ command: path.join(rolesDir(), `${info.role}.sh`), timeout: 10000 })(prompt, schema)(ctx, runtime, info);

const status = (value) => ({
  name: value,
  description: `meta.status == "${value}"`,
  check: (ctx) => ctx.steps[ctx.steps.length - 1].meta.status === value,
});

const definition = {
  description: "Write a greeting until the reviewer approves it.",
  roles: {
    writer: {
      description: "Drafts a greeting",
      systemPrompt: "Write a friendly greeting for the world.",
      schema: {
        type: "object",
        properties: { draft: { type: "integer", minimum: 1 }, greeting: { type: "string" } },
        required: ["draft", "greeting"],
      },
    },
    reviewer: {
      description: "Approves the greeting or sends it back",
      systemPrompt: "Approve a greeting only when it is capitalised and punctuated.",
      schema: {
        type: "object",
        properties: {
          status: { enum: ["approved", "rejected"] },
          reviewed: { type: "string", casRef: true },
          note: { type: "string" },
        },
        required: ["status", "reviewed", "note"],
      },
    },
  },
  table: {
    [START]: [{ condition: "FALLBACK", role: "writer" }],
    writer: [{ condition: "FALLBACK", role: "reviewer" }],
    reviewer: [
      { condition: status("approved"), role: END },
      { condition: status("rejected"), role: "writer" },
    ],
  },
};

export const descriptor = buildDescriptor(definition);

export const run = createWorkflow(definition, { adapter: script, overrides: null });
