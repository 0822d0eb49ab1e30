// The data layer: every request the dashboard makes goes through here.
// Same-origin; the token is kept in localStorage and sent as a Bearer
// header, and POST /api/gateway/login sets the HttpOnly cookie the
// EventSource streams need. A 401 anywhere drops the token and shows the
// login page.
import { useCallback, useEffect, useReducer, useRef, useState } from "react";
import { answered, check, onReach, reach, setProbe, unanswered } from "./reach";
import { ChangeEvent, ChangeTopic, subscribeChanges, usePushes } from "./changes";

export const TOKEN_KEY = "uncaged.dashboard.token";

export type Endpoint = {
  name: string;
  url?: string;
  status: "online" | "offline";
  lastHeartbeat?: number;
  connectedAt?: number;
  version?: string;
  address?: string;
  protocol?: string;
};
export type WorkflowSummary = { name: string; hash: string; timestamp: number };
export type Edge = { from: string; to: string; condition: string; conditionDescription?: string | null };
export type RoleInfo = { description?: string; systemPrompt?: string; schema?: unknown };
export type Descriptor = { description?: string; roles: Record<string, RoleInfo>; graph: { edges: Edge[] } };
/**
 * RoleAgent is the agent a YAML workflow's role runs (its type, the named
 * agent it refers to, the model, the program or the workflow it runs).
 */
export type RoleAgent = { type: string; name?: string; model?: string; command?: string; workflow?: string };
/**
 * RoleAgents are each role's agent: an object for a YAML workflow, null for
 * a JavaScript bundle (its code picks the agents); a connector that does not
 * say sends neither.
 */
export type RoleAgents = Record<string, RoleAgent> | null;
export type WorkflowDetail = {
  name: string;
  hash: string;
  timestamp: number;
  history: { hash: string; timestamp: number }[];
  descriptor: Descriptor | null;
  roleAgents?: RoleAgents;
};
/** WorkflowVersion is one version of a workflow, current or older, with its own descriptor. */
export type WorkflowVersion = { name: string; hash: string; timestamp: number; current: boolean; descriptor: Descriptor | null; roleAgents?: RoleAgents };
// "pausing": a pause was asked for while a role runs; the thread is
// "paused" once that role has finished. "waiting": it reached a role a
// person plays and waits for that person's answer. "damaged": its head or
// start cannot back a status (doctor says why).
export type ThreadStatus = "running" | "waiting" | "pausing" | "paused" | "completed" | "failed" | "killed" | "interrupted" | "damaged";
export type ThreadSummary = {
  threadId: string;
  workflow: string | null;
  hash: string;
  startedAt: string;
  updatedAt: string;
  status: ThreadStatus;
  source: string;
  /** the prompt, as the fleet list shows it (null: none); absent from an older connector */
  prompt?: string | null;
  /** the thread's model usage; absent when none, or from an older connector */
  usage?: unknown;
};
export type StartRecord = {
  type: "thread-start";
  threadId: string;
  workflow: string;
  prompt: string | null;
  status: ThreadStatus;
  startedAt: string;
  timestamp: number;
  bundleHash: string;
  head: string;
  start: string;
  source: string;
};
export type RoleRecord = {
  type: "role";
  role: string;
  contentHash: string;
  content: string;
  meta: unknown;
  timestamp: number;
  stateHash: string;
  childThread: string | null;
};
export type ResultRecord = { type: "workflow-result"; returnCode: number; content: string; timestamp: number; stateHash?: string };
export type ThreadRecord = StartRecord | RoleRecord | ResultRecord;

/**
 * GatewayMachine is a machine as the gateway remembers it
 * (GET /api/gateway/machines): every one it ever saw, online or not.
 */
export type GatewayMachine = { name: string; online: boolean; firstSeen?: string; lastSeen?: string };
/**
 * FleetThread is a thread's last-known summary from the gateway's memory
 * (GET /api/gateway/threads), kept after its machine goes offline.
 */
export type FleetThread = {
  machine: string;
  threadId: string;
  workflow: string | null;
  status: ThreadStatus;
  prompt?: string;
  startedAt: string;
  updatedAt: string;
  durationMs?: number;
  steps?: number;
  returnCode?: number | null;
  summary?: string;
  usage?: unknown;
  /** the thread's model usage as the gateway indexes it: 0 when none or unknown */
  tokens?: number;
  cost?: number;
  online?: boolean;
  lastSeen?: string;
  /** what the thread waits for, while its status is waiting (absent otherwise, and from an older gateway) */
  waiting?: Waiting;
};
/**
 * Waiting is what a waiting thread asks, as the fleet's change stream
 * carries it: the role a person plays, the question (cut short), who is
 * asked ("" when anyone may answer), since when, and until when.
 */
export type Waiting = { role: string; question: string; assignee: string; since: string; deadline?: string | null };
/**
 * InboxThread is one thread waiting for a person (GET /api/gateway/inbox),
 * kept by the gateway after its machine goes offline (online: false).
 */
export type InboxThread = {
  machine: string;
  online: boolean;
  threadId: string;
  workflow: string;
  role: string;
  question: string;
  assignee: string;
  since: string;
  deadline: string | null;
};
export type InboxQuery = { assignee?: string; limit: number; offset: number };
/**
 * JsonSchema is the part of a JSON Schema the answer form reads; anything
 * else in it is the connector's to check.
 */
export type JsonSchema = {
  type?: string | string[];
  title?: string;
  description?: string;
  properties?: Record<string, JsonSchema>;
  required?: string[];
  enum?: unknown[];
  const?: unknown;
  oneOf?: JsonSchema[];
  anyOf?: JsonSchema[];
  default?: unknown;
  format?: string;
  maxLength?: number;
  minimum?: number;
  maximum?: number;
  [k: string]: unknown;
};
/**
 * Question is what a waiting thread asks (GET .../threads/:id/question):
 * the question (Markdown), the answer's form as a JSON Schema, and, once
 * someone answered, who and when.
 */
export type Question = {
  threadId: string;
  workflow: string;
  role: string;
  question: string;
  schema: JsonSchema;
  assignee: string;
  askedAt: string;
  deadline: string | null;
  questionHash: string;
  answered: boolean;
  answer?: unknown;
  answeredBy?: string;
  answeredAt?: string | null;
};
/** Answered is the connector's word that an answer was taken: by whom, when. */
export type Answered = { threadId: string; answeredBy: string; answeredAt: string };
/** FieldFault is one field an answer got wrong: its JSON Pointer ("" the whole answer) and why. */
export type FieldFault = { path: string; message: string };
/**
 * Delivery is one webhook notification (GET /api/gateway/notifications):
 * the thread it is about, the receiver (scheme and host only), and how its
 * sending went.
 */
export type Delivery = {
  id: number;
  receiver: string;
  machine: string;
  thread: string;
  workflow: string;
  status: string;
  updatedAt: string;
  state: "pending" | "delivered" | "failed";
  attempts: number;
  lastCode?: number;
  lastError?: string;
  createdAt: string;
  nextAt?: string;
  finishedAt?: string;
};
export type DeliveryQuery = { state?: string; machine?: string; limit: number; offset: number };
/**
 * TriggerRunState is where a trigger's run is: queued (its machine is
 * offline, or its turn has not come), sending, started (a thread), or
 * ended without one: expired (its machine did not come back in time) or
 * failed (the machine refused it).
 */
export type TriggerRunState = "queued" | "sending" | "started" | "expired" | "failed";
/** TRIGGER_RUN_STATES are a run's states, in the order a run goes through them. */
export const TRIGGER_RUN_STATES: TriggerRunState[] = ["queued", "sending", "started", "expired", "failed"];
/** TriggerRun is one firing of a trigger (a webhook delivery, a scheduled time). */
export type TriggerRun = {
  id: string;
  trigger: string;
  machine: string;
  workflow: string;
  state: TriggerRunState;
  /** the thread it started, once started */
  threadId?: string;
  /** why it expired or failed */
  error?: string;
  /** the webhook delivery's id, or "schedule:<time>" */
  deliveryId?: string;
  /** the time a schedule's run was for */
  scheduledFor?: string;
  attempts: number;
  createdAt: string;
  updatedAt: string;
  /** when a queued run gives up waiting for its machine */
  expiresAt: string;
};
/**
 * Trigger is a webhook or a cron schedule that starts threads of a workflow
 * on a machine (GET /api/gateway/triggers): never its secret, which only
 * the answer that created it holds.
 */
export type Trigger = {
  id: string;
  kind: "webhook" | "schedule";
  machine: string;
  workflow: string;
  /** the prompt's template ("" or absent: the delivery's body, a schedule's details as JSON) */
  prompt?: string;
  note?: string;
  /** where a webhook is delivered */
  url?: string;
  /** a schedule's cron expression, read in timezone (absent: UTC) */
  schedule?: string;
  timezone?: string;
  /** what a schedule does with a time missed while no gateway ran */
  missed?: "run-once" | "skip";
  /** a schedule's next time, unless paused */
  nextAt?: string;
  lastFired?: string;
  /** how long a run waits for an offline machine, as a Go duration ("24h0m0s") */
  expire: string;
  paused: boolean;
  createdAt: string;
  createdBy?: string;
  /** while a webhook's rotated-out secret is still accepted beside its new one, until when */
  previousSecretUntil?: string;
  /** the most recent runs, newest first */
  runs?: TriggerRun[];
};
/**
 * TriggerSpec is what POST /api/gateway/triggers takes: webhook or a
 * schedule; timezone and missed are a schedule's only; expire is a Go
 * duration ("24h").
 */
export type TriggerSpec = {
  machine: string;
  workflow: string;
  webhook?: true;
  schedule?: string;
  timezone?: string;
  missed?: "run-once" | "skip";
  prompt?: string;
  note?: string;
  expire?: string;
};
/** CreatedTrigger is the answer to a trigger's creation: a webhook's URL and secret, the secret never shown again. */
export type CreatedTrigger = { trigger: Trigger; url?: string; secret?: string };
export type TriggerRunQuery = { state?: string; limit: number; offset: number };
/** FleetQuery is a search over every machine's threads; empty fields do not filter. */
export type FleetQuery = { machine?: string; workflow?: string; status?: string; q?: string; since?: string; until?: string; limit: number; offset: number };
/** AuditEntry is one line of the gateway's audit log: who did what, never a credential. */
export type AuditEntry = { id: number; time: string; tokenId?: string; actor?: string; source?: string; action: string; machine?: string; target?: string; status: number };
export type AuditQuery = { action?: string; machine?: string; since?: string; until?: string; limit: number; offset: number };
/**
 * ThreadPage is a machine's thread list. A gateway answers it from its
 * memory while the machine is offline, and then says so (offline, lastSeen).
 */
export type ThreadPage = { threads: ThreadSummary[]; total: number; offline?: boolean; lastSeen?: string };

/**
 * ApiError is a refused or failed request: the HTTP status, the server's
 * message, and its machine-readable reason when it gave one (expired,
 * revoked, wrong-kind, offline, ...).
 */
export class ApiError extends Error {
  constructor(public status: number, message: string, public reason?: string, public body?: Record<string, unknown>) {
    super(message);
  }
}

/**
 * noMemory tells whether an error says the gateway keeps no memory: an older
 * gateway without the route (404), or one started without a store (503
 * "... keeps nothing").
 */
export function noMemory(e: unknown): boolean {
  if (!(e instanceof ApiError)) return false;
  return e.status === 404 || e.status === 501 || (e.status === 503 && /keeps nothing|no store/i.test(e.message));
}

/**
 * UNREACHABLE is the reason of an ApiError for a request the gateway did not
 * answer: no connection, or a proxy in front of it saying it is down.
 */
export const UNREACHABLE = "unreachable";

/** isUnreachable tells whether an error says the gateway itself did not answer. */
export function isUnreachable(e: unknown): boolean {
  return e instanceof ApiError && e.reason === UNREACHABLE;
}

/** isOffline tells whether an error says the machine is offline (503, reason or message). */
export function isOffline(e: unknown): boolean {
  if (!(e instanceof ApiError)) return false;
  return e.reason === "offline" || (e.status === 503 && /offline/i.test(e.message));
}

// --- token and 401 handling ------------------------------------------------

/** Listener hears of a 401: the refusal, so the login page can say why. */
type Listener = (refusal: ApiError) => void;
const unauthorized = new Set<Listener>();

export function getToken(): string | null {
  try {
    return localStorage.getItem(TOKEN_KEY);
  } catch {
    return null;
  }
}
export function setToken(token: string | null) {
  try {
    if (token) localStorage.setItem(TOKEN_KEY, token);
    else localStorage.removeItem(TOKEN_KEY);
  } catch {
    /* storage unavailable: keep going with the cookie */
  }
}
/**
 * takeTokenFromLink consumes a one-click login link, <dashboard>/#token=<token>
 * (what `make demo` prints): the token is stored as the login form stores
 * one, and the fragment is removed from the address bar with
 * history.replaceState, so the token is neither bookmarked nor left in the
 * history. A fragment never reaches the server, nor its logs. Call it once,
 * before the app reads the token or routes on the hash; it returns whether
 * the link carried a token (the app then checks it as any stored token).
 */
export function takeTokenFromLink(): boolean {
  const m = /^#token=(.*)$/.exec(window.location.hash);
  if (!m) return false;
  let token = "";
  try {
    token = decodeURIComponent(m[1]).trim();
  } catch {
    /* malformed percent-encoding: no token, but the fragment still goes */
  }
  const { pathname, search } = window.location;
  window.history.replaceState(window.history.state, "", pathname + search);
  if (!token) return false;
  setToken(token);
  return true;
}
/** onUnauthorized registers a callback for any 401; it returns the unsubscriber. */
export function onUnauthorized(fn: Listener): () => void {
  unauthorized.add(fn);
  return () => unauthorized.delete(fn);
}

/** endSession drops the token and tells every listener why, so the login page can say it. */
export function endSession(refusal: ApiError) {
  setToken(null);
  unauthorized.forEach((fn) => fn(refusal));
}

/**
 * credentialEnded reads the gateway's last event on a stream whose
 * credential was revoked or expired while it was open: an SSE "error" event
 * whose data is the refusal, {"error": "...", "reason": "..."}. The browser's
 * own error events (a dropped connection) carry no data and give null.
 */
export function credentialEnded(ev: Event | undefined): ApiError | null {
  if (!(ev instanceof MessageEvent) || typeof ev.data !== "string" || !ev.data) return null;
  try {
    const body = JSON.parse(ev.data) as { error?: unknown; reason?: unknown };
    if (typeof body?.reason !== "string" || typeof body.error !== "string") return null;
    return new ApiError(401, body.error, body.reason, body as Record<string, unknown>);
  } catch {
    return null;
  }
}

/** api fetches a JSON endpoint with the token; errors become ApiError. */
export async function api<T>(path: string, init: { method?: string; body?: unknown; signal?: AbortSignal } = {}): Promise<T> {
  const headers: Record<string, string> = { Accept: "application/json" };
  const token = getToken();
  if (token) headers.Authorization = `Bearer ${token}`;
  let body: string | undefined;
  if (init.body !== undefined) {
    headers["Content-Type"] = "application/json";
    body = JSON.stringify(init.body);
  }
  let res: Response;
  try {
    res = await fetch(path, { method: init.method ?? "GET", headers, body, credentials: "same-origin", signal: init.signal });
  } catch (e) {
    if ((e as Error).name === "AbortError") throw e;
    unanswered();
    throw new ApiError(0, `the gateway does not answer (${(e as Error).message})`, UNREACHABLE);
  }
  let text: string;
  try {
    text = await res.text();
  } catch (e) {
    if ((e as Error).name === "AbortError") throw e;
    unanswered();
    throw new ApiError(0, `the gateway's answer was cut off (${(e as Error).message})`, UNREACHABLE);
  }
  let data: unknown = undefined;
  if (text) {
    try {
      data = JSON.parse(text);
    } catch {
      data = undefined;
    }
  }
  // The gateway answers every error in JSON; a bare 502-504 is a proxy in
  // front of it saying it is down.
  if ((res.status === 502 || res.status === 503 || res.status === 504) && (!data || typeof data !== "object")) {
    unanswered();
    throw new ApiError(res.status, `the gateway does not answer (HTTP ${res.status} from the proxy in front of it)`, UNREACHABLE);
  }
  answered();
  if (!res.ok) {
    const body = data as { error?: unknown; reason?: unknown } | undefined;
    const msg = typeof body?.error === "string" ? body.error : text.slice(0, 200) || res.statusText || `HTTP ${res.status}`;
    const err = new ApiError(res.status, msg, typeof body?.reason === "string" ? body.reason : undefined, body && typeof body === "object" ? (body as Record<string, unknown>) : undefined);
    if (res.status === 401) endSession(err);
    throw err;
  }
  return data as T;
}

const seg = encodeURIComponent;
export const clientPath = (machine: string, rest: string) => `/api/clients/${seg(machine)}${rest}`;

/** query makes a query string of the fields that are set. */
function query(q: Record<string, string | number | undefined>): string {
  const p = new URLSearchParams();
  for (const [k, v] of Object.entries(q)) if (v !== undefined && v !== "") p.set(k, String(v));
  return p.toString();
}

export const gateway = {
  endpoints: () => api<Endpoint[]>("/api/gateway/endpoints"),
  /**
   * machines: every machine the gateway remembers (404 from a gateway that keeps none);
   * degraded says why the list may be short (its store does not answer: the machines
   * online now, the others as it last read them).
   */
  machines: () => api<{ machines: GatewayMachine[]; degraded?: string }>("/api/gateway/machines"),
  /** threads searches every machine's threads, online or not, newest first. */
  threads: (q: FleetQuery) => api<{ threads: FleetThread[]; total: number; totalCapped?: boolean }>(`/api/gateway/threads?${query(q)}`),
  /** audit pages the audit log, newest first. */
  audit: (q: AuditQuery) => api<{ entries: AuditEntry[]; total: number }>(`/api/gateway/audit?${query(q)}`),
  /** inbox lists the threads waiting for a person, on every machine, oldest wait first. */
  inbox: (q: InboxQuery) => api<{ threads: InboxThread[]; total: number }>(`/api/gateway/inbox?${query(q)}`),
  /** notifications pages the webhook notifications, newest first; enabled: receivers are configured. */
  notifications: (q: DeliveryQuery) => api<{ notifications: Delivery[]; total: number; enabled: boolean }>(`/api/gateway/notifications?${query(q)}`),
  /** triggers lists the webhooks and schedules that start threads, oldest first, each with its recent runs. */
  triggers: () => api<{ triggers: Trigger[] }>("/api/gateway/triggers"),
  /** triggerRuns pages one trigger's runs, newest first. */
  triggerRuns: (id: string, q: TriggerRunQuery) => api<{ runs: TriggerRun[]; total: number }>(`/api/gateway/triggers/${seg(id)}/runs?${query(q)}`),
  /** createTrigger makes a trigger; a webhook's secret is in this answer only. */
  createTrigger: (spec: TriggerSpec) => api<CreatedTrigger>("/api/gateway/triggers", { method: "POST", body: spec }),
  /** pauseTrigger stops a trigger firing (paused) or starts it again; its queued runs wait meanwhile. */
  pauseTrigger: (id: string, paused: boolean) => api<{ trigger: Trigger }>(`/api/gateway/triggers/${seg(id)}/${paused ? "pause" : "resume"}`, { method: "POST" }),
  /**
   * rotateSecret gives a webhook a new secret, in this answer only;
   * keepPrevious (a Go duration, "0s" for none) is how long the old one is
   * still accepted.
   */
  rotateSecret: (id: string, keepPrevious: string) =>
    api<{ trigger: Trigger; secret: string }>(`/api/gateway/triggers/${seg(id)}/secret`, { method: "POST", body: { keepPrevious } }),
  /** removeTrigger removes a trigger and its runs. */
  removeTrigger: (id: string) => api<{ removed: string }>(`/api/gateway/triggers/${seg(id)}`, { method: "DELETE" }),
  async login(token: string) {
    setToken(token);
    try {
      await api<unknown>("/api/gateway/login", { method: "POST", body: { token } });
      await api<Endpoint[]>("/api/gateway/endpoints");
    } catch (e) {
      setToken(null);
      throw e;
    }
  },
  async logout() {
    try {
      await api<unknown>("/api/gateway/logout", { method: "POST" });
    } finally {
      setToken(null);
    }
  },
};

// While the gateway does not answer, this is what asks it again.
setProbe(() => gateway.endpoints());

export const machine = (m: string) => ({
  workflows: () => api<{ workflows: WorkflowSummary[] }>(clientPath(m, "/workflows")),
  workflow: (name: string) => api<WorkflowDetail>(clientPath(m, `/workflows/${seg(name)}`)),
  version: (name: string, hash: string) => api<WorkflowVersion>(clientPath(m, `/workflows/${seg(name)}/versions/${seg(hash)}`)),
  /** rollback makes an earlier version current (without a hash: the previous one). */
  rollback: (name: string, hash?: string) =>
    api<WorkflowSummary>(clientPath(m, `/workflows/${seg(name)}/rollback`), { method: "POST", body: hash ? { hash } : {} }),
  threads: (q: { limit: number; offset: number; status?: string; workflow?: string }) => {
    const p = new URLSearchParams({ limit: String(q.limit), offset: String(q.offset) });
    if (q.status) p.set("status", q.status);
    if (q.workflow) p.set("workflow", q.workflow);
    return api<ThreadPage>(clientPath(m, `/threads?${p}`));
  },
  thread: (id: string) => api<{ threadId: string; records: ThreadRecord[] }>(clientPath(m, `/threads/${seg(id)}`)),
  run: (workflow: string, prompt: string) => api<{ threadId: string }>(clientPath(m, "/threads"), { method: "POST", body: { workflow, prompt } }),
  /** question is what a waiting thread asks (404 when it waits for nothing). */
  question: (id: string) => api<Question>(clientPath(m, `/threads/${seg(id)}/question`)),
  /**
   * answer answers it; questionHash guards against answering a question
   * that was replaced meanwhile (409, as when someone else answered first).
   */
  answer: (id: string, answer: Record<string, unknown>, questionHash?: string) =>
    api<Answered>(clientPath(m, `/threads/${seg(id)}/answer`), { method: "POST", body: questionHash ? { answer, questionHash } : { answer } }),
  act: (id: string, verb: "kill" | "pause" | "resume") => api<{ ok: boolean }>(clientPath(m, `/threads/${seg(id)}/${verb}`), { method: "POST", body: {} }),
  fork: (id: string, fromRole?: string) =>
    api<{ threadId: string }>(clientPath(m, `/threads/${seg(id)}/fork`), { method: "POST", body: fromRole ? { fromRole } : {} }),
  cas: (hash: string) => api<{ hash: string; content: string }>(clientPath(m, `/cas/${seg(hash)}`)),
  livePath: (id: string) => clientPath(m, `/threads/${seg(id)}/live`),
});

/**
 * threadGraphSource is the descriptor of the workflow version a thread ran,
 * so its graph shows the roles it really went through; when that version is
 * gone from the machine's registry (or the connector predates the route),
 * the current version's, marked as a stand-in.
 */
export async function threadGraphSource(m: string, workflow: string, hash: string): Promise<{ descriptor: Descriptor | null; current: boolean }> {
  const api = machine(m);
  try {
    const v = await api.version(workflow, hash);
    return { descriptor: v.descriptor, current: false };
  } catch (e) {
    if (!(e instanceof ApiError) || e.status !== 404) throw e;
  }
  return { descriptor: (await api.workflow(workflow)).descriptor, current: true };
}

// --- hooks -------------------------------------------------------------------

export type Loadable<T> = { data: T | undefined; error: ApiError | Error | undefined; loading: boolean; reload: () => void };

/**
 * Push is a change hint a view reloads on (see changes.ts): a topic, and
 * for threads the machine whose threads it shows, for triggers the
 * trigger (absent: any).
 */
export type Push = { topic: ChangeTopic; machine?: string; trigger?: string };

/** hintMatches tells whether a hint concerns what push describes; a hint that names no machine or trigger may concern any. */
export function hintMatches(push: Push, e: ChangeEvent): boolean {
  if (e.topic !== push.topic) return false;
  if (push.machine && e.machine && e.machine !== push.machine) return false;
  if (push.trigger && e.trigger && e.trigger !== push.trigger) return false;
  return true;
}

/**
 * useApi runs load when deps change (and every pollMs when set), keeping the
 * last good data while a refresh runs so polling never flashes. With push,
 * it also loads again on a matching change hint and when the change stream
 * (re)opens; while that stream is up and pushes every topic in push, it
 * does not poll.
 */
export function useApi<T>(load: () => Promise<T>, deps: unknown[], pollMs?: number, push?: Push | Push[]): Loadable<T> {
  const [state, setState] = useState<{ data?: T; error?: Error; loading: boolean }>({ loading: true });
  const [tick, setTick] = useState(0);
  const reload = useCallback(() => setTick((t) => t + 1), []);
  // A burst of hints makes one load at a time: a hint while one runs asks for one more after it.
  const loading = useRef(false);
  const hinted = useRef(false);
  useEffect(() => {
    let live = true;
    loading.current = true;
    // This load starts after every hint so far: it answers them too.
    hinted.current = false;
    setState((s) => ({ ...s, loading: true }));
    const settled = () => {
      if (!live) return;
      loading.current = false;
      if (!hinted.current) return;
      hinted.current = false;
      reload();
    };
    load()
      .then(
        (data) => live && setState({ data, loading: false }),
        (error: Error) => live && setState((s) => ({ data: s.data, error, loading: false })),
      )
      .finally(settled);
    return () => {
      live = false;
    };
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [...deps, tick]);
  // Reset when the subject changes, so one machine's data never shows under another.
  const key = JSON.stringify(deps);
  const prevKey = useRef(key);
  if (prevKey.current !== key) {
    prevKey.current = key;
    setState({ loading: true });
  }
  const pushed = push === undefined ? [] : Array.isArray(push) ? push : [push];
  // Callers write push inline: its JSON keeps the subscription from changing every render.
  const pushKey = JSON.stringify(pushed);
  const covered = usePushes(pushed.map((p) => p.topic));
  useEffect(() => {
    const wanted: Push[] = JSON.parse(pushKey);
    if (wanted.length === 0) return;
    return subscribeChanges((e) => {
      if (e.topic !== "resync" && !wanted.some((p) => hintMatches(p, e))) return;
      if (loading.current) {
        hinted.current = true;
        return;
      }
      // Set now, not when the load starts: a second hint before React renders waits for it.
      loading.current = true;
      reload();
    });
  }, [pushKey, reload]);
  useEffect(() => {
    if (!pollMs || covered) return;
    const t = setInterval(reload, pollMs);
    return () => clearInterval(t);
  }, [pollMs, reload, covered]);
  // The gateway answers again: what the page shows is refreshed at once.
  useEffect(() => onReach(() => reach().reachable && reload()), [reload]);
  return { data: state.data, error: state.error, loading: state.loading, reload };
}

// --- the live stream -----------------------------------------------------------

export type LiveState = {
  records: ThreadRecord[];
  info: string[];
  /** how far into the debug log the info lines go (bytes; their event ids say), so a stream opened again does not repeat them */
  logOffset: number;
  done: string | null; // the reason, once "done" arrived
  connected: boolean;
  error: string | null;
};
export type LiveAction =
  | { type: "record"; id: string; record: ThreadRecord }
  | { type: "start"; record: ThreadRecord }
  | { type: "info"; line: string; id?: string }
  | { type: "done"; reason: string }
  | { type: "open" }
  | { type: "error"; message: string }
  | { type: "reset" };

/** OPEN_STREAM is EventSource.OPEN (what readyState is while a stream is up). */
const OPEN_STREAM = 1;

export const initialLive: LiveState = { records: [], info: [], logOffset: 0, done: null, connected: false, error: null };
const MAX_INFO = 500;

/**
 * liveReducer folds the SSE events into the thread's records. An event id is
 * "<records>:<logOffset>": the record's 1-based position, so a record sent
 * again after a reconnect replaces itself instead of being appended twice.
 */
export function liveReducer(s: LiveState, a: LiveAction): LiveState {
  switch (a.type) {
    case "record": {
      const n = parseInt(a.id.split(":")[0], 10);
      const records = s.records.slice();
      if (Number.isFinite(n) && n >= 1) {
        if (n - 1 > records.length) return { ...s, error: `missed records before #${n}` };
        records[n - 1] = a.record;
      } else {
        records.push(a.record);
      }
      return { ...s, records };
    }
    case "start": {
      // The thread-start record again, its head or status moved: it
      // replaces record 1 (none yet: it waits for the record event).
      if (s.records.length === 0 || a.record.type !== "thread-start") return s;
      const records = s.records.slice();
      records[0] = a.record;
      return { ...s, records };
    }
    case "info": {
      // The id is "<records>:<logOffset>", the offset just past this line:
      // a line at or before the offset reached came before (a new stream
      // replays the log from its start).
      const off = parseInt((a.id ?? "").split(":")[1] ?? "", 10);
      if (Number.isFinite(off) && off <= s.logOffset) return s;
      const info = s.info.length >= MAX_INFO ? s.info.slice(-MAX_INFO + 1) : s.info.slice();
      info.push(a.line);
      return { ...s, info, logOffset: Number.isFinite(off) ? off : s.logOffset };
    }
    case "done":
      return { ...s, done: a.reason, connected: false };
    case "open":
      return { ...s, connected: true, error: null };
    case "error":
      return { ...s, connected: false, error: a.message };
    case "reset":
      return initialLive;
  }
}

/**
 * useLive follows /live. The browser reconnects by itself (sending
 * Last-Event-ID); when it gives up (the stream answered an error status)
 * we open a new stream after a pause, which replays from the start and the
 * reducer de-duplicates. generation forces a fresh stream (after resume).
 */
export function useLive(url: string | null, generation = 0): LiveState {
  const [state, dispatch] = useReducer(liveReducer, initialLive);
  useEffect(() => {
    dispatch({ type: "reset" });
    if (!url) return;
    let es: EventSource | null = null;
    let retry: ReturnType<typeof setTimeout> | undefined;
    let stopped = false;
    let attempts = 0;
    const open = () => {
      es = new EventSource(url, { withCredentials: true });
      es.onopen = () => {
        attempts = 0;
        answered();
        dispatch({ type: "open" });
      };
      es.addEventListener("record", (ev) => {
        const e = ev as MessageEvent<string>;
        try {
          dispatch({ type: "record", id: e.lastEventId, record: JSON.parse(e.data) });
        } catch {
          /* a malformed event is skipped */
        }
      });
      es.addEventListener("start", (ev) => {
        try {
          dispatch({ type: "start", record: JSON.parse((ev as MessageEvent<string>).data) });
        } catch {
          /* a malformed event is skipped */
        }
      });
      es.addEventListener("info", (ev) => {
        const e = ev as MessageEvent<string>;
        let line = e.data;
        try {
          const v = JSON.parse(e.data);
          line = typeof v === "string" ? v : JSON.stringify(v);
        } catch {
          /* plain text */
        }
        dispatch({ type: "info", line, id: e.lastEventId });
      });
      es.addEventListener("done", (ev) => {
        let reason = "completed";
        try {
          reason = JSON.parse((ev as MessageEvent<string>).data).reason ?? reason;
        } catch {
          /* keep the default */
        }
        dispatch({ type: "done", reason });
        es?.close();
        stopped = true;
      });
      es.onerror = (ev?: Event) => {
        if (stopped || !es) return;
        const refusal = credentialEnded(ev);
        if (refusal) {
          // The token was revoked or expired: reconnecting would only be
          // refused, so the session ends here and the login page says why.
          stopped = true;
          es.close();
          dispatch({ type: "error", message: refusal.message });
          endSession(refusal);
          return;
        }
        // A stream fails when its machine goes away too: ask whether the
        // gateway itself still answers.
        check();
        if (es.readyState === EventSource.CLOSED) {
          dispatch({ type: "error", message: "live stream closed; reconnecting…" });
          attempts++;
          retry = setTimeout(open, Math.min(1000 * 2 ** attempts, 15000));
        } else {
          dispatch({ type: "error", message: "live stream interrupted; reconnecting…" });
        }
      };
    };
    open();
    // The gateway answers again: reconnect now rather than when the
    // browser's or our own back-off says.
    const off = onReach(() => {
      if (stopped || !reach().reachable || !es || es.readyState === OPEN_STREAM) return;
      clearTimeout(retry);
      es.close();
      open();
    });
    return () => {
      off();
      stopped = true;
      clearTimeout(retry);
      es?.close();
    };
  }, [url, generation]);
  return state;
}

// --- formatting ----------------------------------------------------------------

export function ago(ms: number | undefined, now = Date.now()): string {
  if (!ms) return "never";
  const s = Math.max(0, Math.round((now - ms) / 1000));
  if (s < 60) return `${s} s ago`;
  if (s < 3600) return `${Math.floor(s / 60)} min ago`;
  if (s < 86400) return `${Math.floor(s / 3600)} h ago`;
  return `${Math.floor(s / 86400)} d ago`;
}
export function duration(ms: number): string {
  if (!Number.isFinite(ms) || ms < 0) return "–";
  if (ms < 1000) return `${ms} ms`;
  const s = ms / 1000;
  if (s < 60) return `${s.toFixed(1)} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min ${Math.round(s % 60)} s`;
  return `${Math.floor(m / 60)} h ${m % 60} min`;
}
export const fmtTime = (t: string | number | undefined) => (t ? new Date(t).toLocaleString() : "–");
export const HASH_RE = /\b[0-9A-HJKMNP-TV-Z]{13}\b/g;
export const TERMINAL: ThreadStatus[] = ["completed", "failed", "killed"];

/**
 * until says how far off a deadline is, or by how much it passed
 * ("in 3 h", "2 min overdue").
 */
export function until(ms: number, now = Date.now()): string {
  const d = ms - now;
  const s = Math.round(Math.abs(d) / 1000);
  const span = s < 60 ? `${s} s` : s < 3600 ? `${Math.floor(s / 60)} min` : s < 86400 ? `${Math.floor(s / 3600)} h` : `${Math.floor(s / 86400)} d`;
  return d >= 0 ? `in ${span}` : `${span} overdue`;
}
