// A develop-style bundle as the original's `build` wrote it: one ESM file
// in which every @uncaged/* import stays external, for the engine to
// resolve when the bundle is added. Planner and reviewer are
// workflow-agent-llm adapters, the coder a workflow-agent-react adapter
// with the default tools, the tester cursor-agent and the committer
// hermes, configured from the environment at the top level the way the
// original's develop template is.
import { createCursorAgent } from "@uncaged/workflow-agent-cursor";
import { createHermesAgent } from "@uncaged/workflow-agent-hermes";
import { createLlmAdapter } from "@uncaged/workflow-agent-llm";
import { createReactAdapter, defaultToolHandler, defaultTools } from "@uncaged/workflow-agent-react";
import { createLlmFn } from "@uncaged/workflow-reactor";
import { buildDescriptor } from "@uncaged/workflow-register";
import { createWorkflow, END, START } from "@uncaged/workflow-runtime";
import { optionalEnv, requireEnv } from "@uncaged/workflow-util";

// src/roles/planner.ts
var plannerMetaSchema = {
  type: "object",
  properties: {
    status: { type: "string", enum: ["planned", "aborted"] },
    phases: { type: "array", items: { type: "object", properties: { title: { type: "string" }, detail: { type: "string" } } } },
    reason: { type: "string" },
  },
  required: ["status"],
};
var plannerRole = {
  description: "Splits the task into phases",
  systemPrompt: "You are the planner of a small development team. Split the task into phases, or abort when it cannot be done.",
  schema: plannerMetaSchema,
};

// src/roles/coder.ts
var coderRole = {
  description: "Implements the phases with file and shell tools",
  systemPrompt: "You are the coder of a small development team. Implement the plan with your tools in the working directory.",
  schema: {
    type: "object",
    properties: { filesChanged: { type: "array", items: { type: "string" } }, summary: { type: "string" } },
    required: ["filesChanged", "summary"],
  },
};

// src/roles/reviewer.ts
var reviewerRole = {
  description: "Reviews the change",
  systemPrompt: "You are the reviewer of a small development team. Approve the change or reject it with issues.",
  schema: {
    type: "object",
    properties: { status: { type: "string", enum: ["approved", "rejected", "abandoned"] }, issues: { type: "array", items: { type: "string" } } },
    required: ["status", "issues"],
  },
};

// src/roles/tester.ts
var testerRole = {
  description: "Runs the tests",
  systemPrompt: "You are the tester. Run the project's tests and report whether they passed.",
  schema: {
    type: "object",
    properties: { status: { type: "string", enum: ["passed", "failed"] }, summary: { type: "string" } },
    required: ["status", "summary"],
  },
};

// src/roles/committer.ts
var committerRole = {
  description: "Commits the change",
  systemPrompt: "You are the committer. Commit the change with a good message.",
  schema: {
    type: "object",
    properties: { committed: { type: "boolean" }, message: { type: "string" } },
    required: ["committed", "message"],
  },
};

// src/moderator.ts
var lastStep = (ctx) => ctx.steps[ctx.steps.length - 1];
var plannerAborted = {
  name: "plannerAborted",
  description: "The planner aborted",
  check: (ctx) => lastStep(ctx).meta.status === "aborted",
};
var reviewApproved = {
  name: "reviewApproved",
  description: "The last reviewer approved the changes",
  check: (ctx) => lastStep(ctx).role === "reviewer" && lastStep(ctx).meta.status === "approved",
};
var testsPassed = {
  name: "testsPassed",
  description: "The last tester reported tests passed",
  check: (ctx) => lastStep(ctx).role === "tester" && lastStep(ctx).meta.status === "passed",
};
var developTable = {
  [START]: [{ condition: "FALLBACK", role: "planner" }],
  planner: [
    { condition: plannerAborted, role: END },
    { condition: "FALLBACK", role: "coder" },
  ],
  coder: [{ condition: "FALLBACK", role: "reviewer" }],
  reviewer: [
    { condition: reviewApproved, role: "tester" },
    { condition: "FALLBACK", role: "coder" },
  ],
  tester: [
    { condition: testsPassed, role: "committer" },
    { condition: "FALLBACK", role: "coder" },
  ],
  committer: [{ condition: "FALLBACK", role: END }],
};

// src/index.ts
var DEVELOP_WORKFLOW_DESCRIPTION = "Plan, implement, review, test and commit (planner → coder → reviewer → tester → committer).";
var developWorkflowDefinition = {
  description: DEVELOP_WORKFLOW_DESCRIPTION,
  roles: { planner: plannerRole, coder: coderRole, reviewer: reviewerRole, tester: testerRole, committer: committerRole },
  table: developTable,
};

// bundle-entry.ts
var provider = { baseUrl: "https://llm.invalid/v1", apiKey: "unused", model: "m1" };
var llmAdapter = createLlmAdapter(provider);
var reactAdapter = createReactAdapter({
  llm: createLlmFn(provider),
  tools: defaultTools,
  toolHandler: defaultToolHandler,
  maxRounds: 10,
});
var cursorAdapter = createCursorAgent({
  command: requireEnv("WORKFLOW_CURSOR_COMMAND", "set WORKFLOW_CURSOR_COMMAND (e.g. cursor-agent)"),
  model: optionalEnv("WORKFLOW_CURSOR_MODEL"),
  timeout: optionalEnv("WORKFLOW_CURSOR_TIMEOUT") ? Number(optionalEnv("WORKFLOW_CURSOR_TIMEOUT")) : 0,
  workspace: null,
});
var hermesAdapter = createHermesAgent({
  command: requireEnv("WORKFLOW_HERMES_COMMAND", "set WORKFLOW_HERMES_COMMAND (absolute path to hermes CLI)"),
  model: optionalEnv("WORKFLOW_HERMES_MODEL"),
  timeout: optionalEnv("WORKFLOW_HERMES_TIMEOUT") ? Number(optionalEnv("WORKFLOW_HERMES_TIMEOUT")) : null,
});
var wf = createWorkflow(developWorkflowDefinition, {
  adapter: llmAdapter,
  overrides: { coder: reactAdapter, tester: cursorAdapter, committer: hermesAdapter },
});
var descriptor = buildDescriptor(developWorkflowDefinition);
var run = wf;
export {
  run,
  descriptor
};
