// Package agents runs a workflow role with an agent: an OpenAI-compatible
// model (llm, react), an agent CLI (cli, cursor, hermes), a deterministic
// command (exec) or another registered workflow (workflow). JavaScript
// bundles reach it through the runtime's adapters and YAML workflows through
// a role's `agent:` field; both describe the agent with a Spec, so every kind
// behaves the same in either kind of workflow.
package agents

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/uncaged/workflow/engine/canonyaml"
	"github.com/uncaged/workflow/engine/registry"
	"github.com/uncaged/workflow/engine/workflow"
)

// Kinds of agent a Spec may name.
const (
	KindLLM      = "llm"      // one model call with a structured output tool
	KindReact    = "react"    // model + workspace tools (read/write/patch files, shell)
	KindCLI      = "cli"      // any agent CLI; output extracted into the role's meta
	KindCursor   = "cursor"   // cli preset for cursor-agent
	KindHermes   = "hermes"   // cli preset for hermes
	KindExec     = "exec"     // a command whose stdout is the role's meta as JSON
	KindWorkflow = "workflow" // a registered workflow run as a child thread
	KindHuman    = "human"    // a person answers: the prompt is the question, the schema the form
)

// Spec describes an agent. Field meaning depends on Kind; unused fields must
// be empty (Validate says which). JSON names are what bundles and YAML
// workflows write.
type Spec struct {
	Kind string `json:"type"`
	// Model is a scene of workflow.yaml's config.models ("default",
	// "coder", ...) or a direct "provider/model" reference (llm, react);
	// the model flag passed to an agent CLI (cli, cursor, hermes).
	Model string `json:"model,omitempty"`
	// Command is the program to run (cli, cursor, hermes, exec): an
	// absolute path, or a bare program name looked up on PATH when the role
	// runs. A relative path ("./review.sh", "bin/agent") is refused, since
	// it would depend on the engine host's working directory; a YAML
	// workflow may write one, and `workflow add` makes it absolute against
	// the YAML file's directory. cursor and hermes default to
	// WORKFLOW_CURSOR_COMMAND / WORKFLOW_HERMES_COMMAND, then to
	// cursor-agent / hermes on PATH.
	Command string `json:"command,omitempty"`
	// Args are the command's arguments (cli, exec). "{prompt}", "{model}"
	// and "{workspace}" are replaced; a cli agent with no "{prompt}"
	// argument gets the prompt on stdin.
	Args []string `json:"args,omitempty"`
	// Workspace is the directory the agent works in: a react agent's tools
	// are confined to it, a command agent runs in it (cursor passes it on
	// as --workspace). It must be an absolute path — the engine host's
	// working directory is nobody's project — and exist when the role runs.
	// A react agent requires one. A cursor agent without one has the
	// extract model read it from the thread (the task or a step's meta must
	// name an absolute path), as the original did; other command agents
	// without one run in the host's working directory. In a YAML workflow a
	// relative workspace is made absolute against the YAML file's directory
	// by `workflow add`.
	Workspace string `json:"workspace,omitempty"`
	// TimeoutMs bounds one role invocation; 0 means no limit. It is
	// written in milliseconds or as a duration ("30s", "24h"). For a human
	// agent it is how long the thread waits for an answer.
	TimeoutMs Millis `json:"timeout,omitempty"`
	// MaxRounds bounds the model calls of llm and react agents (0: default).
	MaxRounds int `json:"maxRounds,omitempty"`
	// Tools limits a react agent to these tools (empty: all of them).
	Tools []string `json:"tools,omitempty"`
	// Workflow is the registered workflow a workflow agent runs.
	Workflow string `json:"workflow,omitempty"`
	// Env adds variables to a command's environment.
	Env map[string]string `json:"env,omitempty"`
	// Assignee names who is asked to answer (human): free text, a name or
	// an address the team recognises; "" lets anyone answer.
	Assignee string `json:"assignee,omitempty"`
}

// Host is what an agent needs from the engine while it runs one role.
type Host interface {
	workflow.Host
	// ResolveModel resolves a scene name or a "provider/model" reference
	// through workflow.yaml's config (API keys from env: references
	// resolved).
	ResolveModel(ref string) (registry.Model, error)
}

// Call is one role invocation.
type Call struct {
	Role         string
	SystemPrompt string
	// Schema is the JSON Schema (JSON text) the role's meta must satisfy;
	// nil accepts any JSON object.
	Schema json.RawMessage
	Thread workflow.ThreadContext
	Host   Host
}

// Result is what an agent produced for a role.
type Result struct {
	// Meta is the role's metadata, a JSON object valid against the schema.
	Meta canonyaml.Map
	// ChildThread is the __end__ hash of a child thread the role ran, or "".
	ChildThread string
	// Refs are nodes the role's content node must keep (a person's answer,
	// which names its question), so GC keeps them with the step.
	Refs []string
}

// Agent runs roles.
type Agent interface {
	Run(ctx context.Context, call Call) (Result, error)
}

// New validates spec and returns its agent.
func New(spec Spec) (Agent, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	switch spec.Kind {
	case KindLLM, KindReact:
		return newModelAgent(spec)
	case KindCLI, KindCursor, KindHermes, KindExec:
		return newCommandAgent(spec)
	case KindWorkflow:
		return workflowAgent{name: spec.Workflow}, nil
	case KindHuman:
		return humanAgent{spec: spec}, nil
	}
	panic("unreachable: Validate accepted kind " + spec.Kind)
}

// ParseSpec decodes a Spec from JSON, rejecting unknown fields.
func ParseSpec(data []byte) (Spec, error) {
	var s Spec
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return Spec{}, fmt.Errorf("agent: %w", err)
	}
	if dec.More() {
		return Spec{}, fmt.Errorf("agent: trailing data after the agent object")
	}
	return s, s.Validate()
}

// Validate reports the first problem with s, naming the field.
func (s Spec) Validate() error {
	kinds := []string{KindLLM, KindReact, KindCLI, KindCursor, KindHermes, KindExec, KindWorkflow, KindHuman}
	known := false
	for _, k := range kinds {
		known = known || s.Kind == k
	}
	if !known {
		sorted := append([]string(nil), kinds...)
		sort.Strings(sorted)
		if s.Kind == "" {
			return fmt.Errorf("agent: type is required (one of %s)", strings.Join(sorted, ", "))
		}
		return fmt.Errorf("agent: unknown type %q (one of %s)", s.Kind, strings.Join(sorted, ", "))
	}
	if s.Workspace != "" && !filepath.IsAbs(s.Workspace) {
		return fmt.Errorf("agent: workspace must be an absolute path, got %q", s.Workspace)
	}
	if s.TimeoutMs < 0 {
		return fmt.Errorf("agent: timeout must be >= 0 milliseconds, got %d", s.TimeoutMs)
	}
	if s.MaxRounds < 0 {
		return fmt.Errorf("agent: maxRounds must be >= 0, got %d", s.MaxRounds)
	}
	only := func(field string, set bool, kinds ...string) error {
		if !set {
			return nil
		}
		for _, k := range kinds {
			if s.Kind == k {
				return nil
			}
		}
		return fmt.Errorf("agent: %s does not apply to a %s agent", field, s.Kind)
	}
	for _, err := range []error{
		only("model", s.Model != "", KindLLM, KindReact, KindCLI, KindCursor, KindHermes),
		only("command", s.Command != "", KindCLI, KindCursor, KindHermes, KindExec),
		only("args", len(s.Args) > 0, KindCLI, KindExec),
		only("workspace", s.Workspace != "", KindReact, KindCLI, KindCursor, KindHermes, KindExec),
		only("maxRounds", s.MaxRounds != 0, KindLLM, KindReact),
		only("tools", len(s.Tools) > 0, KindReact),
		only("workflow", s.Workflow != "", KindWorkflow),
		only("env", len(s.Env) > 0, KindCLI, KindCursor, KindHermes, KindExec),
		only("assignee", s.Assignee != "", KindHuman),
	} {
		if err != nil {
			return err
		}
	}
	switch s.Kind {
	case KindCLI, KindExec:
		if s.Command == "" {
			return fmt.Errorf("agent: a %s agent needs a command", s.Kind)
		}
	case KindWorkflow:
		if s.Workflow == "" {
			return fmt.Errorf("agent: a workflow agent needs the workflow's name")
		}
	case KindHuman:
		if n := utf8.RuneCountInString(s.Assignee); n > MaxAssigneeRunes || !utf8.ValidString(s.Assignee) || strings.ContainsAny(s.Assignee, "\n\r") {
			return fmt.Errorf("agent: assignee must be one line of at most %d characters", MaxAssigneeRunes)
		}
	}
	return nil
}

// workflowAgent runs a registered workflow as a child thread with the
// parent's prompt; the role's meta is the child's
// outcome and the step points at the child's __end__ state.
type workflowAgent struct{ name string }

func (w workflowAgent) Run(ctx context.Context, call Call) (Result, error) {
	r, err := call.Host.RunChild(ctx, w.name, call.Thread.Start.Content)
	if err != nil {
		return Result{}, fmt.Errorf("child workflow %q failed: %w", w.name, err)
	}
	return Result{
		Meta: canonyaml.Map{
			{Key: "returnCode", Value: r.ReturnCode},
			{Key: "summary", Value: r.Summary},
			{Key: "rootHash", Value: r.RootHash},
			{Key: "threadId", Value: r.ThreadID},
		},
		ChildThread: r.RootHash,
	}, nil
}

// Millis is a duration in milliseconds that JSON and YAML may write as a
// number of milliseconds or as a Go duration ("90s", "24h"): a person's
// wait is counted in hours, which nobody should have to write as 86400000.
type Millis int64

// UnmarshalJSON reads a number of milliseconds or a duration string.
func (m *Millis) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		d, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("timeout: %q is not a duration (write e.g. \"90s\", \"30m\", \"24h\", or milliseconds as a number)", s)
		}
		if d%time.Millisecond != 0 {
			return fmt.Errorf("timeout: %q is finer than a millisecond", s)
		}
		*m = Millis(d / time.Millisecond)
		return nil
	}
	n, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		return fmt.Errorf("timeout: must be milliseconds (an integer) or a duration string, got %s", b)
	}
	*m = Millis(n)
	return nil
}

// Duration is m as a time.Duration.
func (m Millis) Duration() time.Duration { return time.Duration(m) * time.Millisecond }
