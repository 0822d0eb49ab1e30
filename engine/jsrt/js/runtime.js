// @uncaged/workflow-runtime as the Go engine provides it to bundles.
//
// It follows the original package (spec/engine.md §11): a ModeratorTable
// picks the next role from the last step, an adapter produces the role's
// meta, the meta is stored as a content node and yielded as a RoleOutput.
// Host capabilities (the CAS, child workflows) come from the Go binding
// __host.

export const START = "__start__";
export const END = "__end__";
export const FALLBACK = "FALLBACK";

const hasOwn = (o, k) => o !== null && o !== undefined && Object.prototype.hasOwnProperty.call(o, k);

function describe(v) {
  if (v === null) return "null";
  if (Array.isArray(v)) return "an array";
  return typeof v === "object" ? "an object" : `${typeof v} ${String(v)}`;
}

// tableToModerator turns a ModeratorTable into pickNext: the transitions of
// the last step's role (START before any step), first FALLBACK or true
// check wins, END when nothing matches or the role has no entry.
export function tableToModerator(table) {
  return (ctx) => {
    const steps = ctx.steps;
    const current = steps.length > 0 ? steps[steps.length - 1].role : START;
    const transitions = hasOwn(table, current) ? table[current] : undefined;
    if (!transitions) return END;
    for (const t of transitions) {
      if (t.condition === FALLBACK || t.condition.check(ctx)) return t.role;
    }
    return END;
  };
}

// createWorkflow(definition, binding) returns the run function of a bundle:
// an async generator over (thread, runtime).
export function createWorkflow(definition, binding) {
  if (definition === null || typeof definition !== "object") {
    throw new TypeError("createWorkflow: definition must be an object { description, roles, table }");
  }
  if (definition.roles === null || typeof definition.roles !== "object") {
    throw new TypeError("createWorkflow: definition.roles must be an object of role definitions");
  }
  if (definition.table === null || typeof definition.table !== "object") {
    throw new TypeError("createWorkflow: definition.table must be a ModeratorTable object");
  }
  if (binding === null || typeof binding !== "object") {
    throw new TypeError("createWorkflow: binding must be an object { adapter, overrides }");
  }
  const pickNext = tableToModerator(definition.table);
  return async function* workflowLoop(thread, runtime) {
    if (thread.start.role !== START) {
      throw new Error("workflow loop expected start role to be __start__");
    }
    let current = thread;
    for (;;) {
      const next = pickNext(current);
      if (next === END) {
        return { returnCode: 0, summary: "completed: moderator returned END" };
      }
      const roleDef = hasOwn(definition.roles, next) ? definition.roles[next] : undefined;
      if (roleDef === undefined) {
        return { returnCode: 1, summary: `unknown role: ${next}` };
      }
      const overrides = binding.overrides;
      const override = overrides !== null && overrides !== undefined ? overrides[next] : undefined;
      const adapter = override !== undefined ? override : binding.adapter;
      if (typeof adapter !== "function") {
        throw new TypeError(`createWorkflow: no adapter for role "${next}": binding.adapter is ${describe(adapter)}`);
      }
      const roleFn = adapter(roleDef.systemPrompt, roleDef.schema);
      if (typeof roleFn !== "function") {
        throw new TypeError(
          `the adapter for role "${next}" must return a role function (ctx, runtime) => Promise<{ meta, childThread }>, got ${describe(roleFn)}`,
        );
      }
      const result = await roleFn(current, runtime);
      if (result === null || typeof result !== "object" || !("meta" in result)) {
        throw new TypeError(`role "${next}" must resolve to { meta, childThread }, got ${describe(result)}`);
      }
      const meta = result.meta;
      if (meta === null || typeof meta !== "object" || Array.isArray(meta)) {
        throw new TypeError(`role "${next}" resolved meta to ${describe(meta)}; meta must be a plain object`);
      }
      // The original stores JSON.stringify(meta) as a content node whose
      // refs are the meta's CAS references (collected through Zod
      // annotations, which plain JSON Schemas do not have): none here.
      const contentHash = __host.putContentNode(JSON.stringify(meta), []);
      const refs = [contentHash];
      const childThread = result.childThread !== undefined && result.childThread !== null ? result.childThread : null;
      yield { role: next, contentHash, meta, refs, childThread };
      // A new context each round, as the original's spread does; concat
      // and assign avoid the iterator protocol, which dominates long runs.
      current = Object.assign({}, current, {
        steps: current.steps.concat([{ role: next, contentHash, meta, refs, timestamp: Date.now() }]),
      });
    }
  };
}

function toJSONSchema(roleName, schema) {
  let json = schema;
  if (schema !== null && typeof schema === "object" && typeof schema.toJSONSchema === "function") {
    json = schema.toJSONSchema();
  } else if (schema !== null && typeof schema === "object" && "_zod" in schema) {
    throw new TypeError(
      `buildDescriptor: role "${roleName}" has a Zod schema without toJSONSchema(); pass z.toJSONSchema(schema) (a plain JSON Schema) instead`,
    );
  }
  if (json === null || typeof json !== "object" || Array.isArray(json)) {
    return json; // descriptor validation reports it
  }
  const out = {};
  for (const key of Object.keys(json)) {
    if (key !== "$schema") out[key] = json[key];
  }
  return out;
}

// buildDescriptor derives the static descriptor (roles and routing graph)
// from a definition, as the original's workflow-register does.
export function buildDescriptor(definition) {
  const roles = {};
  for (const [name, role] of Object.entries(definition.roles)) {
    roles[name] = {
      description: role.description,
      systemPrompt: role.systemPrompt,
      schema: toJSONSchema(name, role.schema),
    };
  }
  const edges = [];
  for (const [from, transitions] of Object.entries(definition.table)) {
    for (const t of transitions) {
      const fallback = t.condition === FALLBACK;
      edges.push({
        from,
        to: t.role,
        condition: fallback ? FALLBACK : t.condition.name,
        conditionDescription: fallback ? null : t.condition.description,
      });
    }
  }
  return { description: definition.description, roles, graph: { edges } };
}

// workflowAdapter(name) runs the registered workflow `name` as a child
// thread with the parent's prompt; the role's meta is the child's outcome
// and the step points at the child's __end__ state.
export function workflowAdapter(name) {
  if (typeof name !== "string" || name === "") {
    throw new TypeError("workflowAdapter: name must be a non-empty string");
  }
  return (_prompt, _schema) => async (ctx, _runtime) => {
    let r;
    try {
      r = await __host.runChild(name, ctx.start.content);
    } catch (e) {
      throw new Error(`child workflow "${name}" failed: ${e instanceof Error ? e.message : String(e)}`);
    }
    return {
      meta: { returnCode: r.returnCode, summary: r.summary, rootHash: r.rootHash, threadId: r.threadId },
      childThread: r.rootHash,
    };
  };
}

// workflowAsAgent is the original's deprecated name for workflowAdapter.
export const workflowAsAgent = workflowAdapter;

// fnAdapter(fn) makes an adapter from a plain (possibly async) function
// fn(ctx, runtime, { prompt, schema }) that returns the role's meta: the
// way to write a deterministic role without a model.
export function fnAdapter(fn) {
  if (typeof fn !== "function") {
    throw new TypeError("fnAdapter: fn must be a function (ctx, runtime, { prompt, schema }) => meta");
  }
  return (prompt, schema) => async (ctx, runtime) => ({
    meta: await fn(ctx, runtime, { prompt, schema }),
    childThread: null,
  });
}
