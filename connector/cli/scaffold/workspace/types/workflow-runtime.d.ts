// Type declarations for "@uncaged/workflow-runtime", the module the
// uncaged-workflow engine provides to every bundle at run time. It is never
// installed or bundled: `uncaged-workflow build` keeps the import external and
// the engine supplies the implementation. tsconfig.json maps the module name
// to this file so editors and `tsc --noEmit` can check your code.

export declare const START: "__start__";
export declare const END: "__end__";
export declare const FALLBACK: "FALLBACK";

export type JsonSchema = { readonly [key: string]: unknown };

/** Anything with toJSONSchema() (a Zod v4 schema) or a plain JSON Schema object. */
export type RoleSchema = JsonSchema | { toJSONSchema: () => JsonSchema };

/** The metadata each role produces, keyed by role name. */
export type RoleMeta = { [role: string]: { [key: string]: unknown } };

export type StartStep = {
  role: typeof START;
  content: string;
  meta: { [key: string]: unknown };
  timestamp: number;
  parentState: string | null;
};

export type RoleStep<Meta = { [key: string]: unknown }> = {
  role: string;
  meta: Meta;
  contentHash: string;
  refs: string[];
  timestamp: number;
};

/** What a role sees: the thread so far. */
export type ThreadContext = {
  threadId: string;
  depth: number;
  bundleHash: string;
  start: StartStep;
  steps: RoleStep[];
};

export type CasStore = {
  /** Stores text (wrapped in a content node) and resolves with its hash. */
  put: (content: string) => Promise<string>;
  /** Resolves with the stored node text, or null when the hash is unknown. */
  get: (hash: string) => Promise<string | null>;
  delete: (hash: string) => Promise<void>;
  list: () => Promise<string[]>;
};

export type ExtractResult<T> = { meta: T; contentPayload: string; refs: string[] };

/** Asks the configured model (workflow.yaml) for metadata matching schema. */
export type ExtractFn = <T = { [key: string]: unknown }>(schema: RoleSchema, contentHash: string) => Promise<ExtractResult<T>>;

export type WorkflowRuntime = { cas: CasStore; extract: ExtractFn };

export type RoleResult<T> = { meta: T; childThread: string | null };

/** A role function: runs one role for a thread. */
export type RoleFn<T = { [key: string]: unknown }> = (
  ctx: ThreadContext,
  runtime: WorkflowRuntime,
  info: { role: string },
) => Promise<RoleResult<T>>;

/** An adapter turns a role's system prompt and schema into a role function. */
export type AdapterFn = <T = { [key: string]: unknown }>(prompt: string, schema: RoleSchema) => RoleFn<T>;

export type AdapterBinding = {
  adapter: AdapterFn;
  overrides: { [role: string]: AdapterFn } | null;
};

export type RoleDefinition = {
  description: string;
  systemPrompt: string;
  schema: RoleSchema;
};

export type ModeratorCondition = {
  name: string;
  description: string;
  check: (ctx: ThreadContext) => boolean;
};

export type ModeratorTransition = {
  condition: ModeratorCondition | typeof FALLBACK;
  role: string;
};

/** Routing: for START and each role, ordered transitions; first match wins. */
export type ModeratorTable = { [from: string]: ModeratorTransition[] };

export type WorkflowDefinition = {
  description: string;
  roles: { [role: string]: RoleDefinition };
  table: ModeratorTable;
};

export type WorkflowRoleDescriptor = {
  description: string;
  systemPrompt: string;
  schema: JsonSchema;
};

export type WorkflowGraphEdge = {
  from: string;
  to: string;
  condition: string;
  conditionDescription: string | null;
};

export type WorkflowDescriptor = {
  description: string;
  roles: { [role: string]: WorkflowRoleDescriptor };
  graph: { edges: WorkflowGraphEdge[] };
};

export type RoleOutput = {
  role: string;
  contentHash: string;
  meta: { [key: string]: unknown };
  refs: string[];
  childThread: string | null;
};

export type WorkflowCompletion = { returnCode: number; summary: string };

export type WorkflowFn = (thread: ThreadContext, runtime: WorkflowRuntime) => AsyncGenerator<RoleOutput, WorkflowCompletion>;

export declare function createWorkflow(definition: WorkflowDefinition, binding: AdapterBinding): WorkflowFn;
export declare function buildDescriptor(definition: WorkflowDefinition): WorkflowDescriptor;
export declare function tableToModerator(table: ModeratorTable): (ctx: ThreadContext) => string;
/** The strings in value whose schema is marked "casRef": true. */
export declare function collectCasRefs(schema: RoleSchema, value: unknown): string[];

/** A deterministic role: fn's result is the role's meta. No model involved. */
export declare function fnAdapter(
  fn: (ctx: ThreadContext, runtime: WorkflowRuntime, info: { prompt: string; schema: RoleSchema; role: string }) => unknown,
): AdapterFn;

/** Runs the registered workflow `name` as a child thread. */
export declare function workflowAdapter(name: string): AdapterFn;
/** The original's deprecated name for workflowAdapter. */
export declare const workflowAsAgent: typeof workflowAdapter;

/** An agent as YAML workflows describe one (`agent:`); type selects the kind. */
export type AgentSpec = {
  type: "llm" | "react" | "cli" | "cursor" | "hermes" | "exec" | "workflow" | "human";
  model?: string;
  command?: string;
  args?: string[];
  workspace?: string;
  /** Milliseconds, or a duration such as "90s" or "24h". */
  timeout?: number | string;
  maxRounds?: number;
  tools?: string[];
  workflow?: string;
  env?: { [name: string]: string };
  /** human only: who is asked to answer (shown in the inbox). */
  assignee?: string;
};

export declare function agentAdapter(spec: AgentSpec): AdapterFn;
/** One model call with a structured-output tool; model is a scene or provider/model. */
export declare function llmAdapter(options?: { model?: string; maxRounds?: number; timeout?: number }): AdapterFn;
/** A model with workspace tools (read/write/patch files, shell). */
export declare function reactAdapter(options: {
  model?: string;
  workspace: string;
  tools?: string[];
  maxRounds?: number;
  timeout?: number;
}): AdapterFn;
/** Any agent CLI; its output is extracted into the role's meta. */
export declare function cliAdapter(options: {
  command: string;
  args?: string[];
  model?: string;
  workspace?: string;
  timeout?: number;
  env?: { [name: string]: string };
}): AdapterFn;
/** cli presets; command, model and timeout default to WORKFLOW_CURSOR_* / WORKFLOW_HERMES_*. */
export type CliPresetOptions = {
  command?: string;
  model?: string;
  /** Absolute. cursor without one extracts it from the task and earlier steps' meta. */
  workspace?: string;
  timeout?: number;
  env?: { [name: string]: string };
};
export declare function cursorAdapter(options?: CliPresetOptions): AdapterFn;
export declare function hermesAdapter(options?: CliPresetOptions): AdapterFn;
/** A command whose stdout is the role's meta as JSON. */
export declare function execAdapter(options: {
  command: string;
  args?: string[];
  workspace?: string;
  timeout?: number;
  env?: { [name: string]: string };
}): AdapterFn;
/**
 * A person answers: the role's prompt is the question and its schema the
 * form of the answer. The thread waits (status "waiting") until someone
 * answers from the dashboard, the API or `thread answer`. When the timeout
 * ("24h", or milliseconds) passes, the thread takes the role's FALLBACK
 * transition with meta { timedOut: true }, or fails without one.
 */
export declare function humanAdapter(options?: { assignee?: string; timeout?: number | string }): AdapterFn;

/** An agent function returns text; createAgentAdapter stores it and extracts the meta. */
export type AgentFn<Opt> = (ctx: ThreadContext, options: Opt) => Promise<string>;
export declare function createAgentAdapter<Opt>(
  agentFn: AgentFn<Opt>,
  optionsFn: (ctx: ThreadContext, prompt: string, runtime: WorkflowRuntime) => Promise<Opt>,
): AdapterFn;
