// The engine's structuredClone throws for a function, from the engine's
// own code; the location must still be this file's line 4.
const notCloneable: () => number = () => 1;
structuredClone(notCloneable);
export const run = async function* () {};
export const descriptor = {};
