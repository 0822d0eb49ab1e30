// Package yamlwf runs workflows written as YAML instead of JavaScript.
// A YAML workflow names its roles, the agent each role
// runs with and a routing graph; the executor drives it exactly like a
// bundle, and its steps are stored exactly as createWorkflow in
// @uncaged/workflow-runtime stores them, so a YAML workflow and an
// equivalent bundle write identical nodes.
//
// # Format
//
//	version: 1                      # required, must be 1
//	description: Plan, code, review # required
//	agents:                         # optional named agents (agents.Spec fields; type required)
//	  writer: {type: llm, model: default}
//	  script: {type: exec, command: ./roles/review.sh}
//	roles:                          # required, at least one
//	  planner:
//	    description: Breaks the task into phases   # required
//	    prompt: |                                   # the role's system prompt; required
//	      You plan...
//	    agent: writer               # a name from agents, or an inline spec {type: ..., ...};
//	                                # required unless the top-level agent default exists
//	    output:                     # JSON Schema of the role's meta; default {type: object}
//	      type: object
//	      properties: {status: {enum: [approved, rejected]}}
//	      required: [status]
//	agent: {type: llm}              # optional default agent for roles without one
//	graph:                          # required: who follows whom
//	  __start__: planner            # a role name: unconditional
//	  planner: reviewer
//	  reviewer:                     # a map: routed by the last step's meta.status
//	    approved: __end__
//	    rejected: planner
//	    FALLBACK: __end__           # optional; no match and no FALLBACK fails the thread
//
// Role names follow the registry's name rule (lowercase letters, digits and
// single hyphens); __start__ and __end__ are reserved. Unknown keys are
// errors everywhere, so a typo cannot pass silently — in output schemas too,
// where only JSON Schema keywords, casRef and "x-" extensions are accepted —
// and every role must be reachable from __start__. Output schemas are
// compiled when the workflow is added, with no $ref loading beyond the
// schema itself. Parse reports every problem of a file at once, in file
// order, each with its key path and line (an ErrorList prints the first
// MaxShown and counts the rest).
//
// # Routing
//
// The next role is graph[R] where R is the last step's role (__start__
// before the first step). A string names the next role (or __end__). A map
// is looked up with the last step's meta.status when it is a string; when
// no key matches (or status is missing or not a string) the FALLBACK entry
// is used. With no FALLBACK the thread fails, naming the status and the
// route (a RouteError): ending it as a success would hide a misspelt key. A
// role without a graph entry ends the thread, and so does __end__; ending
// returns code 0 with the summary "completed: moderator returned END", as
// createWorkflow does.
//
// A map's keys are checked against the statuses the role's output schema
// allows (properties.status.enum, or const) when the workflow is parsed:
//
//   - a key that is not an allowed status is an error, with the nearest
//     status as a suggestion ("no such status (did you mean "approved"?)");
//   - an allowed status with no key is an error, unless FALLBACK covers it;
//   - when the schema does not list the statuses, or does not require
//     status, the keys cannot be trusted to cover every step: without
//     FALLBACK that is a warning (Definition.Warnings), not an error.
//
// # Steps
//
// Each step runs the role's agent (agents.New(spec).Run) with the role name,
// the prompt as system prompt, the output schema as JSON and the thread so
// far. The meta it returns is validated against the output schema (even if
// the agent validated it already), stored as a content node holding its
// JSON text (the bytes JSON.stringify writes) whose refs are the meta's CAS
// references — the strings whose schema says "casRef": true — and the step's
// refs are those references followed by the content hash. An agent error
// fails the thread, as an exception in a bundle does.
//
// # Paths
//
// An agent's command or workspace written as a relative path ("./roles/a.sh",
// "../tools") is relative to the YAML file. ResolvePaths makes such paths
// absolute when the workflow is registered, since the stored copy no longer
// lives beside the file.
package yamlwf
