// Package workflow is the contract between the executor and the things that
// run a workflow's logic: a JavaScript bundle (package jsrt) or, later, a
// YAML definition. A workflow is started over a thread's context and then
// stepped: each step it yields becomes one state node; its completion becomes
// the __end__ node.
package workflow

import (
	"context"
	"errors"

	"github.com/uncaged/workflow/engine/canonyaml"
	"github.com/uncaged/workflow/engine/cas"
)

// StartStep is the thread's first frame as the workflow sees it.
type StartStep struct {
	Role        string // always node.RoleStart
	Content     string // the prompt text
	Timestamp   int64  // ms since the epoch
	ParentState string // parent thread's state hash for a child thread, else ""
}

// RoleStep is a completed step as the workflow sees it.
type RoleStep struct {
	Role        string
	Meta        canonyaml.Map
	ContentHash string
	Refs        []string
	Timestamp   int64
}

// ThreadContext is what a workflow gets when it starts: the prompt and the
// steps already done (non-empty for a fork or a resumed thread).
type ThreadContext struct {
	ThreadID   string
	Depth      int
	BundleHash string
	Start      StartStep
	Steps      []RoleStep
}

// Output is one step a workflow yields.
type Output struct {
	Role        string
	ContentHash string // a content node the workflow stored
	Meta        canonyaml.Map
	Refs        []string
	ChildThread string // a child thread's __end__ hash, or ""
}

// Completion is how a workflow ends.
type Completion struct {
	ReturnCode int
	Summary    string
}

// ChildResult is the outcome of a child workflow run for a role.
type ChildResult struct {
	ReturnCode int
	Summary    string
	RootHash   string // the child's __end__ state hash
	ThreadID   string
}

// Host is what the engine offers a running workflow.
type Host interface {
	// CAS is the store the workflow reads and writes content in.
	CAS() *cas.Store
	// Log appends a line to the thread's debug log (console output,
	// progress of agents).
	Log(tag, content string)
	// RunChild runs the registered workflow name as a child thread of the
	// current one with the given prompt and waits for it. It fails with a
	// clear error when the depth limit (config.maxDepth) would be exceeded.
	// Cancelling ctx (the parent was killed) kills the child.
	RunChild(ctx context.Context, name, prompt string) (ChildResult, error)
	// Getenv reads the environment the thread runs with.
	Getenv(name string) string
	// Extract turns the content node contentHash into metadata that matches
	// schema (JSON Schema, as JSON text), using the model workflow.yaml
	// configures for the "extract" scene.
	Extract(ctx context.Context, schema []byte, contentHash string) (ExtractResult, error)
}

// RoleAnnouncer is implemented by a Host that wants to know which role a
// run is working on (the executor's: a pause and a kill name it). A
// workflow that knows calls RoleBegins as each role starts; one that does
// not leaves the role unknown, which only makes those messages vaguer.
type RoleAnnouncer interface {
	RoleBegins(role string)
}

// ExtractResult is what Host.Extract found.
type ExtractResult struct {
	Meta           canonyaml.Map
	ContentPayload string
}

// Run is one execution of a workflow. It is driven by one goroutine.
type Run interface {
	// Next resumes the workflow until it yields a step (out != nil) or
	// finishes (done != nil). When ctx is cancelled (the thread was killed)
	// the workflow is interrupted — including code that never yields — and
	// Next returns an error wrapping ctx.Err() promptly. A workflow that
	// throws returns an error describing the exception and where it came
	// from.
	Next(ctx context.Context) (out *Output, done *Completion, err error)
	// Close releases the run (stops timers, kills child processes).
	Close() error
}

// Workflow is loaded workflow code.
type Workflow interface {
	// Start begins a run over thread.
	Start(ctx context.Context, thread ThreadContext, host Host) (Run, error)
	// Descriptor describes the workflow's roles and graph.
	Descriptor() Descriptor
}

// ErrDepthLimit is wrapped by RunChild when a child would be too deep.
var ErrDepthLimit = errors.New("workflow adapter depth limit exceeded")
