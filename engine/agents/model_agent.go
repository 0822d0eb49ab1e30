package agents

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/uncaged/workflow/engine/agents/llm"
	"github.com/uncaged/workflow/engine/agents/tools"
	"github.com/uncaged/workflow/engine/canonyaml"
	"github.com/uncaged/workflow/engine/registry"
	"github.com/uncaged/workflow/engine/threadenv"
)

// Round limits of the model agents when the spec gives none.
const (
	DefaultLLMMaxRounds   = 10
	DefaultReactMaxRounds = 30
)

// Naming of the output tool when the role's schema has no title and
// description (the original react adapter's defaults).
const (
	OutputToolName        = "resolve"
	OutputToolDescription = "Submit the final structured result."
)

// UsageRecorder is a Host that keeps account of model calls (the
// executor, in the thread's usage file): the llm and react agents report
// to it the tokens of every call they make for a role.
type UsageRecorder interface {
	RecordModelCall(role string, model registry.Model, u llm.Usage)
}

// modelAgent is the llm agent (one ReAct run with only the output tool) and
// the react agent (the same with the workspace tools).
type modelAgent struct {
	spec Spec
}

// newModelAgent returns the llm or react agent for spec. A react agent
// must name a workspace and only known tools; whether the workspace exists
// is checked when a role runs, since an earlier role may create it.
func newModelAgent(spec Spec) (Agent, error) {
	if spec.Kind == KindReact {
		if strings.TrimSpace(spec.Workspace) == "" {
			return nil, errors.New("agent: a react agent needs a workspace (the directory its tools work in)")
		}
		if err := tools.Check(spec.Tools); err != nil {
			return nil, fmt.Errorf("agent: %w", err)
		}
	}
	return modelAgent{spec: spec}, nil
}

// Run implements Agent.
func (a modelAgent) Run(ctx context.Context, call Call) (Result, error) {
	res, err := a.run(ctx, call)
	if err != nil {
		return Result{}, fmt.Errorf("%s agent: %w", a.spec.Kind, err)
	}
	return res, nil
}

func (a modelAgent) run(ctx context.Context, call Call) (Result, error) {
	if call.Host == nil {
		return Result{}, errors.New("no engine host to resolve the model through")
	}
	if a.spec.TimeoutMs > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(a.spec.TimeoutMs)*time.Millisecond)
		defer cancel()
	}
	ref := a.spec.Model
	if ref == "" {
		ref = "default"
	}
	model, err := call.Host.ResolveModel(ref)
	if err != nil {
		return Result{}, err
	}
	out, err := outputTool(call.Schema)
	if err != nil {
		return Result{}, err
	}
	req := llm.Request{
		User:      ThreadInput(call.Thread),
		Output:    out,
		MaxRounds: a.spec.MaxRounds,
		Log:       call.Host.Log,
	}
	intro := ""
	if a.spec.Kind == KindReact {
		th := threadenv.Of(call.Host)
		ws, err := tools.Open(th.Abs(a.spec.Workspace))
		if err != nil {
			return Result{}, err
		}
		defer func() { _ = ws.Close() }() // a directory handle: nothing was written through it
		if th != nil {
			ws.Env = th.Environ() // shell_exec runs with the thread's variables
		}
		if req.Tools, err = ws.Tools(a.spec.Tools); err != nil {
			return Result{}, err
		}
		intro = fmt.Sprintf("You work in the directory %s; file paths are relative to it, and your tools cannot reach outside it.\n", ws.Dir())
		if req.MaxRounds == 0 {
			req.MaxRounds = DefaultReactMaxRounds
		}
	} else if req.MaxRounds == 0 {
		req.MaxRounds = DefaultLLMMaxRounds
	}
	req.System = systemPrompt(call.SystemPrompt, intro, out.Name)
	call.Host.Log(llm.LogTagModel, fmt.Sprintf("%s agent for role %s: model %s, up to %d rounds", a.spec.Kind, call.Role, model.Model, req.MaxRounds))

	opts := llm.Options{Log: call.Host.Log}
	if rec, ok := call.Host.(UsageRecorder); ok {
		opts.OnUsage = func(u llm.Usage) { rec.RecordModelCall(call.Role, model, u) }
	}
	raw, err := llm.React(ctx, llm.New(model, opts), req)
	if err != nil {
		if a.spec.TimeoutMs > 0 && errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return Result{}, fmt.Errorf("timed out after %d ms: %w", a.spec.TimeoutMs, err)
		}
		return Result{}, err
	}
	tree, err := canonyaml.FromJSON(raw)
	if err != nil {
		return Result{}, fmt.Errorf("the model's result: %w", err)
	}
	meta, ok := tree.(canonyaml.Map)
	if !ok {
		return Result{}, errors.New("the model's result is not a JSON object")
	}
	return Result{Meta: meta}, nil
}

// outputTool names the structured output tool: the schema's title and
// description when it has them, else OutputToolName and
// OutputToolDescription. No schema accepts any JSON object.
func outputTool(schema json.RawMessage) (llm.Output, error) {
	if len(strings.TrimSpace(string(schema))) == 0 {
		schema = json.RawMessage(`{"type":"object"}`)
	}
	var obj map[string]any
	if err := json.Unmarshal(schema, &obj); err != nil || obj == nil {
		return llm.Output{}, errors.New("the role's schema must be a JSON object")
	}
	out := llm.Output{Schema: schema, Name: OutputToolName, Description: OutputToolDescription}
	if t, _ := obj["title"].(string); strings.TrimSpace(t) != "" {
		out.Name = strings.TrimSpace(t)
	}
	if d, _ := obj["description"].(string); strings.TrimSpace(d) != "" {
		out.Description = strings.TrimSpace(d)
	}
	return out, nil
}

// systemPrompt is the role's prompt followed by how to hand in the result.
func systemPrompt(role, intro, tool string) string {
	var b strings.Builder
	if role = strings.TrimSpace(role); role != "" {
		b.WriteString(role)
		b.WriteString("\n\n")
	}
	b.WriteString(intro)
	fmt.Fprintf(&b, "When you are done, call the %s tool with your result as JSON arguments matching its schema. You may instead reply with only that JSON object (no prose).", tool)
	return b.String()
}
