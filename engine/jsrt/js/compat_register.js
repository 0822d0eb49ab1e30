// @uncaged/workflow-register as this engine provides it to bundles: the
// descriptor builder templates call at their top level. Registration
// itself is the engine's (workflow add), not a bundle's.
export { buildDescriptor } from "@uncaged/workflow-runtime";
