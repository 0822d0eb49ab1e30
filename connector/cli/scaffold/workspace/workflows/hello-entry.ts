// A complete workflow that runs with no model and no network: two
// deterministic roles built with fnAdapter. `uncaged-workflow build` turns
// this file into dist/hello-entry.esm.js; then
//
//   uncaged-workflow workflow add hello dist/hello-entry.esm.js
//   uncaged-workflow run hello --prompt "world"
//   uncaged-workflow live --latest
//
// Copy it as the starting point of your own entries (workflows/*-entry.ts).
import { buildDescriptor, createWorkflow, END, FALLBACK, fnAdapter, START } from "@uncaged/workflow-runtime";
import type {
  ModeratorCondition,
  ModeratorTable,
  RoleDefinition,
  ThreadContext,
  WorkflowDefinition,
} from "@uncaged/workflow-runtime";

// Role schemas are plain JSON Schema objects. A Zod schema works too once
// you `npm install zod`: pass it as is, build bundles zod into the output.
const greeterSchema = {
  type: "object",
  properties: { message: { type: "string" } },
  required: ["message"],
  additionalProperties: false,
} as const;

const checkerSchema = {
  type: "object",
  properties: { approved: { type: "boolean" }, length: { type: "integer" } },
  required: ["approved", "length"],
  additionalProperties: false,
} as const;

export type HelloMeta = {
  greeter: { message: string };
  checker: { approved: boolean; length: number };
};

const greeterRole: RoleDefinition = {
  description: "Greets whoever the prompt names",
  systemPrompt: "Write one short greeting for the name in the task.",
  schema: greeterSchema,
};

const checkerRole: RoleDefinition = {
  description: "Checks the greeting before the workflow ends",
  systemPrompt: "Approve the greeting when it is a single non-empty sentence.",
  schema: checkerSchema,
};

function lastMeta(ctx: ThreadContext): { [key: string]: unknown } {
  const last = ctx.steps[ctx.steps.length - 1];
  return last === undefined ? {} : last.meta;
}

const greetingApproved: ModeratorCondition = {
  name: "greetingApproved",
  description: "the checker approved the greeting",
  check: (ctx) => lastMeta(ctx).approved === true,
};

const helloTable: ModeratorTable = {
  [START]: [{ condition: FALLBACK, role: "greeter" }],
  greeter: [{ condition: FALLBACK, role: "checker" }],
  checker: [
    { condition: greetingApproved, role: END },
    { condition: FALLBACK, role: "greeter" },
  ],
};

export const helloDefinition: WorkflowDefinition = {
  description: "Greets the prompt, then checks the greeting.",
  roles: { greeter: greeterRole, checker: checkerRole },
  table: helloTable,
};

// Deterministic roles: the function's result is the role's meta.
const greet = fnAdapter((ctx) => {
  const name = ctx.start.content.trim();
  return { message: `Hello, ${name === "" ? "world" : name}!` };
});

const check = fnAdapter((ctx) => {
  const message = lastMeta(ctx).message;
  const text = typeof message === "string" ? message : "";
  return { approved: text.length > 0, length: text.length };
});

// descriptor is static data: it is read when the bundle is registered, so
// the module's top level must not read the environment or start any work.
export const descriptor = buildDescriptor(helloDefinition);

export const run = createWorkflow(helloDefinition, {
  adapter: greet,
  overrides: { checker: check },
});
