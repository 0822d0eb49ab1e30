import { useEffect, useState } from "react";

// Hash routes:
//   #/                               all machines' threads (the landing page)
//   #/threads                        the same
//   #/audit                          the gateway's audit log
//   #/m/<machine>[/threads]          threads of a machine
//   #/m/<machine>/threads/<id>       thread detail (live)
//   #/m/<machine>/workflows[/<name>] workflows, one workflow's graph
//   #/m/<machine>/cas/<hash>         a CAS node
export type Route =
  | { view: "home" }
  | { view: "all" }
  | { view: "audit" }
  | { view: "threads"; machine: string }
  | { view: "thread"; machine: string; id: string }
  | { view: "workflows"; machine: string }
  | { view: "workflow"; machine: string; name: string }
  | { view: "cas"; machine: string; hash: string }
  | { view: "notfound"; path: string };

export function parseHash(hash: string): Route {
  const path = hash.replace(/^#/, "");
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
  if (parts[0] !== "m" || !parts[1]) return { view: "notfound", path };
  const machine = parts[1];
  const [section, arg] = [parts[2], parts[3]];
  if (parts.length > 4) return { view: "notfound", path };
  if (!section || (section === "threads" && !arg)) return { view: "threads", machine };
  if (section === "threads") return { view: "thread", machine, id: arg };
  if (section === "workflows") return arg ? { view: "workflow", machine, name: arg } : { view: "workflows", machine };
  if (section === "cas" && arg) return { view: "cas", machine, hash: arg };
  return { view: "notfound", path };
}

const e = encodeURIComponent;
export const href = {
  home: () => "#/",
  all: () => "#/threads",
  audit: () => "#/audit",
  threads: (m: string) => `#/m/${e(m)}/threads`,
  thread: (m: string, id: string) => `#/m/${e(m)}/threads/${e(id)}`,
  workflows: (m: string) => `#/m/${e(m)}/workflows`,
  workflow: (m: string, name: string) => `#/m/${e(m)}/workflows/${e(name)}`,
  cas: (m: string, hash: string) => `#/m/${e(m)}/cas/${e(hash)}`,
};

export function useRoute(): Route {
  const [route, setRoute] = useState(() => parseHash(window.location.hash));
  useEffect(() => {
    const on = () => setRoute(parseHash(window.location.hash));
    window.addEventListener("hashchange", on);
    return () => window.removeEventListener("hashchange", on);
  }, []);
  return route;
}

export const navigate = (h: string) => {
  window.location.hash = h;
};
