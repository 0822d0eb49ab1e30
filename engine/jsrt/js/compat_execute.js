// @uncaged/workflow-execute as this engine provides it to bundles: the
// child-workflow adapters and createWorkflow. The rest of the original
// package is its engine, which here is the Go engine's.
import { createWorkflow, workflowAdapter as runtimeWorkflowAdapter } from "@uncaged/workflow-runtime";

export { createWorkflow };

// workflowAdapter(name, options) runs the registered workflow name as a
// child thread of the role's thread. options.storageRoot is not used: the
// child always runs in the engine and storage root running the parent.
export function workflowAdapter(name, _options) {
  return runtimeWorkflowAdapter(name);
}

// workflowAsAgent is the original's deprecated name for workflowAdapter.
export const workflowAsAgent = workflowAdapter;
