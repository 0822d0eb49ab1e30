// The __NAME__ template: roles and routing, with no agent bound. A workflow
// entry (workflows/*-entry.ts) binds adapters to it with createWorkflow.
import type { WorkflowDefinition } from "@uncaged/workflow-runtime";

import { __IDENT__TemplateTable } from "./moderator";
import { __IDENT__Role, __IDENT__TemplateDescription } from "./roles";

export type { __TYPE__TemplateMeta } from "./roles";

export const __IDENT__TemplateWorkflowDefinition: WorkflowDefinition = {
  description: __IDENT__TemplateDescription,
  roles: { "__NAME__": __IDENT__Role },
  table: __IDENT__TemplateTable,
};
