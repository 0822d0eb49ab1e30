// @uncaged/workflow-runtime as the Go engine provides it to bundles.
//
// It follows the original package (docs/compatibility.md, "Bundles"): a ModeratorTable
// picks the next role from the last step, an adapter produces the role's
// meta, the meta is stored as a content node and yielded as a RoleOutput.
// Host capabilities (the CAS, child workflows) come from the Go binding
// __host.

// The Go side shared with the compatibility packages (node parsing).
const __compat = require("internal:compat");
// Zod schemas from before Zod had toJSONSchema() (the original's bundles
// carry their own Zod).
const __zod = require("internal:zod");

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
    // A human role whose wait ran out goes where FALLBACK goes, whatever
    // the other conditions would make of its meta.
    if (steps.length > 0 && isTimedOut(steps[steps.length - 1].meta)) {
      for (const t of transitions) {
        if (t.condition === FALLBACK) return t.role;
      }
    }
    for (const t of transitions) {
      if (t.condition === FALLBACK || t.condition.check(ctx)) return t.role;
    }
    return END;
  };
}

// isTimedOut tells the meta createWorkflow writes for a human role whose
// wait ran out: exactly { timedOut: true }.
function isTimedOut(meta) {
  return meta !== null && typeof meta === "object" && meta.timedOut === true && Object.keys(meta).length === 1;
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
  // Converting a Zod schema is not free; each role's is needed every round.
  const jsonSchemas = new Map();
  const roleJSONSchema = (name, schema) => {
    if (!jsonSchemas.has(name)) jsonSchemas.set(name, schemaAsJSON(schema));
    return jsonSchemas.get(name);
  };
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
      __host.roleBegins(next);
      let result;
      try {
        result = await roleFn(current, runtime, { role: next });
      } catch (e) {
        // A person's wait that ran out (humanAdapter's timeout) takes the
        // role's FALLBACK transition, as a YAML workflow's does; without
        // one the thread fails and says so.
        if (!(e instanceof Error && e.code === "NO_ANSWER")) throw e;
        const transitions = hasOwn(definition.table, next) ? definition.table[next] : [];
        if (!transitions.some((t) => t.condition === FALLBACK)) {
          throw new Error(`${e.message}, and the table has no FALLBACK transition from "${next}" to take instead`);
        }
        result = { meta: { timedOut: true }, childThread: null };
      }
      if (result === null || typeof result !== "object" || !("meta" in result)) {
        throw new TypeError(`role "${next}" must resolve to { meta, childThread }, got ${describe(result)}`);
      }
      const meta = result.meta;
      if (meta === null || typeof meta !== "object" || Array.isArray(meta)) {
        throw new TypeError(`role "${next}" resolved meta to ${describe(meta)}; meta must be a plain object`);
      }
      // The original stores JSON.stringify(meta) as a content node whose
      // refs are the meta's artifact references: the strings its schema
      // marks casRef (Zod's .meta({ casRef: true })).
      // Nodes the agent asks the step to keep (a person's answer) are
      // refs too, so GC keeps them with the step.
      const kept = Array.isArray(result.refs) ? result.refs.filter((r) => typeof r === "string") : [];
      const artifactRefs = collectCasRefs(roleJSONSchema(next, roleDef.schema), meta).concat(kept);
      let contentHash;
      try {
        contentHash = __host.putContentNode(JSON.stringify(meta), artifactRefs);
      } catch (e) {
        throw new Error(`role "${next}": a meta field marked casRef is not a CAS hash: ${e instanceof Error ? e.message : String(e)}`);
      }
      const refs = artifactRefs.concat([contentHash]);
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
  } else if (__zod.isZodSchema(schema)) {
    json = __zod.zodToJSONSchema(schema);
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
// fn(ctx, runtime, { prompt, schema, role }) that returns the role's meta: the
// way to write a deterministic role without a model.
export function fnAdapter(fn) {
  if (typeof fn !== "function") {
    throw new TypeError("fnAdapter: fn must be a function (ctx, runtime, { prompt, schema }) => meta");
  }
  return (prompt, schema) => async (ctx, runtime, info) => ({
    meta: await fn(ctx, runtime, { prompt, schema, role: roleName(info) }),
    childThread: null,
  });
}

// ---------------------------------------------------------------------------
// Schemas: JSON Schema objects or Zod-like objects (toJSONSchema, safeParse).

const isPlainObject = (v) => v !== null && typeof v === "object" && !Array.isArray(v);

// schemaAsJSON returns the JSON Schema of a role schema without $schema, or
// null when there is none.
function schemaAsJSON(schema) {
  if (schema === null || schema === undefined) return null;
  let json = schema;
  if (typeof schema === "object" && typeof schema.toJSONSchema === "function") {
    json = schema.toJSONSchema();
  } else if (__zod.isZodSchema(schema)) {
    json = __zod.zodToJSONSchema(schema);
  }
  if (!isPlainObject(json)) return null;
  const out = {};
  for (const key of Object.keys(json)) {
    if (key !== "$schema") out[key] = json[key];
  }
  return out;
}

function jsonType(v) {
  if (v === null) return "null";
  if (Array.isArray(v)) return "array";
  if (typeof v === "number") return Number.isInteger(v) ? "integer" : "number";
  return typeof v;
}

function typeAllows(type, v) {
  if (type === undefined) return true;
  const t = jsonType(v);
  const ok = (one) => one === t || (one === "number" && t === "integer");
  return Array.isArray(type) ? type.some(ok) : ok(type);
}

// resolveRef follows a local "$ref" ("#/$defs/Name") within root.
function resolveRef(root, schema) {
  let s = schema;
  for (let i = 0; i < 32 && isPlainObject(s) && typeof s.$ref === "string"; i++) {
    if (!s.$ref.startsWith("#")) return s;
    let target = root;
    for (const part of s.$ref.slice(1).split("/").filter((p) => p !== "")) {
      const key = part.replace(/~1/g, "/").replace(/~0/g, "~");
      target = isPlainObject(target) ? target[key] : undefined;
    }
    if (!isPlainObject(target)) return s;
    s = target;
  }
  return s;
}

// branchMatches is a shallow check of v against a union branch: its type,
// const and enum, and for objects the const/enum of its properties (the
// discriminator of a discriminated union) and its required keys.
function branchMatches(root, schema, v) {
  const s = resolveRef(root, schema);
  if (!isPlainObject(s)) return s === true;
  if (!typeAllows(s.type, v)) return false;
  if ("const" in s && JSON.stringify(s.const) !== JSON.stringify(v)) return false;
  if (Array.isArray(s.enum) && !s.enum.some((e) => JSON.stringify(e) === JSON.stringify(v))) return false;
  if (isPlainObject(v)) {
    if (Array.isArray(s.required) && !s.required.every((k) => hasOwn(v, k))) return false;
    if (isPlainObject(s.properties)) {
      for (const [k, p] of Object.entries(s.properties)) {
        if (!hasOwn(v, k) || !isPlainObject(p)) continue;
        const ps = resolveRef(root, p);
        if ("const" in ps && JSON.stringify(ps.const) !== JSON.stringify(v[k])) return false;
        if (Array.isArray(ps.enum) && !ps.enum.some((e) => JSON.stringify(e) === JSON.stringify(v[k]))) return false;
      }
    }
  }
  return true;
}

// collectCasRefs walks a JSON Schema alongside a value and returns the
// strings whose schema is marked "casRef": true (Zod's .meta({casRef: true})),
// each once, in the order met: through properties, additionalProperties,
// items/prefixItems, allOf, and the first anyOf/oneOf branch the value
// matches.
export function collectCasRefs(schema, value) {
  const root = schemaAsJSON(schema);
  const out = [];
  const seen = new Set();
  const walk = (node, v, depth) => {
    if (depth > 64 || v === undefined) return;
    const s = resolveRef(root, node);
    if (!isPlainObject(s)) return;
    if (s.casRef === true && typeof v === "string" && !seen.has(v)) {
      seen.add(v);
      out.push(v);
    }
    if (Array.isArray(s.allOf)) for (const b of s.allOf) walk(b, v, depth + 1);
    for (const key of ["anyOf", "oneOf"]) {
      if (!Array.isArray(s[key])) continue;
      const branch = s[key].find((b) => branchMatches(root, b, v));
      if (branch !== undefined) walk(branch, v, depth + 1);
    }
    if (isPlainObject(v)) {
      const props = isPlainObject(s.properties) ? s.properties : {};
      for (const k of Object.keys(v)) {
        if (hasOwn(props, k)) walk(props[k], v[k], depth + 1);
        else if (isPlainObject(s.additionalProperties)) walk(s.additionalProperties, v[k], depth + 1);
      }
    } else if (Array.isArray(v)) {
      const prefix = Array.isArray(s.prefixItems) ? s.prefixItems : Array.isArray(s.items) ? s.items : [];
      const rest = isPlainObject(s.items) ? s.items : isPlainObject(s.additionalItems) ? s.additionalItems : undefined;
      v.forEach((item, i) => {
        if (i < prefix.length) walk(prefix[i], item, depth + 1);
        else if (rest !== undefined) walk(rest, item, depth + 1);
      });
    }
  };
  if (root !== null) walk(root, value, 0);
  return out;
}

// issueText renders a Zod-like safeParse error as one line.
function issueText(error) {
  if (error !== null && typeof error === "object" && Array.isArray(error.issues) && error.issues.length > 0) {
    return error.issues
      .map((i) => {
        const path = Array.isArray(i.path) && i.path.length > 0 ? `${i.path.join(".")}: ` : "";
        return `${path}${i.message}`;
      })
      .join("; ");
  }
  return error instanceof Error ? error.message : String(error);
}

// checkedMeta runs a Zod-like schema's safeParse over meta, so transforms
// and defaults apply as they would in the original; JSON Schemas were
// already validated in Go.
function checkedMeta(role, schema, meta) {
  if (schema === null || typeof schema !== "object" || typeof schema.safeParse !== "function") return meta;
  const parsed = schema.safeParse(meta);
  if (!parsed.success) {
    throw new Error(`role "${role}": the agent's output does not match the role's schema: ${issueText(parsed.error)}`);
  }
  return parsed.data;
}

function roleName(info) {
  return info !== null && typeof info === "object" && typeof info.role === "string" ? info.role : "";
}

// ---------------------------------------------------------------------------
// Agent adapters, run by the engine in Go (package engine/agents).

// agentAdapter(spec) returns the AdapterFn of a Go agent: spec is
// { type: "llm" | "react" | "cli" | "cursor" | "hermes" | "exec" |
// "workflow", ...its options }. The spec is checked here, so a bad one
// fails where the adapter is created.
export function agentAdapter(spec) {
  if (!isPlainObject(spec)) {
    throw new TypeError(`agentAdapter: spec must be an object { type, ... }, got ${describe(spec)}`);
  }
  const specJSON = JSON.stringify(spec);
  __host.validateAgent(specJSON);
  return (prompt, schema) => {
    let schemaJSON;
    return async (ctx, _runtime, info) => {
      if (schemaJSON === undefined) {
        const json = schemaAsJSON(schema);
        schemaJSON = json === null ? null : JSON.stringify(json);
      }
      const role = roleName(info);
      const r = await __host.agent(specJSON, role, typeof prompt === "string" ? prompt : "", schemaJSON, ctx);
      return { meta: checkedMeta(role, schema, r.meta), childThread: r.childThread, refs: r.refs };
    };
  };
}

function kindAdapter(type, name) {
  return (opts) => {
    if (opts === undefined || opts === null) opts = {};
    if (!isPlainObject(opts)) {
      throw new TypeError(`${name}: options must be an object, got ${describe(opts)}`);
    }
    if (hasOwn(opts, "type") && opts.type !== type) {
      throw new TypeError(`${name}: options.type must be omitted (it is "${type}")`);
    }
    return agentAdapter(Object.assign({}, opts, { type }));
  };
}

// llmAdapter({ model, maxRounds }) — one model call with a structured
// output tool.
export const llmAdapter = kindAdapter("llm", "llmAdapter");
// reactAdapter({ model, workspace, tools, maxRounds, timeout }) — a model
// with workspace tools.
export const reactAdapter = kindAdapter("react", "reactAdapter");
// cliAdapter({ command, args, model, workspace, timeout, env }) — any agent
// CLI; its output is the meta when it holds matching JSON, else extracted.
export const cliAdapter = kindAdapter("cli", "cliAdapter");
// cursorAdapter({ command, model, workspace, timeout, env }) — cursor-agent.
export const cursorAdapter = kindAdapter("cursor", "cursorAdapter");
// hermesAdapter({ command, model, workspace, timeout, env }) — hermes chat.
export const hermesAdapter = kindAdapter("hermes", "hermesAdapter");
// execAdapter({ command, args, workspace, timeout, env }) — a deterministic
// command whose stdout is the meta as JSON.
export const execAdapter = kindAdapter("exec", "execAdapter");
// humanAdapter({ assignee, timeout }) — a person answers: the role's prompt
// is the question, its schema the form; the thread waits (status
// "waiting") until someone answers or the timeout ("24h", or milliseconds)
// passes, which takes the role's FALLBACK transition.
export const humanAdapter = kindAdapter("human", "humanAdapter");

// createAgentAdapter(agent, optionsFn) bridges an AgentFn — (ctx, options)
// => Promise<string> — to an AdapterFn: options come from
// optionsFn(ctx, prompt, runtime) (or are undefined without one), the
// agent's text is stored as a content node and runtime.extract turns it
// into the role's meta, as the original's adapters do.
export function createAgentAdapter(agent, optionsFn) {
  if (typeof agent !== "function") {
    throw new TypeError(`createAgentAdapter: agent must be a function (ctx, options) => Promise<string>, got ${describe(agent)}`);
  }
  if (optionsFn !== undefined && optionsFn !== null && typeof optionsFn !== "function") {
    throw new TypeError(`createAgentAdapter: optionsFn must be a function (ctx, prompt, runtime) => options, got ${describe(optionsFn)}`);
  }
  return (prompt, schema) => async (ctx, runtime, info) => {
    const options = optionsFn ? await optionsFn(ctx, prompt, runtime) : undefined;
    const raw = await agent(ctx, options);
    const role = roleName(info);
    if (typeof raw !== "string") {
      throw new TypeError(`role "${role}": the agent must resolve to a string, got ${describe(raw)}`);
    }
    const contentHash = __host.putContentNode(raw, []);
    const extracted = await runtime.extract(schema, contentHash);
    return { meta: checkedMeta(role, schema, extracted.meta), childThread: null };
  };
}

// ---------------------------------------------------------------------------
// The rest of the original's export list: Result constructors and
// buildThreadContext.

// ok(value) and err(error) build the original's Result values.
export function ok(value) {
  return { ok: true, value };
}

export function err(error) {
  return { ok: false, error };
}

// buildThreadContext(headHash, cas) rebuilds a ThreadContext from the CAS
// by walking the state chain back from headHash (a state or start node)
// through each state's first ancestor, as the original does: the prompt
// comes from the start node's first ref, the steps from every state but
// __end__, oldest first, and threadId is "" (the CAS does not hold it).
// cas is any CasStore: its get(hash) resolves with node text or null.
export async function buildThreadContext(headHash, cas) {
  if (cas === null || typeof cas !== "object" || typeof cas.get !== "function") {
    throw new TypeError("buildThreadContext: cas must be a CasStore with get(hash)");
  }
  const load = async (hash) => {
    const text = await cas.get(hash);
    return typeof text === "string" ? __compat.parseNode(text) : null;
  };
  const promptOf = async (start) => {
    const promptHash = start.refs[0];
    if (promptHash === undefined) throw new Error("buildThreadContext: StartNode missing refs[0] prompt");
    const prompt = await load(promptHash);
    if (prompt === null || prompt.kind !== "content") {
      throw new Error(`buildThreadContext: could not resolve prompt text at ${promptHash}`);
    }
    return prompt.node.payload;
  };
  const context = (start, content, timestamp, steps) => ({
    threadId: "",
    depth: start.payload.depth,
    bundleHash: start.payload.hash,
    start: { role: START, content, meta: {}, timestamp, parentState: start.payload.parentState },
    steps,
  });

  const head = await load(headHash);
  if (head === null) throw new Error(`buildThreadContext: missing or invalid CAS blob ${headHash}`);
  if (head.kind === "start") return context(head.node, await promptOf(head.node), 0, []);
  if (head.kind !== "state") throw new Error(`buildThreadContext: head ${headHash} must be start or state node`);

  const states = [];
  for (let hash = headHash; hash !== null; ) {
    const parsed = await load(hash);
    if (parsed === null || parsed.kind !== "state") throw new Error(`buildThreadContext: expected state node at ${hash}`);
    states.push(parsed.node);
    const ancestors = parsed.node.payload.ancestors;
    hash = ancestors.length > 0 ? ancestors[0] : null;
  }
  states.reverse();
  const start = await load(states[0].payload.start);
  if (start === null || start.kind !== "start") {
    throw new Error(`buildThreadContext: StartNode missing at ${states[0].payload.start}`);
  }
  const prompt = await promptOf(start.node);
  const steps = [];
  for (const st of states) {
    if (st.payload.role === END) continue;
    const content = await load(st.payload.content);
    if (content === null || content.kind !== "content") {
      throw new Error(`buildThreadContext: expected content node at ${st.payload.content}`);
    }
    steps.push({
      role: st.payload.role,
      meta: st.payload.meta,
      contentHash: st.payload.content,
      refs: content.node.refs.slice(),
      timestamp: st.payload.timestamp,
    });
  }
  return context(start.node, prompt, steps.length > 0 ? steps[0].timestamp : 0, steps);
}
