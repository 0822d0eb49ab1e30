// Types of hello-world.esm.js. `workflow add` stores this file with the
// bundle (it looks for <stem>.d.ts beside it), as `uncaged-workflow build`
// writes one beside every bundle it makes.
import type { WorkflowDescriptor, WorkflowFn } from "@uncaged/workflow-runtime";

export declare const descriptor: WorkflowDescriptor;
export declare const run: WorkflowFn;
