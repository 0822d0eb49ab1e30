export const run = async function* () {};
