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

/** FakeEventSource stands in for the browser's EventSource, which jsdom lacks. */
export class FakeEventSource {
  static CLOSED = 2;
  readyState = 1;
  onopen: (() => void) | null = null;
  onerror: (() => void) | null = null;
  constructor(public url: string) {}
  addEventListener() {}
  close() {
    this.readyState = 2;
  }
}
