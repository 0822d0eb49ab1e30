// Throws while the bundle loads, at line 3 of this file.
const answer: number = 42;
if (answer === 42) throw new Error("top level of the source");
export const run = async function* () {};
export const descriptor = {};
