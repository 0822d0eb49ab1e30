package yamlwf

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/uncaged/workflow/engine/agents"
	"github.com/uncaged/workflow/engine/canonyaml"
	"github.com/uncaged/workflow/engine/ids"
	"github.com/uncaged/workflow/engine/node"
	"github.com/uncaged/workflow/engine/registry"
	"github.com/uncaged/workflow/engine/roleschema"
	"github.com/uncaged/workflow/engine/workflow"
)

// SummaryEnd is the summary of a thread the graph ended, the same text
// createWorkflow returns.
const SummaryEnd = "completed: moderator returned END"

// AgentFactory makes the agent for a spec; agents.New in production.
type AgentFactory func(agents.Spec) (agents.Agent, error)

// Workflow is a loaded YAML workflow; it implements workflow.Workflow.
type Workflow struct {
	def      *Definition
	newAgent AgentFactory
	roles    map[string]*Role
	routes   map[string]Route
}

// Options adjust Load.
type Options struct {
	// NewAgent makes role agents (nil: agents.New). Tests inject
	// deterministic agents here.
	NewAgent AgentFactory
}

// Load parses a YAML workflow (see Parse) and prepares it to run.
func Load(data []byte, opts Options) (*Workflow, error) {
	def, err := Parse(data)
	if err != nil {
		return nil, err
	}
	w := &Workflow{def: def, newAgent: opts.NewAgent, roles: map[string]*Role{}, routes: map[string]Route{}}
	if w.newAgent == nil {
		w.newAgent = agents.New
	}
	for i := range def.Roles {
		w.roles[def.Roles[i].Name] = &def.Roles[i]
	}
	for _, r := range def.Routes {
		w.routes[r.From] = r
	}
	return w, nil
}

// Definition returns the parsed workflow.
func (w *Workflow) Definition() *Definition { return w.def }

// Descriptor implements workflow.Workflow: roles with their prompt and
// output schema, and one edge per transition — an unconditional route is a
// FALLBACK edge, a keyed one has the status as its condition, and a map's
// FALLBACK entry comes last, as it is tried last.
func (w *Workflow) Descriptor() workflow.Descriptor {
	d := workflow.Descriptor{Description: w.def.Description}
	for _, r := range w.def.Roles {
		d.Roles = append(d.Roles, workflow.RoleDescriptor{
			Name: r.Name, Description: r.Description, SystemPrompt: r.Prompt, Schema: r.Output,
		})
	}
	for _, r := range w.def.Routes {
		if r.Next != "" {
			d.Graph.Edges = append(d.Graph.Edges, workflow.Edge{From: r.From, To: r.Next, Condition: FallbackKey})
			continue
		}
		for _, c := range r.Cases {
			desc := fmt.Sprintf("meta.status == %s", quoteJSON(c.Status))
			d.Graph.Edges = append(d.Graph.Edges, workflow.Edge{From: r.From, To: c.Next, Condition: c.Status, ConditionDescription: &desc})
		}
		if r.Fallback != "" {
			d.Graph.Edges = append(d.Graph.Edges, workflow.Edge{From: r.From, To: r.Fallback, Condition: FallbackKey})
		}
	}
	return d
}

func quoteJSON(s string) string {
	b, err := canonyaml.Map{{Key: "s", Value: s}}.MarshalJSON()
	if err != nil {
		return fmt.Sprintf("%q", s)
	}
	return string(b[5 : len(b)-1]) // strip {"s": and }
}

// Next returns the role that follows steps, or node.RoleEnd. A keyed route
// whose keys do not match the last step's status, and that has no
// FALLBACK, is an error naming the status: ending the thread as if the
// graph said so would report success for what is almost always a
// misspelt key or an unforeseen status.
func (w *Workflow) Next(steps []workflow.RoleStep) (string, error) {
	from := node.RoleStart
	var status any
	hasStatus := false
	if len(steps) > 0 {
		last := steps[len(steps)-1]
		from = last.Role
		status, hasStatus = last.Meta.Get("status")
	}
	r, ok := w.routes[from]
	if !ok {
		return node.RoleEnd, nil
	}
	if r.Next != "" {
		return r.Next, nil
	}
	if s, isString := status.(string); isString {
		for _, c := range r.Cases {
			if c.Status == s {
				return c.Next, nil
			}
		}
	}
	if r.Fallback != "" {
		return r.Fallback, nil
	}
	return "", &RouteError{Role: from, Status: status, HasStatus: hasStatus, Keys: r.keys()}
}

// RouteError is a step whose status no key of its role's route matches,
// when the route has no FALLBACK.
type RouteError struct {
	Role string
	// Status is the step's meta.status; HasStatus is false when it has none.
	Status    any
	HasStatus bool
	// Keys are the route's status keys, in written order.
	Keys []string
}

// Error names the status, the route and the keys it has.
func (e *RouteError) Error() string {
	var what string
	switch s, isString := e.Status.(string); {
	case !e.HasStatus:
		what = "returned no status"
	case isString:
		what = fmt.Sprintf("returned status %q", s)
	default:
		what = fmt.Sprintf("returned status %s, which is not a string", statusText(e.Status))
	}
	return fmt.Sprintf("role %q %s, and no route of graph.%s matches it (keys: %s; no %s)",
		e.Role, what, e.Role, strings.Join(e.Keys, ", "), FallbackKey)
}

// keys lists a keyed route's statuses in written order.
func (r Route) keys() []string {
	out := make([]string, len(r.Cases))
	for i, c := range r.Cases {
		out[i] = c.Status
	}
	return out
}

// Start implements workflow.Workflow.
func (w *Workflow) Start(ctx context.Context, thread workflow.ThreadContext, host workflow.Host) (workflow.Run, error) {
	if thread.Start.Role != node.RoleStart {
		return nil, errors.New("workflow loop expected start role to be __start__")
	}
	ah, ok := host.(agents.Host)
	if !ok {
		ah = noModels{host}
	}
	t := thread
	t.Steps = append([]workflow.RoleStep(nil), thread.Steps...)
	announcer, _ := host.(workflow.RoleAnnouncer) // before noModels hides it
	return &run{w: w, host: ah, announcer: announcer, thread: t, agents: map[string]agents.Agent{}}, nil
}

// noModels adapts a host that cannot resolve models (tests, embedders that
// only run deterministic agents).
type noModels struct{ workflow.Host }

func (noModels) ResolveModel(string) (registry.Model, error) {
	return registry.Model{}, errors.New("this engine host cannot resolve models")
}

type run struct {
	w    *Workflow
	host agents.Host
	// announcer is told each role as it begins, so a pause or a kill can
	// name it; nil when the host does not ask.
	announcer workflow.RoleAnnouncer
	thread    workflow.ThreadContext
	agents    map[string]agents.Agent
	done      bool
}

// Next implements workflow.Run: one role per call.
func (r *run) Next(ctx context.Context) (*workflow.Output, *workflow.Completion, error) {
	if r.done {
		return nil, nil, errors.New("yamlwf: Next called after the workflow completed")
	}
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	name, err := r.w.Next(r.thread.Steps)
	if err != nil {
		r.done = true
		return nil, nil, err
	}
	if name == node.RoleEnd {
		r.done = true
		return nil, &workflow.Completion{ReturnCode: 0, Summary: SummaryEnd}, nil
	}
	role, ok := r.w.roles[name]
	if !ok { // Parse rules this out; kept to mirror createWorkflow
		r.done = true
		return nil, &workflow.Completion{ReturnCode: 1, Summary: "unknown role: " + name}, nil
	}
	if r.announcer != nil {
		r.announcer.RoleBegins(name)
	}
	agent, err := r.agent(role)
	if err != nil {
		return nil, nil, fmt.Errorf("role %q: %w", name, err)
	}
	res, err := agent.Run(ctx, agents.Call{
		Role: name, SystemPrompt: role.Prompt, Schema: role.outputJSON,
		Thread: r.thread, Host: r.host,
	})
	if ctx.Err() != nil {
		return nil, nil, fmt.Errorf("role %q: %w", name, ctx.Err())
	}
	// A person's wait that ran out takes the role's FALLBACK route, with
	// meta that says so and has no status (so no other key matches);
	// without one the thread fails, saying why. The schema describes an
	// answer, which this step does not hold, so it is not applied.
	timedOut := false
	var noAnswer *agents.NoAnswerError
	if errors.As(err, &noAnswer) {
		if route, ok := r.w.routes[name]; !ok || route.Fallback == "" {
			return nil, nil, fmt.Errorf("%w, and graph.%s has no %s route to take instead", err, name, FallbackKey)
		}
		res, err, timedOut = agents.Result{Meta: agents.TimedOutMeta()}, nil, true
	}
	if err != nil {
		return nil, nil, fmt.Errorf("role %q: %w", name, err)
	}
	meta := res.Meta
	if meta == nil {
		meta = canonyaml.Map{}
	}
	payload, err := meta.MarshalJSON()
	if err != nil {
		return nil, nil, fmt.Errorf("role %q: meta: %w", name, err)
	}
	if err := validateMeta(role.schema, payload); err != nil && !timedOut {
		return nil, nil, fmt.Errorf("role %q: meta does not match the role's output schema: %w", name, err)
	}
	casRefs := CollectCASRefs(role.Output, meta)
	for i, ref := range casRefs {
		h, err := ids.ParseHash(ref)
		if err != nil {
			return nil, nil, fmt.Errorf("role %q: meta holds a casRef that is not a CAS hash: %w", name, err)
		}
		casRefs[i] = h
	}
	// The content node also keeps what the agent asked it to (a person's
	// answer), so GC keeps that with the step.
	keep := append(casRefs, res.Refs...)
	contentHash, err := r.host.CAS().PutNode(node.NewContent(string(payload), keep))
	if err != nil {
		return nil, nil, fmt.Errorf("role %q: %w", name, err)
	}
	refs := append(append([]string{}, keep...), contentHash)
	out := &workflow.Output{Role: name, ContentHash: contentHash, Meta: meta, Refs: refs, ChildThread: res.ChildThread}
	r.thread.Steps = append(r.thread.Steps, workflow.RoleStep{
		Role: name, Meta: meta, ContentHash: contentHash, Refs: refs, Timestamp: time.Now().UnixMilli(),
	})
	return out, nil, nil
}

// agent makes a role's agent once per run: agents may hold per-run state
// (a model client), and a run is driven by one goroutine.
func (r *run) agent(role *Role) (agents.Agent, error) {
	if a, ok := r.agents[role.Name]; ok {
		return a, nil
	}
	a, err := r.w.newAgent(role.Agent)
	if err != nil {
		return nil, err
	}
	r.agents[role.Name] = a
	return a, nil
}

// Close implements workflow.Run; agents clean up after each call.
func (r *run) Close() error { return nil }

func validateMeta(schema *jsonschema.Schema, payload []byte) error {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(payload))
	if err != nil {
		return err
	}
	if err := schema.Validate(v); err != nil {
		var ve *jsonschema.ValidationError
		if errors.As(err, &ve) {
			return errors.New(roleschema.ErrorText(ve))
		}
		return err
	}
	return nil
}
