// A workflow whose second role throws at a known line (9) of this file.
import { createWorkflow, buildDescriptor, START, END } from "@uncaged/workflow-runtime";

type Meta = { ok: boolean };

// The throw below must stay on line 9: tests read the mapped position.
function explode(value: string): never {
  const reason: string = `second role exploded on ${value}`;
  if (value !== "") throw new Error(reason);
  throw new Error("empty prompt");
}

const definition = {
  description: "Fails in the middle.",
  roles: {
    first: { description: "Works", systemPrompt: "", schema: { type: "object" } },
    second: { description: "Throws", systemPrompt: "", schema: { type: "object" } },
  },
  table: {
    [START]: [{ condition: "FALLBACK", role: "first" }],
    first: [{ condition: "FALLBACK", role: "second" }],
    second: [{ condition: "FALLBACK", role: END }],
  },
};

const adapter = (_prompt: string, _schema: unknown) => async (ctx: { steps: unknown[]; start: { content: string } }) => {
  if (ctx.steps.length === 0) return { meta: { ok: true } satisfies Meta, childThread: null };
  explode(ctx.start.content);
};

export const run = createWorkflow(definition as never, { adapter, overrides: null } as never);
export const descriptor = buildDescriptor(definition as never);
