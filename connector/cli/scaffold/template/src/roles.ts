// Roles of the __NAME__ template: what each role is for, the system prompt
// its agent gets, and the JSON Schema its meta must satisfy.
import type { RoleDefinition } from "@uncaged/workflow-runtime";

export const __IDENT__TemplateDescription = "Starter template: a greeter role, then END.";

// The meta each role produces, by role name.
export type __TYPE__TemplateMeta = {
  greeter: { message: string };
};

// A plain JSON Schema, typed `as const`. With zod installed you may use
// z.object({ message: z.string() }) instead.
export const greeterSchema = {
  type: "object",
  properties: { message: { type: "string" } },
  required: ["message"],
  additionalProperties: false,
} as const;

export const greeterRole: RoleDefinition = {
  description: "Answers the task with a short friendly sentence",
  systemPrompt: "You are a friendly assistant. Answer the task in one short sentence.",
  schema: greeterSchema,
};
