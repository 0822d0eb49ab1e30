// @uncaged/workflow-protocol as this engine provides it: the values of the
// original package's export list (its types vanish when bundled).
export { END, START, err, ok } from "@uncaged/workflow-runtime";
