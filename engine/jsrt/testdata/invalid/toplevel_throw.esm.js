export const run = async function* () {};

function configure() {
  throw new Error("configuration exploded at load");
}

export const descriptor = configure();
