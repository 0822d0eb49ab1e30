// Roles of the __NAME__ template: what each role is for, the system prompt
// its agent gets, and the JSON Schema its meta must satisfy.
import type { RoleDefinition } from "@uncaged/workflow-runtime";

export const __IDENT__TemplateDescription = "Starter template: a __NAME__ role, then END.";

// The meta each role produces, by role name.
export type __TYPE__TemplateMeta = {
  "__NAME__": { message: string };
};

// A plain JSON Schema, typed `as const`. With zod installed you may use
// z.object({ message: z.string() }) instead.
export const __IDENT__Schema = {
  type: "object",
  properties: { message: { type: "string" } },
  required: ["message"],
  additionalProperties: false,
} as const;

export const __IDENT__Role: RoleDefinition = {
  description: "Does the __NAME__ step: answers the task in one short sentence",
  systemPrompt: "You are the __NAME__ role of a workflow. Answer the task in one short sentence.",
  schema: __IDENT__Schema,
};
