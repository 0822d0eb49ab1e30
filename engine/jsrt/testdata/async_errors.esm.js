// Failures that do not come from the generator's own stack.
export const descriptor = { description: "async errors", roles: {}, graph: { edges: [] } };

export const run = async function* (thread) {
  if (thread.start.content === "timer") {
    setTimeout(() => {
      throw new Error("thrown from a timer");
    }, 1);
    await new Promise((resolve) => setTimeout(resolve, 1000));
  }
  if (thread.start.content === "rejection") {
    await new Promise((_, reject) => setTimeout(() => reject(new TypeError("rejected later")), 1));
  }
  if (thread.start.content === "stall") {
    await new Promise(() => {});
  }
  if (thread.start.content === "throwString") {
    throw "a bare string";
  }
};
