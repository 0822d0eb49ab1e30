// Test support: a fetch stand-in answering by URL, and the calls it saw.
import { vi } from "vitest";

/** json is a JSON response. */
export const json = (status: number, body: unknown) => new Response(JSON.stringify(body), { status, headers: { "Content-Type": "application/json" } });

/**
 * stubFetch answers each request with the first route whose prefix the URL
 * starts with (a function gets the URL and the method), else 404; it
 * returns the mock, whose calls are the URLs asked.
 */
export function stubFetch(routes: [string, (url: string, method: string) => Response | Promise<Response>][]) {
  const f = vi.fn(async (url: string, init?: RequestInit) => {
    for (const [prefix, answer] of routes) if (url.startsWith(prefix)) return answer(url, init?.method ?? "GET");
    return json(404, { error: "unexpected " + url });
  });
  vi.stubGlobal("fetch", f);
  return f;
}

/** urls are the URLs fetched so far. */
export const urls = (f: ReturnType<typeof stubFetch>) => f.mock.calls.map((c) => String(c[0]));

/** params are the query parameters of the last URL fetched that starts with prefix. */
export function params(f: ReturnType<typeof stubFetch>, prefix: string): Record<string, string> {
  const u = urls(f).filter((x) => x.startsWith(prefix)).pop();
  if (!u) return {};
  return Object.fromEntries(new URL(u, "http://x").searchParams);
}

/**
 * FakeEventSource stands in for the browser's EventSource, which jsdom
 * lacks. It keeps every instance (all: a test that reads it empties it
 * first); a test sends its events (emit) and failures (fail).
 */
export class FakeEventSource {
  static all: FakeEventSource[] = [];
  static CLOSED = 2;
  readyState = 1;
  onopen: (() => void) | null = null;
  onerror: ((e?: Event) => void) | null = null;
  onmessage: ((e: MessageEvent) => void) | null = null;
  listeners: Record<string, ((e: MessageEvent) => void)[]> = {};
  constructor(public url: string, public init?: EventSourceInit) {
    FakeEventSource.all.push(this);
  }
  addEventListener(type: string, fn: (e: MessageEvent) => void) {
    (this.listeners[type] ??= []).push(fn);
  }
  close() {
    this.readyState = 2;
  }
  /** emit sends an event: type is its event name ("message" for none), data its JSON. */
  emit(type: string, data: unknown) {
    const e = new MessageEvent(type, { data: JSON.stringify(data) });
    this.listeners[type]?.forEach((fn) => fn(e));
    if (type === "message") this.onmessage?.(e);
  }
  /** fail is the stream failing: closed, as the browser gives up after an error status; else it reconnects by itself. */
  fail(closed: boolean, e: Event = new Event("error")) {
    this.readyState = closed ? 2 : 0;
    this.onerror?.(e);
  }
  /** opened are the streams opened to url, the first one first. */
  static opened(url: string): FakeEventSource[] {
    return FakeEventSource.all.filter((s) => s.url === url);
  }
}
