// Yields an invalid RoleOutput chosen by the prompt.
export const descriptor = { description: "bad yields", roles: {}, graph: { edges: [] } };

export const run = async function* (thread, runtime) {
  const hash = await runtime.cas.put("content");
  const good = { role: "r", contentHash: hash, meta: {}, refs: [], childThread: null };
  const bad = {
    notObject: 42,
    emptyRole: { ...good, role: "" },
    numberRole: { ...good, role: 7 },
    badHash: { ...good, contentHash: "not a hash" },
    missingBlob: { ...good, contentHash: "0000000000000" },
    arrayMeta: { ...good, meta: [] },
    noMeta: { ...good, meta: undefined },
    badRefs: { ...good, refs: ["nope"] },
    refsNotArray: { ...good, refs: "x" },
    badChild: { ...good, childThread: 5 },
  };
  if (thread.start.content === "badCompletion") {
    return { returnCode: "zero", summary: "x" };
  }
  if (thread.start.content === "noCompletion") {
    return undefined;
  }
  yield bad[thread.start.content];
};
