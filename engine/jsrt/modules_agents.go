package jsrt

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"

	"github.com/dop251/goja"

	"github.com/uncaged/workflow/engine/agents"
	"github.com/uncaged/workflow/engine/canonyaml"
	"github.com/uncaged/workflow/engine/node"
	"github.com/uncaged/workflow/engine/registry"
	"github.com/uncaged/workflow/engine/workflow"
)

// runtimeHostWithAgents is runtimeHost plus the agent binding the
// runtime's adapters (agentAdapter, cliAdapter, ...) are built on.
func (e *jsEnv) runtimeHostWithAgents() *goja.Object {
	o := e.runtimeHost()
	// validateAgent(specJSON) throws the Go validation message, so a bad
	// adapter fails where the bundle creates it (even at its top level).
	_ = o.Set("validateAgent", func(call goja.FunctionCall) goja.Value {
		if _, err := newAgent(call.Argument(0)); err != nil {
			e.throwError(err.Error())
		}
		return goja.Undefined()
	})
	// agent(specJSON, role, systemPrompt, schemaJSON, ctx) runs the agent
	// on its own goroutine and resolves {meta, childThread}; killing the
	// run cancels it (and the processes it started).
	_ = o.Set("agent", func(call goja.FunctionCall) goja.Value {
		e.requireHost("running an agent")
		agent, err := newAgent(call.Argument(0))
		if err != nil {
			e.throwError(err.Error())
		}
		schema, err := schemaArg(call.Argument(3))
		if err != nil {
			e.throwTypeError(err.Error())
		}
		thread, err := e.threadFromJS(call.Argument(4))
		if err != nil {
			e.throwTypeError("agent: ctx is not a thread context: " + err.Error())
		}
		c := agents.Call{
			Role:         stringArg(call.Argument(1)),
			SystemPrompt: stringArg(call.Argument(2)),
			Schema:       schema,
			Thread:       thread,
			Host:         agentHost(e.host),
		}
		return e.async(func(ctx context.Context) (any, error) {
			r, err := agent.Run(ctx, c)
			var noAnswer *agents.NoAnswerError
			if errors.As(err, &noAnswer) {
				// createWorkflow tells a wait that ran out by its code
				// and takes the role's FALLBACK route, as YAML does.
				return nil, codedError{err, CodeNoAnswer}
			}
			return r, err
		}, func(v any) goja.Value {
			r := v.(agents.Result)
			var child any
			if r.ChildThread != "" {
				child = r.ChildThread
			}
			refs := make([]any, len(r.Refs))
			for i, ref := range r.Refs {
				refs[i] = ref
			}
			return e.obj("meta", e.valueToJS(mapOrEmpty(r.Meta)), "childThread", child, "refs", e.vm.NewArray(refs...))
		})
	})
	return o
}

// CodeNoAnswer is the code of the error a human adapter rejects with when
// its wait ran out (agents.NoAnswerError).
const CodeNoAnswer = "NO_ANSWER"

// codedError is a Go error that reaches JavaScript as an Error with a code
// property, as Node's errors have.
type codedError struct {
	error
	code string
}

func (c codedError) Unwrap() error { return c.error }

// newAgent parses and validates a spec given as JSON text.
func newAgent(v goja.Value) (agents.Agent, error) {
	if v == nil || !goja.IsString(v) {
		return nil, errors.New("agent: the spec must be passed as JSON text")
	}
	spec, err := agents.ParseSpec([]byte(v.String()))
	if err != nil {
		return nil, err
	}
	return agents.New(spec)
}

func stringArg(v goja.Value) string {
	if v == nil || goja.IsUndefined(v) || goja.IsNull(v) {
		return ""
	}
	return v.String()
}

// schemaArg reads the role's JSON Schema as JSON text; null or undefined
// means none.
func schemaArg(v goja.Value) (json.RawMessage, error) {
	if v == nil || goja.IsUndefined(v) || goja.IsNull(v) {
		return nil, nil
	}
	if !goja.IsString(v) {
		return nil, errors.New("agent: the schema must be passed as JSON text")
	}
	s := v.String()
	if !json.Valid([]byte(s)) {
		return nil, errors.New("agent: the schema is not valid JSON")
	}
	return json.RawMessage(s), nil
}

// agentHost gives an agent the host's model configuration when it has one;
// hosts without it (tests, embedders) still run command agents.
func agentHost(h workflow.Host) agents.Host {
	if ah, ok := h.(agents.Host); ok {
		return ah
	}
	return modellessHost{h}
}

type modellessHost struct{ workflow.Host }

func (modellessHost) ResolveModel(ref string) (registry.Model, error) {
	return registry.Model{}, fmt.Errorf("this engine host has no model configuration to resolve %q", ref)
}

// threadFromJS converts the ThreadContext a role function received (the
// shape threadToJS builds, extended by createWorkflow's steps) back to Go.
func (e *jsEnv) threadFromJS(v goja.Value) (workflow.ThreadContext, error) {
	var t workflow.ThreadContext
	tree, err := e.exportTree(v)
	if err != nil {
		return t, err
	}
	m, ok := stripFunctions(tree).(canonyaml.Map)
	if !ok {
		return t, errors.New("expected an object")
	}
	if t.ThreadID, err = ctxField[string](m, "threadId", true); err != nil {
		return t, err
	}
	depth, err := ctxField[float64](m, "depth", false)
	if err != nil {
		return t, err
	}
	if depth != math.Trunc(depth) || depth < 0 || depth > math.MaxInt32 {
		return t, fmt.Errorf("depth must be a non-negative integer, got %v", depth)
	}
	t.Depth = int(depth)
	if t.BundleHash, err = ctxField[string](m, "bundleHash", false); err != nil {
		return t, err
	}
	start, err := ctxField[canonyaml.Map](m, "start", true)
	if err != nil {
		return t, err
	}
	t.Start.Role = node.RoleStart
	if t.Start.Content, err = ctxField[string](start, "content", true); err != nil {
		return t, fmt.Errorf("start.%w", err)
	}
	if t.Start.ParentState, err = ctxField[string](start, "parentState", false); err != nil {
		return t, fmt.Errorf("start.%w", err)
	}
	ts, err := ctxField[float64](start, "timestamp", false)
	if err != nil {
		return t, fmt.Errorf("start.%w", err)
	}
	t.Start.Timestamp = int64(ts)
	steps, err := ctxField[[]any](m, "steps", false)
	if err != nil {
		return t, err
	}
	for i, item := range steps {
		sm, ok := item.(canonyaml.Map)
		if !ok {
			return t, fmt.Errorf("steps[%d] must be an object", i)
		}
		var s workflow.RoleStep
		if s.Role, err = ctxField[string](sm, "role", true); err != nil {
			return t, fmt.Errorf("steps[%d].%w", i, err)
		}
		if s.Meta, err = ctxField[canonyaml.Map](sm, "meta", false); err != nil {
			return t, fmt.Errorf("steps[%d].%w", i, err)
		}
		if s.ContentHash, err = ctxField[string](sm, "contentHash", false); err != nil {
			return t, fmt.Errorf("steps[%d].%w", i, err)
		}
		refs, err := ctxField[[]any](sm, "refs", false)
		if err != nil {
			return t, fmt.Errorf("steps[%d].%w", i, err)
		}
		for _, r := range refs {
			if rs, ok := r.(string); ok {
				s.Refs = append(s.Refs, rs)
			}
		}
		ts, err := ctxField[float64](sm, "timestamp", false)
		if err != nil {
			return t, fmt.Errorf("steps[%d].%w", i, err)
		}
		s.Timestamp = int64(ts)
		t.Steps = append(t.Steps, s)
	}
	return t, nil
}

// ctxField reads key from m as a T; absent or null is T's zero value unless
// required.
func ctxField[T any](m canonyaml.Map, key string, required bool) (T, error) {
	var zero T
	v, ok := m.Get(key)
	if !ok || v == nil {
		if required {
			return zero, fmt.Errorf("%s is required", key)
		}
		return zero, nil
	}
	x, ok := v.(T)
	if !ok {
		return zero, fmt.Errorf("%s has the wrong type (%T)", key, v)
	}
	return x, nil
}
