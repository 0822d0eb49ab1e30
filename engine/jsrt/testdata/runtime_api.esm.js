// A raw generator (no createWorkflow) using runtime.cas and runtime.extract
// (the test host answers extract without a model),
// and the old-style thread.prompt.
export const descriptor = { description: "runtime API", roles: {}, graph: { edges: [] } };

export const run = async function* (thread, runtime) {
  const hash = await runtime.cas.put(`prompt was: ${thread.prompt}`);
  const stored = await runtime.cas.get(hash);
  const missing = await runtime.cas.get("0000000000000");
  const listed = (await runtime.cas.list()).includes(hash);
  let extractError = "";
  try {
    await runtime.extract({ type: "object" }, "0000000000000");
  } catch (e) {
    extractError = e.message;
  }
  // A Zod-like schema is turned into JSON Schema with its toJSONSchema().
  const zodLike = { toJSONSchema: () => ({ type: "object", properties: { a: { type: "string" } } }) };
  const extracted = await runtime.extract(zodLike, hash);
  const meta = {
    stored,
    missing,
    listed,
    extractError,
    extractedSchema: extracted.meta.schema,
    extractedPayload: extracted.contentPayload,
    extractedRefs: extracted.refs.length,
    threadId: thread.threadId,
    depth: thread.depth,
    bundleHash: thread.bundleHash,
    startRole: thread.start.role,
    parentState: thread.start.parentState,
    priorSteps: thread.steps.map((s) => `${s.role}:${s.meta.n}`),
    keys: Object.keys(thread),
    z: 1,
    a: 2,
  };
  yield { role: "probe", contentHash: hash, meta, refs: [hash] };
  const temp = await runtime.cas.put("temporary");
  await runtime.cas.delete(temp);
  const afterDelete = await runtime.cas.get(temp);
  return { returnCode: afterDelete === null ? 0 : 1, summary: "probed" };
};
