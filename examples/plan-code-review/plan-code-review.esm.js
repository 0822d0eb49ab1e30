// plan-code-review-entry.ts
import { buildDescriptor, createWorkflow, END, FALLBACK, humanAdapter, llmAdapter, reactAdapter, START } from "@uncaged/workflow-runtime";
import { mkdir } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
var MAX_REJECTIONS = 3;
var plannerSchema = {
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
          detail: { type: "string" }
        },
        required: ["title", "detail"],
        additionalProperties: false
      }
    },
    reason: { type: "string", minLength: 1 }
  },
  required: ["status"],
  additionalProperties: false,
  allOf: [
    { if: { properties: { status: { const: "planned" } } }, then: { required: ["phases"] } },
    { if: { properties: { status: { const: "aborted" } } }, then: { required: ["reason"] } }
  ]
};
var approveSchema = {
  type: "object",
  description: "Your decision on the plan.",
  properties: {
    status: { enum: ["approved", "rejected"] },
    feedback: { type: "string", description: "What the planner should change (when rejecting)" }
  },
  required: ["status"],
  additionalProperties: false
};
var coderSchema = {
  type: "object",
  description: "Submit your work: the files you changed (paths relative to the workspace) and a summary.",
  properties: {
    filesChanged: { type: "array", items: { type: "string" } },
    summary: { type: "string", minLength: 1 }
  },
  required: ["filesChanged", "summary"],
  additionalProperties: false
};
var reviewerSchema = {
  type: "object",
  description: "Submit your review: approved, rejected with the issues to fix, or abandoned when the last attempt still fails.",
  properties: {
    status: { enum: ["approved", "rejected", "abandoned"] },
    issues: { type: "array", items: { type: "string" } }
  },
  required: ["status", "issues"],
  additionalProperties: false
};
var planner = {
  description: "Breaks the task into ordered phases, or aborts",
  systemPrompt: [
    "You are the planner of a plan, code and review workflow.",
    "Read the task and break it into a short ordered list of phases that a developer can implement one after another. Each phase has a title and a detail that says what to change and how to check it.",
    "Use one phase for a small change, two or three for a feature and at most five for a large piece of work.",
    'If the task is unclear, contradicts itself or cannot be done by editing files in a workspace, answer status "aborted" with the reason instead of guessing.',
    "When the latest step is a rejected plan, revise the plan as its feedback asks."
  ].join("\n"),
  schema: plannerSchema
};
var approve = {
  description: "A person approves the plan before any code is written",
  systemPrompt: "Read the planner's phases. Approve them to let the coder start, or reject them with feedback that tells the planner what to change.",
  schema: approveSchema
};
var coder = {
  description: "Implements the plan in the workspace with file and shell tools",
  systemPrompt: [
    "You are the coder of a plan, code and review workflow.",
    "Implement the planner's phases in your workspace with your tools: read_file, write_file, patch_file and shell_exec. Keep the changes small and focused on the task.",
    "When the latest step is a rejected review, fix every issue it lists before anything else.",
    "Check your work before you finish: run the program or its tests with shell_exec and read what it prints.",
    "Report the files you changed, as paths relative to the workspace, and a short summary of what you did and how you checked it."
  ].join("\n"),
  schema: coderSchema
};
var reviewer = {
  description: "Approves the change or sends it back with issues",
  systemPrompt: [
    "You are the reviewer of a plan, code and review workflow.",
    "Compare the coder's latest report with the task and the planner's phases. You cannot open the files; judge from the report, and reject work whose report does not show that every phase is done and was checked.",
    'Answer status "approved" with no issues when the work is done. Otherwise answer "rejected" and list each issue as one concrete sentence the coder can act on.',
    'The coder gets three attempts: if you rejected this work twice already (see the previous steps) and it is still not acceptable, answer "abandoned" with the remaining issues instead of rejecting it again.'
  ].join("\n"),
  schema: reviewerSchema
};
function lastMeta(ctx) {
  const last = ctx.steps[ctx.steps.length - 1];
  return last === void 0 ? {} : last.meta;
}
function rejections(ctx) {
  return ctx.steps.filter((s) => s.role === "reviewer" && s.meta.status === "rejected").length;
}
var plannerAborted = {
  name: "plannerAborted",
  description: 'meta.status == "aborted"',
  check: (ctx) => lastMeta(ctx).status === "aborted"
};
var planApproved = {
  name: "planApproved",
  description: 'meta.status == "approved"',
  check: (ctx) => lastMeta(ctx).status === "approved"
};
var planRejected = {
  name: "planRejected",
  description: 'meta.status == "rejected"',
  check: (ctx) => lastMeta(ctx).status === "rejected"
};
var reviewApproved = {
  name: "reviewApproved",
  description: 'meta.status == "approved"',
  check: (ctx) => lastMeta(ctx).status === "approved"
};
var rejectedWithAttemptsLeft = {
  name: "rejectedWithAttemptsLeft",
  description: `meta.status == "rejected" and fewer than ${MAX_REJECTIONS} rejections so far`,
  check: (ctx) => lastMeta(ctx).status === "rejected" && rejections(ctx) < MAX_REJECTIONS
};
function workspaceFor(ctx) {
  const line = /^[ \t]*workspace:[ \t]*(\S.*?)[ \t]*$/im.exec(ctx.start.content);
  const chosen = line !== null ? line[1] : process.env.WORKFLOW_WORKSPACE;
  if (chosen === void 0 || chosen === "") {
    return path.join(os.tmpdir(), "plan-code-review", ctx.threadId);
  }
  if (!path.isAbsolute(chosen)) {
    const source = line !== null ? `the task's "Workspace:" line` : "WORKFLOW_WORKSPACE";
    throw new Error(`plan-code-review: ${source} must be an absolute path, got ${JSON.stringify(chosen)}`);
  }
  return chosen;
}
var coderAdapter = (prompt, schema) => async (ctx, runtime, info) => {
  const workspace = workspaceFor(ctx);
  await mkdir(workspace, { recursive: true });
  console.log(`coder workspace: ${workspace}`);
  const agent = reactAdapter({ model: "coder", workspace, maxRounds: 40, timeout: 30 * 6e4 });
  return agent(prompt, schema)(ctx, runtime, info);
};
var definition = {
  description: "Plan a change, have a person approve the plan, implement it in a workspace with tools, and review it (up to three attempts).",
  roles: { planner, approve, coder, reviewer },
  table: {
    [START]: [{ condition: FALLBACK, role: "planner" }],
    planner: [
      { condition: plannerAborted, role: END },
      { condition: FALLBACK, role: "approve" }
    ],
    // Nobody answering within a day ends the thread before any code is
    // written: the wait's timeout takes FALLBACK.
    approve: [
      { condition: planApproved, role: "coder" },
      { condition: planRejected, role: "planner" },
      { condition: FALLBACK, role: END }
    ],
    coder: [{ condition: FALLBACK, role: "reviewer" }],
    reviewer: [
      { condition: reviewApproved, role: END },
      { condition: rejectedWithAttemptsLeft, role: "coder" },
      { condition: FALLBACK, role: END }
    ]
  }
};
var descriptor = buildDescriptor(definition);
var run = createWorkflow(definition, {
  adapter: llmAdapter({ model: "default" }),
  overrides: {
    planner: llmAdapter({ model: "planner" }),
    approve: humanAdapter({ timeout: "24h" }),
    coder: coderAdapter,
    reviewer: llmAdapter({ model: "reviewer" })
  }
});
export {
  MAX_REJECTIONS,
  descriptor,
  run
};
//# sourceMappingURL=data:application/json;base64,ewogICJ2ZXJzaW9uIjogMywKICAic291cmNlcyI6IFsicGxhbi1jb2RlLXJldmlldy1lbnRyeS50cyJdLAogICJtYXBwaW5ncyI6ICI7QUFnQkEsU0FBUyxpQkFBaUIsZ0JBQWdCLEtBQUssVUFBVSxjQUFjLFlBQVksY0FBYyxhQUFhO0FBVTlHLFNBQVMsYUFBYTtBQUN0QixPQUFPLFFBQVE7QUFDZixPQUFPLFVBQVU7QUFHVixJQUFNLGlCQUFpQjtBQUk5QixJQUFNLGdCQUFnQjtBQUFBLEVBQ3BCLE1BQU07QUFBQSxFQUNOLGFBQWE7QUFBQSxFQUNiLFlBQVk7QUFBQSxJQUNWLFFBQVEsRUFBRSxNQUFNLENBQUMsV0FBVyxTQUFTLEVBQUU7QUFBQSxJQUN2QyxRQUFRO0FBQUEsTUFDTixNQUFNO0FBQUEsTUFDTixVQUFVO0FBQUEsTUFDVixPQUFPO0FBQUEsUUFDTCxNQUFNO0FBQUEsUUFDTixZQUFZO0FBQUEsVUFDVixPQUFPLEVBQUUsTUFBTSxVQUFVLFdBQVcsRUFBRTtBQUFBLFVBQ3RDLFFBQVEsRUFBRSxNQUFNLFNBQVM7QUFBQSxRQUMzQjtBQUFBLFFBQ0EsVUFBVSxDQUFDLFNBQVMsUUFBUTtBQUFBLFFBQzVCLHNCQUFzQjtBQUFBLE1BQ3hCO0FBQUEsSUFDRjtBQUFBLElBQ0EsUUFBUSxFQUFFLE1BQU0sVUFBVSxXQUFXLEVBQUU7QUFBQSxFQUN6QztBQUFBLEVBQ0EsVUFBVSxDQUFDLFFBQVE7QUFBQSxFQUNuQixzQkFBc0I7QUFBQSxFQUN0QixPQUFPO0FBQUEsSUFDTCxFQUFFLElBQUksRUFBRSxZQUFZLEVBQUUsUUFBUSxFQUFFLE9BQU8sVUFBVSxFQUFFLEVBQUUsR0FBRyxNQUFNLEVBQUUsVUFBVSxDQUFDLFFBQVEsRUFBRSxFQUFFO0FBQUEsSUFDdkYsRUFBRSxJQUFJLEVBQUUsWUFBWSxFQUFFLFFBQVEsRUFBRSxPQUFPLFVBQVUsRUFBRSxFQUFFLEdBQUcsTUFBTSxFQUFFLFVBQVUsQ0FBQyxRQUFRLEVBQUUsRUFBRTtBQUFBLEVBQ3pGO0FBQ0Y7QUFFQSxJQUFNLGdCQUFnQjtBQUFBLEVBQ3BCLE1BQU07QUFBQSxFQUNOLGFBQWE7QUFBQSxFQUNiLFlBQVk7QUFBQSxJQUNWLFFBQVEsRUFBRSxNQUFNLENBQUMsWUFBWSxVQUFVLEVBQUU7QUFBQSxJQUN6QyxVQUFVLEVBQUUsTUFBTSxVQUFVLGFBQWEsa0RBQWtEO0FBQUEsRUFDN0Y7QUFBQSxFQUNBLFVBQVUsQ0FBQyxRQUFRO0FBQUEsRUFDbkIsc0JBQXNCO0FBQ3hCO0FBRUEsSUFBTSxjQUFjO0FBQUEsRUFDbEIsTUFBTTtBQUFBLEVBQ04sYUFBYTtBQUFBLEVBQ2IsWUFBWTtBQUFBLElBQ1YsY0FBYyxFQUFFLE1BQU0sU0FBUyxPQUFPLEVBQUUsTUFBTSxTQUFTLEVBQUU7QUFBQSxJQUN6RCxTQUFTLEVBQUUsTUFBTSxVQUFVLFdBQVcsRUFBRTtBQUFBLEVBQzFDO0FBQUEsRUFDQSxVQUFVLENBQUMsZ0JBQWdCLFNBQVM7QUFBQSxFQUNwQyxzQkFBc0I7QUFDeEI7QUFFQSxJQUFNLGlCQUFpQjtBQUFBLEVBQ3JCLE1BQU07QUFBQSxFQUNOLGFBQWE7QUFBQSxFQUNiLFlBQVk7QUFBQSxJQUNWLFFBQVEsRUFBRSxNQUFNLENBQUMsWUFBWSxZQUFZLFdBQVcsRUFBRTtBQUFBLElBQ3RELFFBQVEsRUFBRSxNQUFNLFNBQVMsT0FBTyxFQUFFLE1BQU0sU0FBUyxFQUFFO0FBQUEsRUFDckQ7QUFBQSxFQUNBLFVBQVUsQ0FBQyxVQUFVLFFBQVE7QUFBQSxFQUM3QixzQkFBc0I7QUFDeEI7QUFhQSxJQUFNLFVBQTBCO0FBQUEsRUFDOUIsYUFBYTtBQUFBLEVBQ2IsY0FBYztBQUFBLElBQ1o7QUFBQSxJQUNBO0FBQUEsSUFDQTtBQUFBLElBQ0E7QUFBQSxJQUNBO0FBQUEsRUFDRixFQUFFLEtBQUssSUFBSTtBQUFBLEVBQ1gsUUFBUTtBQUNWO0FBR0EsSUFBTSxVQUEwQjtBQUFBLEVBQzlCLGFBQWE7QUFBQSxFQUNiLGNBQ0U7QUFBQSxFQUNGLFFBQVE7QUFDVjtBQUVBLElBQU0sUUFBd0I7QUFBQSxFQUM1QixhQUFhO0FBQUEsRUFDYixjQUFjO0FBQUEsSUFDWjtBQUFBLElBQ0E7QUFBQSxJQUNBO0FBQUEsSUFDQTtBQUFBLElBQ0E7QUFBQSxFQUNGLEVBQUUsS0FBSyxJQUFJO0FBQUEsRUFDWCxRQUFRO0FBQ1Y7QUFFQSxJQUFNLFdBQTJCO0FBQUEsRUFDL0IsYUFBYTtBQUFBLEVBQ2IsY0FBYztBQUFBLElBQ1o7QUFBQSxJQUNBO0FBQUEsSUFDQTtBQUFBLElBQ0E7QUFBQSxFQUNGLEVBQUUsS0FBSyxJQUFJO0FBQUEsRUFDWCxRQUFRO0FBQ1Y7QUFFQSxTQUFTLFNBQVMsS0FBZ0Q7QUFDaEUsUUFBTSxPQUFPLElBQUksTUFBTSxJQUFJLE1BQU0sU0FBUyxDQUFDO0FBQzNDLFNBQU8sU0FBUyxTQUFZLENBQUMsSUFBSSxLQUFLO0FBQ3hDO0FBRUEsU0FBUyxXQUFXLEtBQTRCO0FBQzlDLFNBQU8sSUFBSSxNQUFNLE9BQU8sQ0FBQyxNQUFNLEVBQUUsU0FBUyxjQUFjLEVBQUUsS0FBSyxXQUFXLFVBQVUsRUFBRTtBQUN4RjtBQUVBLElBQU0saUJBQXFDO0FBQUEsRUFDekMsTUFBTTtBQUFBLEVBQ04sYUFBYTtBQUFBLEVBQ2IsT0FBTyxDQUFDLFFBQVEsU0FBUyxHQUFHLEVBQUUsV0FBVztBQUMzQztBQUVBLElBQU0sZUFBbUM7QUFBQSxFQUN2QyxNQUFNO0FBQUEsRUFDTixhQUFhO0FBQUEsRUFDYixPQUFPLENBQUMsUUFBUSxTQUFTLEdBQUcsRUFBRSxXQUFXO0FBQzNDO0FBRUEsSUFBTSxlQUFtQztBQUFBLEVBQ3ZDLE1BQU07QUFBQSxFQUNOLGFBQWE7QUFBQSxFQUNiLE9BQU8sQ0FBQyxRQUFRLFNBQVMsR0FBRyxFQUFFLFdBQVc7QUFDM0M7QUFFQSxJQUFNLGlCQUFxQztBQUFBLEVBQ3pDLE1BQU07QUFBQSxFQUNOLGFBQWE7QUFBQSxFQUNiLE9BQU8sQ0FBQyxRQUFRLFNBQVMsR0FBRyxFQUFFLFdBQVc7QUFDM0M7QUFLQSxJQUFNLDJCQUErQztBQUFBLEVBQ25ELE1BQU07QUFBQSxFQUNOLGFBQWEsNENBQTRDLGNBQWM7QUFBQSxFQUN2RSxPQUFPLENBQUMsUUFBUSxTQUFTLEdBQUcsRUFBRSxXQUFXLGNBQWMsV0FBVyxHQUFHLElBQUk7QUFDM0U7QUFLQSxTQUFTLGFBQWEsS0FBNEI7QUFDaEQsUUFBTSxPQUFPLDBDQUEwQyxLQUFLLElBQUksTUFBTSxPQUFPO0FBQzdFLFFBQU0sU0FBUyxTQUFTLE9BQU8sS0FBSyxDQUFDLElBQUksUUFBUSxJQUFJO0FBQ3JELE1BQUksV0FBVyxVQUFhLFdBQVcsSUFBSTtBQUN6QyxXQUFPLEtBQUssS0FBSyxHQUFHLE9BQU8sR0FBRyxvQkFBb0IsSUFBSSxRQUFRO0FBQUEsRUFDaEU7QUFDQSxNQUFJLENBQUMsS0FBSyxXQUFXLE1BQU0sR0FBRztBQUM1QixVQUFNLFNBQVMsU0FBUyxPQUFPLGlDQUFrQztBQUNqRSxVQUFNLElBQUksTUFBTSxxQkFBcUIsTUFBTSxrQ0FBa0MsS0FBSyxVQUFVLE1BQU0sQ0FBQyxFQUFFO0FBQUEsRUFDdkc7QUFDQSxTQUFPO0FBQ1Q7QUFJQSxJQUFNLGVBQTBCLENBQUksUUFBZ0IsV0FBa0MsT0FBTyxLQUFLLFNBQVMsU0FBUztBQUNsSCxRQUFNLFlBQVksYUFBYSxHQUFHO0FBQ2xDLFFBQU0sTUFBTSxXQUFXLEVBQUUsV0FBVyxLQUFLLENBQUM7QUFDMUMsVUFBUSxJQUFJLG9CQUFvQixTQUFTLEVBQUU7QUFDM0MsUUFBTSxRQUFRLGFBQWEsRUFBRSxPQUFPLFNBQVMsV0FBVyxXQUFXLElBQUksU0FBUyxLQUFLLElBQU8sQ0FBQztBQUM3RixTQUFPLE1BQVMsUUFBUSxNQUFNLEVBQUUsS0FBSyxTQUFTLElBQUk7QUFDcEQ7QUFFQSxJQUFNLGFBQWlDO0FBQUEsRUFDckMsYUFBYTtBQUFBLEVBQ2IsT0FBTyxFQUFFLFNBQVMsU0FBUyxPQUFPLFNBQVM7QUFBQSxFQUMzQyxPQUFPO0FBQUEsSUFDTCxDQUFDLEtBQUssR0FBRyxDQUFDLEVBQUUsV0FBVyxVQUFVLE1BQU0sVUFBVSxDQUFDO0FBQUEsSUFDbEQsU0FBUztBQUFBLE1BQ1AsRUFBRSxXQUFXLGdCQUFnQixNQUFNLElBQUk7QUFBQSxNQUN2QyxFQUFFLFdBQVcsVUFBVSxNQUFNLFVBQVU7QUFBQSxJQUN6QztBQUFBO0FBQUE7QUFBQSxJQUdBLFNBQVM7QUFBQSxNQUNQLEVBQUUsV0FBVyxjQUFjLE1BQU0sUUFBUTtBQUFBLE1BQ3pDLEVBQUUsV0FBVyxjQUFjLE1BQU0sVUFBVTtBQUFBLE1BQzNDLEVBQUUsV0FBVyxVQUFVLE1BQU0sSUFBSTtBQUFBLElBQ25DO0FBQUEsSUFDQSxPQUFPLENBQUMsRUFBRSxXQUFXLFVBQVUsTUFBTSxXQUFXLENBQUM7QUFBQSxJQUNqRCxVQUFVO0FBQUEsTUFDUixFQUFFLFdBQVcsZ0JBQWdCLE1BQU0sSUFBSTtBQUFBLE1BQ3ZDLEVBQUUsV0FBVywwQkFBMEIsTUFBTSxRQUFRO0FBQUEsTUFDckQsRUFBRSxXQUFXLFVBQVUsTUFBTSxJQUFJO0FBQUEsSUFDbkM7QUFBQSxFQUNGO0FBQ0Y7QUFFTyxJQUFNLGFBQWEsZ0JBQWdCLFVBQVU7QUFJN0MsSUFBTSxNQUFNLGVBQWUsWUFBWTtBQUFBLEVBQzVDLFNBQVMsV0FBVyxFQUFFLE9BQU8sVUFBVSxDQUFDO0FBQUEsRUFDeEMsV0FBVztBQUFBLElBQ1QsU0FBUyxXQUFXLEVBQUUsT0FBTyxVQUFVLENBQUM7QUFBQSxJQUN4QyxTQUFTLGFBQWEsRUFBRSxTQUFTLE1BQU0sQ0FBQztBQUFBLElBQ3hDLE9BQU87QUFBQSxJQUNQLFVBQVUsV0FBVyxFQUFFLE9BQU8sV0FBVyxDQUFDO0FBQUEsRUFDNUM7QUFDRixDQUFDOyIsCiAgIm5hbWVzIjogW10KfQo=
