// Roles that use memory, for the memory budget's tests. The prompt picks:
//   "hog"        keeps everything it allocates, forever (the reproduction
//                of a role that took the whole host down);
//   "hold N G"   builds about N MiB and keeps it while it makes G MiB of
//                garbage, then finishes: within a budget above N it must.
export const descriptor = { description: "memory", roles: {}, graph: { edges: [] } };

const MiB = 1 << 20;
// A fresh MiB string (goja's repeat copies one string per count).
const mib = (c, i) => c.repeat(1024).repeat(1024) + i;

export const run = async function* (thread, runtime) {
  const [what, n, g] = thread.start.content.split(" ");
  if (what === "hog") {
    const keep = [];
    for (;;) keep.push(new Array(1 << 20));
  }
  const held = [];
  for (let i = 0; i < Number(n); i++) held.push(mib("x", i));
  let churned = 0;
  for (let i = 0; i < Number(g); i++) churned += mib("y", i).length;
  const hash = await runtime.cas.put("held " + held.length + " MiB, churned " + Math.round(churned / MiB) + " MiB");
  yield { role: "holder", contentHash: hash, meta: { held: held.length }, refs: [], childThread: null };
  return { returnCode: 0, summary: "held " + held.length + " MiB" };
};
