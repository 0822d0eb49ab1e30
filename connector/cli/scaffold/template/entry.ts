// Workflow entry for the __NAME__ template. The deterministic stand-in below
// lets it build, register and run with no model. To use a model, configure
// one with `uncaged-workflow setup` and bind llmAdapter({ model: "default" })
// (or cursorAdapter, hermesAdapter, cliAdapter, reactAdapter) instead.
import { buildDescriptor, createWorkflow, fnAdapter } from "@uncaged/workflow-runtime";
import { __IDENT__TemplateWorkflowDefinition } from "template-__NAME__";

const standIn = fnAdapter((ctx) => ({ message: `__NAME__ received: ${ctx.start.content}` }));

export const descriptor = buildDescriptor(__IDENT__TemplateWorkflowDefinition);

export const run = createWorkflow(__IDENT__TemplateWorkflowDefinition, {
  adapter: standIn,
  overrides: null,
});
