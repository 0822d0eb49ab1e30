import { describe, expect, it } from "vitest";
import { hashQuery, href, parseHash } from "./route";

describe("hash routes", () => {
  it("parses every view and round-trips href", () => {
    expect(parseHash("")).toEqual({ view: "home" });
    expect(parseHash(href.all())).toEqual({ view: "all" });
    expect(parseHash(href.audit())).toEqual({ view: "audit" });
    expect(parseHash(href.inbox())).toEqual({ view: "inbox" });
    expect(parseHash("#/inbox?assignee=bob&offset=50")).toEqual({ view: "inbox" });
    expect(parseHash(href.notifications())).toEqual({ view: "notifications" });
    expect(parseHash("#/inbox/x").view).toBe("notfound");
    expect(parseHash(href.triggers())).toEqual({ view: "triggers" });
    expect(parseHash("#/triggers?trigger=tr_1")).toEqual({ view: "triggers" });
    expect(parseHash("#/triggers/tr_1").view).toBe("notfound");
    expect(parseHash("#/threads?q=fix+bug&machine=m")).toEqual({ view: "all" });
    expect(parseHash("#/?q=x")).toEqual({ view: "home" });
    expect(hashQuery("#/threads?q=fix+bug&offset=50").get("q")).toBe("fix bug");
    expect(hashQuery("#/threads").toString()).toBe("");
    expect(parseHash("#/threads/x").view).toBe("notfound");
    expect(parseHash("#/m/laptop")).toEqual({ view: "threads", machine: "laptop" });
    expect(parseHash(href.thread("ci box", "01ABC"))).toEqual({ view: "thread", machine: "ci box", id: "01ABC" });
    expect(parseHash(href.workflow("m", "plan-code-review"))).toEqual({ view: "workflow", machine: "m", name: "plan-code-review" });
    expect(parseHash(href.workflows("m"))).toEqual({ view: "workflows", machine: "m" });
    expect(parseHash(href.cas("m", "ABCDEFGHJKMNP"))).toEqual({ view: "cas", machine: "m", hash: "ABCDEFGHJKMNP" });
    expect(parseHash("#/x/y").view).toBe("notfound");
    expect(parseHash("#/m/a/cas").view).toBe("notfound");
  });
});
