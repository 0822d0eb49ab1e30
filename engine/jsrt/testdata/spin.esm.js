// A role that never yields: only an interrupt can stop it.
export const descriptor = { description: "spins", roles: {}, graph: { edges: [] } };

export const run = async function* (thread, runtime) {
  const hash = await runtime.cas.put("before the spin");
  yield { role: "warmup", contentHash: hash, meta: {}, refs: [], childThread: null };
  console.log("spinning"); // tests wait for this before they interrupt
  let n = 0;
  while (true) {
    n++;
  }
};
