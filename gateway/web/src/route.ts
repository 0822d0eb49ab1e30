import { useEffect, useRef, useState } from "react";

// Hash routes:
//   #/                               all machines' threads (the landing page)
//   #/threads[?q=&machine=&...]      the same, with a search (see FleetThreads)
//   #/audit                          the gateway's audit log
//   #/notifications[?state=&offset=] the webhook notifications it sent (see DeliveriesView)
//   #/inbox[?assignee=&offset=]      every thread waiting for a person's answer (see InboxView)
//   #/triggers[?trigger=<id>]        the webhooks and schedules that start threads, one's runs open (see TriggersView)
//   #/fleet[?by=workflow&days=30]    the fleet at a glance (see FleetGlance)
//   #/m/<machine>[/threads]          threads of a machine
//   #/m/<machine>/threads/<id>       thread detail (live)
//   #/m/<machine>/workflows[/<name>] workflows, one workflow's graph
//   #/m/<machine>/workflows/<name>?version=<hash>  one version of it
//   #/m/<machine>/cas/<hash>         a CAS node
//   #/m/<machine>/bundles/<hash>     a workflow bundle: its source and roles
export type Route =
  | { view: "home" }
  | { view: "all" }
  | { view: "audit" }
  | { view: "notifications" }
  | { view: "inbox" }
  | { view: "triggers" }
  | { view: "fleet" }
  | { view: "threads"; machine: string }
  | { view: "thread"; machine: string; id: string }
  | { view: "workflows"; machine: string }
  | { view: "workflow"; machine: string; name: string }
  | { view: "cas"; machine: string; hash: string }
  | { view: "bundle"; machine: string; hash: string }
  | { view: "notfound"; path: string };

export function parseHash(hash: string): Route {
  // A query (#/threads?q=...) is a view's own state: not part of the route.
  const path = hash.replace(/^#/, "").split("?")[0];
  const parts = path.split("/").filter(Boolean).map((p) => {
    try {
      return decodeURIComponent(p);
    } catch {
      return p;
    }
  });
  if (parts.length === 0) return { view: "home" };
  if (parts.length === 1 && parts[0] === "threads") return { view: "all" };
  if (parts.length === 1 && parts[0] === "audit") return { view: "audit" };
  if (parts.length === 1 && parts[0] === "notifications") return { view: "notifications" };
  if (parts.length === 1 && parts[0] === "inbox") return { view: "inbox" };
  if (parts.length === 1 && parts[0] === "triggers") return { view: "triggers" };
  if (parts.length === 1 && parts[0] === "fleet") return { view: "fleet" };
  if (parts[0] !== "m" || !parts[1]) return { view: "notfound", path };
  const machine = parts[1];
  const [section, arg] = [parts[2], parts[3]];
  if (parts.length > 4) return { view: "notfound", path };
  if (!section || (section === "threads" && !arg)) return { view: "threads", machine };
  if (section === "threads") return { view: "thread", machine, id: arg };
  if (section === "workflows") return arg ? { view: "workflow", machine, name: arg } : { view: "workflows", machine };
  if (section === "cas" && arg) return { view: "cas", machine, hash: arg };
  if (section === "bundles" && arg) return { view: "bundle", machine, hash: arg };
  return { view: "notfound", path };
}

const e = encodeURIComponent;
export const href = {
  home: () => "#/",
  all: () => "#/threads",
  audit: () => "#/audit",
  notifications: () => "#/notifications",
  inbox: () => "#/inbox",
  triggers: () => "#/triggers",
  fleet: () => "#/fleet",
  threads: (m: string) => `#/m/${e(m)}/threads`,
  thread: (m: string, id: string) => `#/m/${e(m)}/threads/${e(id)}`,
  workflows: (m: string) => `#/m/${e(m)}/workflows`,
  workflow: (m: string, name: string) => `#/m/${e(m)}/workflows/${e(name)}`,
  workflowVersion: (m: string, name: string, hash: string) => `#/m/${e(m)}/workflows/${e(name)}?version=${e(hash)}`,
  cas: (m: string, hash: string) => `#/m/${e(m)}/cas/${e(hash)}`,
  bundle: (m: string, hash: string) => `#/m/${e(m)}/bundles/${e(hash)}`,
};

/** hashQuery is the query of the current hash (#/threads?q=x → q=x). */
export function hashQuery(hash = window.location.hash): URLSearchParams {
  const i = hash.indexOf("?");
  return new URLSearchParams(i < 0 ? "" : hash.slice(i + 1));
}

/**
 * replaceQuery keeps a view's state in the hash's query without a new
 * history entry (and without a hashchange), so Back from a page it links
 * to comes back to the same state.
 */
export function replaceQuery(q: URLSearchParams) {
  const path = window.location.hash.replace(/^#/, "").split("?")[0] || "/";
  const s = q.toString();
  window.history.replaceState(window.history.state, "", `#${path}${s ? `?${s}` : ""}`);
}

/**
 * useHashChange calls on whenever the address's hash changes after the
 * component first rendered. A view reads the hash as it first renders and
 * starts listening only once its effects run, a moment later: a change in
 * between (a link followed, an address typed, the page told to go there
 * just as it appears) fires no event the view hears, and the view would
 * show the old address for good. So the hash is compared once listening
 * starts, and on called if it moved meanwhile. on must only read the hash
 * and set state.
 */
export function useHashChange(on: () => void) {
  const rendered = useRef(window.location.hash);
  const latest = useRef(on);
  latest.current = on;
  useEffect(() => {
    const changed = () => latest.current();
    window.addEventListener("hashchange", changed);
    if (window.location.hash !== rendered.current) changed();
    return () => window.removeEventListener("hashchange", changed);
  }, []);
}

export function useRoute(): Route {
  const [route, setRoute] = useState(() => parseHash(window.location.hash));
  useHashChange(() => setRoute(parseHash(window.location.hash)));
  return route;
}

export const navigate = (h: string) => {
  window.location.hash = h;
};
