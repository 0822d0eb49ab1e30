import { describe, expect, it } from "vitest";
import { casParts } from "./casParts";

describe("casParts", () => {
  it("reads the type and the refs", () => {
    const c = 'type: "step"\npayload:\n  role: coder\n  note: see 0123456789ABC\nrefs:\n  - ABCDEFGHJKMNP\n  - QRSTVWXYZ0123\n';
    expect(casParts(c)).toEqual({ type: "step", payload: "role: coder\nnote: see 0123456789ABC", refs: ["ABCDEFGHJKMNP", "QRSTVWXYZ0123"] });
    expect(casParts("type: text\npayload: hi\nrefs: []\n")).toEqual({ type: "text", payload: "hi", refs: [] });
    expect(casParts("nothing")).toEqual({ type: null, payload: null, refs: [] });
  });
});
