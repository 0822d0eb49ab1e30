import { describe, expect, it } from "vitest";
import { href, parseHash } from "./route";
import { casParts } from "./views";

describe("hash routes", () => {
  it("parses every view and round-trips href", () => {
    expect(parseHash("")).toEqual({ view: "home" });
    expect(parseHash(href.all())).toEqual({ view: "all" });
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

describe("casParts", () => {
  it("reads the type and the refs", () => {
    const c = 'type: "step"\npayload:\n  role: coder\n  note: see 0123456789ABC\nrefs:\n  - ABCDEFGHJKMNP\n  - QRSTVWXYZ0123\n';
    expect(casParts(c)).toEqual({ type: "step", payload: "role: coder\nnote: see 0123456789ABC", refs: ["ABCDEFGHJKMNP", "QRSTVWXYZ0123"] });
    expect(casParts("type: text\npayload: hi\nrefs: []\n")).toEqual({ type: "text", payload: "hi", refs: [] });
    expect(casParts("nothing")).toEqual({ type: null, payload: null, refs: [] });
  });
});
