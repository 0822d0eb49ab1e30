// plan-code-review: a planner breaks the task into phases, a person
// approves the plan (or sends it back with feedback), a coder implements it
// in a workspace with file and shell tools, a reviewer approves the work or
// sends it back (at most three attempts). The planner, coder and reviewer
// are OpenAI-compatible models configured in workflow.yaml
// (`uncaged-workflow setup`); the approver is a person, who answers from
// the dashboard or `uncaged-workflow thread answer`. See README.md.
//
// This is the readable source. `uncaged-workflow build` turns it into
// plan-code-review.esm.js, the bundle `workflow add` registers;
// plan-code-review.yaml is the same workflow in the YAML format.
//
// The coder's workspace is, in this order: a "Workspace: /abs/path" line in
// the task, $WORKFLOW_WORKSPACE as the engine host sees it, or a directory
// per thread under the system's temporary directory. It is created when the
// coder first runs.
import { buildDescriptor, createWorkflow, END, FALLBACK, humanAdapter, llmAdapter, reactAdapter, START } from "@uncaged/workflow-runtime";
import type {
  AdapterFn,
  ModeratorCondition,
  RoleDefinition,
  RoleFn,
  RoleSchema,
  ThreadContext,
  WorkflowDefinition,
} from "@uncaged/workflow-runtime";
import { mkdir } from "node:fs/promises";
import os from "node:os";
import path from "node:path";

/** How many rejected reviews the coder gets before the workflow gives up. */
export const MAX_REJECTIONS = 3;

// The schemas' descriptions double as the descriptions of the tools the
// models call to hand in their results.
const plannerSchema = {
  type: "object",
  description: "Submit the plan: status planned with the ordered phases, or aborted with the reason.",
  properties: {
    status: { enum: ["planned", "aborted"] },
    phases: {
      type: "array",
      minItems: 1,
      items: {
        type: "object",
        properties: {
          title: { type: "string", minLength: 1 },
          detail: { type: "string" },
        },
        required: ["title", "detail"],
        additionalProperties: false,
      },
    },
    reason: { type: "string", minLength: 1 },
  },
  required: ["status"],
  additionalProperties: false,
  allOf: [
    { if: { properties: { status: { const: "planned" } } }, then: { required: ["phases"] } },
    { if: { properties: { status: { const: "aborted" } } }, then: { required: ["reason"] } },
  ],
} as const;

const approveSchema = {
  type: "object",
  description: "Your decision on the plan.",
  properties: {
    status: { enum: ["approved", "rejected"] },
    feedback: { type: "string", description: "What the planner should change (when rejecting)" },
  },
  required: ["status"],
  additionalProperties: false,
} as const;

const coderSchema = {
  type: "object",
  description: "Submit your work: the files you changed (paths relative to the workspace) and a summary.",
  properties: {
    filesChanged: { type: "array", items: { type: "string" } },
    summary: { type: "string", minLength: 1 },
  },
  required: ["filesChanged", "summary"],
  additionalProperties: false,
} as const;

const reviewerSchema = {
  type: "object",
  description: "Submit your review: approved, rejected with the issues to fix, or abandoned when the last attempt still fails.",
  properties: {
    status: { enum: ["approved", "rejected", "abandoned"] },
    issues: { type: "array", items: { type: "string" } },
  },
  required: ["status", "issues"],
  additionalProperties: false,
} as const;

export type PlanCodeReviewMeta = {
  planner:
    | { status: "planned"; phases: { title: string; detail: string }[] }
    | { status: "aborted"; reason: string };
  approve: { status: "approved" | "rejected"; feedback?: string };
  coder: { filesChanged: string[]; summary: string };
  reviewer: { status: "approved" | "rejected" | "abandoned"; issues: string[] };
};

// The prompts are the same text as in plan-code-review.yaml, so both forms
// describe the same roles.
const planner: RoleDefinition = {
  description: "Breaks the task into ordered phases, or aborts",
  systemPrompt: [
    "You are the planner of a plan, code and review workflow.",
    "Read the task and break it into a short ordered list of phases that a developer can implement one after another. Each phase has a title and a detail that says what to change and how to check it.",
    "Use one phase for a small change, two or three for a feature and at most five for a large piece of work.",
    'If the task is unclear, contradicts itself or cannot be done by editing files in a workspace, answer status "aborted" with the reason instead of guessing.',
    "When the latest step is a rejected plan, revise the plan as its feedback asks.",
  ].join("\n"),
  schema: plannerSchema,
};

// A person plays this role: the thread waits until they answer.
const approve: RoleDefinition = {
  description: "A person approves the plan before any code is written",
  systemPrompt:
    "Read the planner's phases. Approve them to let the coder start, or reject them with feedback that tells the planner what to change.",
  schema: approveSchema,
};

const coder: RoleDefinition = {
  description: "Implements the plan in the workspace with file and shell tools",
  systemPrompt: [
    "You are the coder of a plan, code and review workflow.",
    "Implement the planner's phases in your workspace with your tools: read_file, write_file, patch_file and shell_exec. Keep the changes small and focused on the task.",
    "When the latest step is a rejected review, fix every issue it lists before anything else.",
    "Check your work before you finish: run the program or its tests with shell_exec and read what it prints.",
    "Report the files you changed, as paths relative to the workspace, and a short summary of what you did and how you checked it.",
  ].join("\n"),
  schema: coderSchema,
};

const reviewer: RoleDefinition = {
  description: "Approves the change or sends it back with issues",
  systemPrompt: [
    "You are the reviewer of a plan, code and review workflow.",
    "Compare the coder's latest report with the task and the planner's phases. You cannot open the files; judge from the report, and reject work whose report does not show that every phase is done and was checked.",
    'Answer status "approved" with no issues when the work is done. Otherwise answer "rejected" and list each issue as one concrete sentence the coder can act on.',
    'The coder gets three attempts: if you rejected this work twice already (see the previous steps) and it is still not acceptable, answer "abandoned" with the remaining issues instead of rejecting it again.',
  ].join("\n"),
  schema: reviewerSchema,
};

function lastMeta(ctx: ThreadContext): { [key: string]: unknown } {
  const last = ctx.steps[ctx.steps.length - 1];
  return last === undefined ? {} : last.meta;
}

function rejections(ctx: ThreadContext): number {
  return ctx.steps.filter((s) => s.role === "reviewer" && s.meta.status === "rejected").length;
}

const plannerAborted: ModeratorCondition = {
  name: "plannerAborted",
  description: 'meta.status == "aborted"',
  check: (ctx) => lastMeta(ctx).status === "aborted",
};

const planApproved: ModeratorCondition = {
  name: "planApproved",
  description: 'meta.status == "approved"',
  check: (ctx) => lastMeta(ctx).status === "approved",
};

const planRejected: ModeratorCondition = {
  name: "planRejected",
  description: 'meta.status == "rejected"',
  check: (ctx) => lastMeta(ctx).status === "rejected",
};

const reviewApproved: ModeratorCondition = {
  name: "reviewApproved",
  description: 'meta.status == "approved"',
  check: (ctx) => lastMeta(ctx).status === "approved",
};

// A YAML graph cannot count, so the YAML form relies on the reviewer
// answering "abandoned"; the bundle also stops after MAX_REJECTIONS
// rejections whatever the reviewer says.
const rejectedWithAttemptsLeft: ModeratorCondition = {
  name: "rejectedWithAttemptsLeft",
  description: `meta.status == "rejected" and fewer than ${MAX_REJECTIONS} rejections so far`,
  check: (ctx) => lastMeta(ctx).status === "rejected" && rejections(ctx) < MAX_REJECTIONS,
};

// workspaceFor finds the coder's workspace (see the top of the file). It
// runs when the coder does, never at the top level: the environment is the
// engine host's, read per thread.
function workspaceFor(ctx: ThreadContext): string {
  const line = /^[ \t]*workspace:[ \t]*(\S.*?)[ \t]*$/im.exec(ctx.start.content);
  const chosen = line !== null ? line[1] : process.env.WORKFLOW_WORKSPACE;
  if (chosen === undefined || chosen === "") {
    return path.join(os.tmpdir(), "plan-code-review", ctx.threadId);
  }
  if (!path.isAbsolute(chosen)) {
    const source = line !== null ? 'the task\'s "Workspace:" line' : "WORKFLOW_WORKSPACE";
    throw new Error(`plan-code-review: ${source} must be an absolute path, got ${JSON.stringify(chosen)}`);
  }
  return chosen;
}

// The coder is a react agent whose workspace is only known per thread, so
// its adapter is made when the role runs.
const coderAdapter: AdapterFn = <T>(prompt: string, schema: RoleSchema): RoleFn<T> => async (ctx, runtime, info) => {
  const workspace = workspaceFor(ctx);
  await mkdir(workspace, { recursive: true });
  console.log(`coder workspace: ${workspace}`);
  const agent = reactAdapter({ model: "coder", workspace, maxRounds: 40, timeout: 30 * 60_000 });
  return agent<T>(prompt, schema)(ctx, runtime, info);
};

const definition: WorkflowDefinition = {
  description: "Plan a change, have a person approve the plan, implement it in a workspace with tools, and review it (up to three attempts).",
  roles: { planner, approve, coder, reviewer },
  table: {
    [START]: [{ condition: FALLBACK, role: "planner" }],
    planner: [
      { condition: plannerAborted, role: END },
      { condition: FALLBACK, role: "approve" },
    ],
    // Nobody answering within a day ends the thread before any code is
    // written: the wait's timeout takes FALLBACK.
    approve: [
      { condition: planApproved, role: "coder" },
      { condition: planRejected, role: "planner" },
      { condition: FALLBACK, role: END },
    ],
    coder: [{ condition: FALLBACK, role: "reviewer" }],
    reviewer: [
      { condition: reviewApproved, role: END },
      { condition: rejectedWithAttemptsLeft, role: "coder" },
      { condition: FALLBACK, role: END },
    ],
  },
};

export const descriptor = buildDescriptor(definition);

// Models are named by scene: "planner", "coder" and "reviewer" fall back
// to models.default unless workflow.yaml maps them to other models.
export const run = createWorkflow(definition, {
  adapter: llmAdapter({ model: "default" }),
  overrides: {
    planner: llmAdapter({ model: "planner" }),
    approve: humanAdapter({ timeout: "24h" }),
    coder: coderAdapter,
    reviewer: llmAdapter({ model: "reviewer" }),
  },
});
