// Package jsrt runs workflow bundles — single-file ESM JavaScript, as the
// original TypeScript engine wrote them — in goja, an ECMAScript engine in
// pure Go.
//
// # Loading
//
// Load transforms a bundle once with esbuild (CommonJS, ES2017: goja has
// neither ES modules nor async generators, and esbuild lowers both), caches
// the result by content hash, then evaluates the module in a throwaway
// runtime to check its exports and read its descriptor. Errors name what
// is wrong with the texts the original validator uses, and JavaScript
// errors carry the bundle's file:line:column (esbuild's inline source map
// maps positions back to the bundle). A bundle that carries an inline
// source map of its own (a "data:" sourceMappingURL, as `build` writes
// it) has it composed with esbuild's when the bundle is transformed, once,
// so positions read as its sources' ("workflows/boom-entry.ts:9:25"); a
// sourceMappingURL naming a file is ignored, never read.
//
// # Running
//
// A *Bundle is a workflow.Workflow. Every Start makes a fresh runtime with
// its own event loop. goja is not goroutine-safe, so all JavaScript of a
// run executes inside Start and Next, one call at a time; Go work (timers,
// HTTP, child processes, child workflows) runs on other goroutines and
// hands results back to the loop, where they settle promises the next time
// the loop runs. Between steps the JavaScript world stands still.
// Cancelling Next's context interrupts JavaScript wherever it is (even
// `while (true) {}`), cancels requests, kills child process groups and
// stops timers; Next then returns an error wrapping the context's error.
//
// # Memory
//
// A run's JavaScript has a memory budget (package membudget): a watchdog
// stops a run that holds more. A call that would allocate past what the
// budget leaves, or past what the host has left, in one go — a typed
// array, ArrayBuffer or Buffer of the size a script passes, a string
// repeated or padded or joined to one, a file, a response body or a
// child's output read whole, JSON or a step's meta written from a
// sparse array or from many references to one large string — throws a
// RangeError with code ERR_MEMORY_BUDGET that names the budget and how to
// raise it, before allocating; uncaught, it fails the run. goja's
// built-ins that allocate what a script sizes are wrapped to ask first
// (memgate_builtins.go lists them); a child's output waits in the pipe
// while JavaScript is busy, as in Node.
//
// # What a bundle can import
//
// "@uncaged/workflow-runtime" (RuntimeModule): START, END, FALLBACK,
// createWorkflow, tableToModerator, buildDescriptor, workflowAdapter
// (workflowAsAgent), fnAdapter, ok, err and buildThreadContext; the
// original's other packages a bundle built by its build imports, with
// their exported API over this engine's own agents (ProvidedPackages:
// workflow-agent-cursor, -hermes, -llm, -react, workflow-util,
// workflow-util-agent, workflow-protocol, workflow-cas, workflow-execute,
// workflow-reactor, workflow-register; testdata/original-exports.txt says
// which of their exports are left out, and why); and a Node-compatible
// subset:
// buffer, child_process, crypto, events, fs, fs/promises, os, path,
// path/posix, process, timers, timers/promises, url and util, with or
// without the "node:" prefix (see AvailableModules). The globals process,
// console, Buffer, timers, queueMicrotask, fetch, Headers, Request,
// Response, AbortController, AbortSignal, Event, EventTarget,
// DOMException, TextEncoder, TextDecoder, URL, URLSearchParams, crypto,
// structuredClone, performance, atob and btoa exist too. console writes to
// the thread's debug log (tag CONSOLE). Any other package is bundled in
// from node_modules by `workflow add` (ExternalImports lists them).
//
// # Writing a deterministic role
//
// A role's behaviour comes from an adapter. An AdapterFn is
//
//	(prompt, schema) => async (ctx, runtime) => ({ meta, childThread: null })
//
// where prompt and schema are the role's systemPrompt and schema, ctx is
// the ThreadContext (ctx.start.content is the prompt, ctx.steps the steps
// so far) and meta is the role's output. A role with no model is just such
// a function, or fnAdapter(fn) for a function returning the meta:
//
//	import { createWorkflow, buildDescriptor, fnAdapter, START, END } from "@uncaged/workflow-runtime";
//
//	const definition = {
//	  description: "Count words",
//	  roles: {
//	    counter: { description: "Counts", systemPrompt: "", schema: { type: "object" } },
//	  },
//	  table: {
//	    [START]: [{ condition: "FALLBACK", role: "counter" }],
//	    counter: [{ condition: "FALLBACK", role: END }],
//	  },
//	};
//	const counter = fnAdapter((ctx) => ({ words: ctx.start.content.split(/\s+/).length }));
//	export const run = createWorkflow(definition, { adapter: counter, overrides: null });
//	export const descriptor = buildDescriptor(definition);
//
// workflowAdapter(name) is the adapter of a role that runs another
// registered workflow as a child thread (Host.RunChild).
package jsrt
