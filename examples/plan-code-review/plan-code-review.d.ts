// Types of plan-code-review.esm.js: those of its source. `workflow add`
// stores this file with the bundle (it looks for <stem>.d.ts beside it), as
// `uncaged-workflow build` writes one beside every bundle it makes.
export { run, descriptor } from "./plan-code-review-entry.js";
