package yamlwf

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/uncaged/workflow/engine/agents"
	"github.com/uncaged/workflow/engine/canonyaml"
	"github.com/uncaged/workflow/engine/cas"
	"github.com/uncaged/workflow/engine/node"
	"github.com/uncaged/workflow/engine/workflow"
)

// testHost is a workflow.Host over a real CAS in a temporary directory.
type testHost struct{ store *cas.Store }

func newTestHost(t *testing.T) *testHost { return &testHost{store: cas.Open(t.TempDir())} }

func (h *testHost) CAS() *cas.Store    { return h.store }
func (h *testHost) Log(string, string) {}
func (h *testHost) Getenv(string) string {
	return ""
}
func (h *testHost) RunChild(context.Context, string, string) (workflow.ChildResult, error) {
	return workflow.ChildResult{}, errors.New("no children here")
}
func (h *testHost) Extract(context.Context, []byte, string) (workflow.ExtractResult, error) {
	return workflow.ExtractResult{}, errors.New("no model here")
}

// agentFunc is a test agent: a function of the call.
type agentFunc func(ctx context.Context, call agents.Call) (agents.Result, error)

func (f agentFunc) Run(ctx context.Context, call agents.Call) (agents.Result, error) {
	return f(ctx, call)
}

// factory returns agents by the spec's command, so a test's YAML can name
// which fake each role uses.
func factory(fakes map[string]agentFunc) AgentFactory {
	return func(s agents.Spec) (agents.Agent, error) {
		f, ok := fakes[s.Command]
		if !ok {
			return nil, errors.New("no fake agent " + s.Command)
		}
		return f, nil
	}
}

func metaOf(t *testing.T, js string) canonyaml.Map {
	t.Helper()
	v, err := canonyaml.FromJSON([]byte(js))
	if err != nil {
		t.Fatal(err)
	}
	return v.(canonyaml.Map)
}

func step(role, metaJSON string) workflow.RoleStep {
	v, err := canonyaml.FromJSON([]byte(metaJSON))
	if err != nil {
		panic(err)
	}
	return workflow.RoleStep{Role: role, Meta: v.(canonyaml.Map)}
}

func TestRoutingTable(t *testing.T) {
	t.Parallel()
	w, err := Load([]byte(`version: 1
description: routing
agent: {type: exec, command: x}
roles:
  planner: {description: d, prompt: p}
  coder: {description: d, prompt: p}
  reviewer: {description: d, prompt: p}
  tester: {description: d, prompt: p}
  stray: {description: d, prompt: p}
graph:
  __start__: planner
  planner: {aborted: __end__, FALLBACK: coder}
  coder: reviewer
  reviewer: {approved: tester, rejected: coder}
  tester: {passed: stray}
`), Options{})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		steps []workflow.RoleStep
		want  string
	}{
		{"no steps: __start__'s entry", nil, "planner"},
		{"status matches a key", []workflow.RoleStep{step("planner", `{"status":"aborted"}`)}, node.RoleEnd},
		{"no match: FALLBACK", []workflow.RoleStep{step("planner", `{"status":"planned"}`)}, "coder"},
		{"no status: FALLBACK", []workflow.RoleStep{step("planner", `{}`)}, "coder"},
		{"non-string status: FALLBACK", []workflow.RoleStep{step("planner", `{"status":true}`)}, "coder"},
		{"numeric status never matches a key", []workflow.RoleStep{step("tester", `{"status":1}`)}, `role "tester" returned status 1, which is not a string, and no route of graph.tester matches it (keys: passed; no FALLBACK)`},
		{"unconditional", []workflow.RoleStep{step("coder", `{"status":"whatever"}`)}, "reviewer"},
		{"keyed, approved", []workflow.RoleStep{step("coder", `{}`), step("reviewer", `{"status":"approved"}`)}, "tester"},
		{"keyed, rejected loops back", []workflow.RoleStep{step("reviewer", `{"status":"rejected"}`)}, "coder"},
		{"no match and no FALLBACK: an error naming the status", []workflow.RoleStep{step("reviewer", `{"status":"unsure"}`)}, `role "reviewer" returned status "unsure", and no route of graph.reviewer matches it (keys: approved, rejected; no FALLBACK)`},
		{"no status and no FALLBACK: an error", []workflow.RoleStep{step("reviewer", `{}`)}, `role "reviewer" returned no status, and no route of graph.reviewer matches it (keys: approved, rejected; no FALLBACK)`},
		{"only the last step counts", []workflow.RoleStep{step("reviewer", `{"status":"approved"}`), step("tester", `{"status":"passed"}`)}, "stray"},
		{"role without an entry: end", []workflow.RoleStep{step("stray", `{"status":"approved"}`)}, node.RoleEnd},
		{"a step of a role the graph lacks (a fork's __fork__): end", []workflow.RoleStep{step("__fork__", `{}`)}, node.RoleEnd},
	}
	for _, c := range cases {
		got, err := w.Next(c.steps)
		if err != nil {
			var re *RouteError
			if !errors.As(err, &re) {
				t.Errorf("%s: error %v is not a *RouteError", c.name, err)
			}
			got = err.Error()
		}
		if got != c.want {
			t.Errorf("%s: next = %q, want %q", c.name, got, c.want)
		}
	}
}

const loopYAML = `version: 1
description: Code until the reviewer approves
agents:
  coder: {type: exec, command: coder}
  reviewer: {type: exec, command: reviewer}
roles:
  coder:
    description: Writes code
    prompt: You write code.
    agent: coder
    output:
      type: object
      properties:
        summary: {type: string}
      required: [summary]
  reviewer:
    description: Reviews code
    prompt: You review code.
    agent: reviewer
    output:
      type: object
      properties:
        status: {enum: [approved, rejected]}
        reviewed: {type: string, casRef: true}
      required: [status, reviewed]
graph:
  __start__: coder
  coder: reviewer
  reviewer: {approved: __end__, rejected: coder}
`

// loopFakes: the reviewer rejects the first round and approves the second,
// pointing at the content of the coder's step it reviewed.
func loopFakes(t *testing.T, calls *[]agents.Call) map[string]agentFunc {
	return map[string]agentFunc{
		"coder": func(_ context.Context, c agents.Call) (agents.Result, error) {
			*calls = append(*calls, c)
			return agents.Result{Meta: metaOf(t, `{"summary":"round `+string(rune('0'+len(c.Thread.Steps)/2+1))+`"}`)}, nil
		},
		"reviewer": func(_ context.Context, c agents.Call) (agents.Result, error) {
			*calls = append(*calls, c)
			last := c.Thread.Steps[len(c.Thread.Steps)-1]
			status := "rejected"
			if len(c.Thread.Steps) > 2 {
				status = "approved"
			}
			return agents.Result{Meta: canonyaml.Map{{Key: "status", Value: status}, {Key: "reviewed", Value: last.ContentHash}}}, nil
		},
	}
}

func startThread(prompt string) workflow.ThreadContext {
	return workflow.ThreadContext{ThreadID: "T", Start: workflow.StartStep{Role: node.RoleStart, Content: prompt}}
}

func TestRunLoopStoresStepsLikeCreateWorkflow(t *testing.T) {
	t.Parallel()
	var calls []agents.Call
	w, err := Load([]byte(loopYAML), Options{NewAgent: factory(loopFakes(t, &calls))})
	if err != nil {
		t.Fatal(err)
	}
	host := newTestHost(t)
	r, err := w.Start(context.Background(), startThread("build it"), host)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r.Close() }()
	var outs []*workflow.Output
	for {
		out, done, err := r.Next(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if done != nil {
			if *done != (workflow.Completion{ReturnCode: 0, Summary: "completed: moderator returned END"}) {
				t.Fatalf("done = %+v", done)
			}
			break
		}
		outs = append(outs, out)
	}
	var roles []string
	for _, o := range outs {
		roles = append(roles, o.Role)
	}
	if strings.Join(roles, ",") != "coder,reviewer,coder,reviewer" {
		t.Fatalf("roles = %v", roles)
	}
	for i, o := range outs {
		n, err := host.store.GetNode(o.ContentHash)
		if err != nil {
			t.Fatal(err)
		}
		c, ok := n.(node.Content)
		if !ok {
			t.Fatalf("step %d: node %T", i, n)
		}
		metaJSON, _ := o.Meta.MarshalJSON()
		if c.Payload != string(metaJSON) {
			t.Fatalf("step %d: payload %q, want the meta's JSON %s", i, c.Payload, metaJSON)
		}
		if o.Role == "reviewer" {
			reviewed := outs[i-1].ContentHash
			if strings.Join(c.Refs, ",") != reviewed || strings.Join(o.Refs, ",") != reviewed+","+o.ContentHash {
				t.Fatalf("step %d: node refs %v, output refs %v; want the casRef %s first", i, c.Refs, o.Refs, reviewed)
			}
		} else if len(c.Refs) != 0 || len(o.Refs) != 1 || o.Refs[0] != o.ContentHash {
			t.Fatalf("step %d: node refs %v, output refs %v", i, c.Refs, o.Refs)
		}
	}
	if payload := outs[1]; !strings.HasPrefix(mustJSON(payload.Meta), `{"status":"rejected","reviewed":"`) {
		t.Fatalf("reviewer meta = %s", mustJSON(payload.Meta))
	}
	// What each agent was told.
	if len(calls) != 4 {
		t.Fatalf("%d calls", len(calls))
	}
	c := calls[3]
	if c.Role != "reviewer" || c.SystemPrompt != "You review code." || len(c.Thread.Steps) != 3 || c.Thread.Start.Content != "build it" || c.Host == nil {
		t.Fatalf("call = %+v", c)
	}
	var schema map[string]any
	if err := json.Unmarshal(c.Schema, &schema); err != nil || schema["type"] != "object" {
		t.Fatalf("schema = %s (%v)", c.Schema, err)
	}
	if _, err := c.Host.ResolveModel("default"); err == nil {
		t.Fatal("a host without models resolved one")
	}
	if _, _, err := r.Next(context.Background()); err == nil {
		t.Fatal("Next after completion succeeded")
	}
}

func mustJSON(m canonyaml.Map) string {
	b, err := m.MarshalJSON()
	if err != nil {
		panic(err)
	}
	return string(b)
}

// runOne loads a one-role workflow whose role runs fn and returns Next's
// outcome.
func runOne(t *testing.T, output string, fn agentFunc, ctx context.Context) (*workflow.Output, error) {
	t.Helper()
	src := "version: 1\ndescription: d\nagent: {type: exec, command: fn}\nroles:\n  only:\n    description: d\n    prompt: p\n" + output + "graph: {__start__: only}\n"
	w, err := Load([]byte(src), Options{NewAgent: factory(map[string]agentFunc{"fn": fn})})
	if err != nil {
		t.Fatal(err)
	}
	r, err := w.Start(ctx, startThread("x"), newTestHost(t))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r.Close() }()
	out, _, err := r.Next(ctx)
	return out, err
}

func TestMetaIsValidatedAgainstOutput(t *testing.T) {
	t.Parallel()
	schema := "    output:\n      type: object\n      properties: {status: {enum: [approved]}}\n      required: [status]\n"
	_, err := runOne(t, schema, func(context.Context, agents.Call) (agents.Result, error) {
		return agents.Result{Meta: canonyaml.Map{{Key: "status", Value: "maybe"}}}, nil
	}, context.Background())
	if err == nil || !strings.Contains(err.Error(), `role "only": meta does not match the role's output schema`) || !strings.Contains(err.Error(), "approved") {
		t.Fatalf("err = %v", err)
	}
	_, err = runOne(t, schema, func(context.Context, agents.Call) (agents.Result, error) {
		return agents.Result{}, nil // nil meta is {}: status is missing
	}, context.Background())
	if err == nil || !strings.Contains(err.Error(), "status") {
		t.Fatalf("err = %v", err)
	}
}

func TestAgentErrorFailsTheStep(t *testing.T) {
	t.Parallel()
	_, err := runOne(t, "", func(context.Context, agents.Call) (agents.Result, error) {
		return agents.Result{}, errors.New("exit status 3: boom")
	}, context.Background())
	if err == nil || err.Error() != `role "only": exit status 3: boom` {
		t.Fatalf("err = %v", err)
	}
}

func TestAgentFactoryErrorFailsTheStep(t *testing.T) {
	t.Parallel()
	src := "version: 1\ndescription: d\nagent: {type: exec, command: missing}\nroles:\n  only: {description: d, prompt: p}\ngraph: {__start__: only}\n"
	w, err := Load([]byte(src), Options{NewAgent: factory(nil)})
	if err != nil {
		t.Fatal(err)
	}
	r, _ := w.Start(context.Background(), startThread("x"), newTestHost(t))
	if _, _, err := r.Next(context.Background()); err == nil || !strings.Contains(err.Error(), "no fake agent missing") {
		t.Fatalf("err = %v", err)
	}
}

func TestBadCASRefFailsTheStep(t *testing.T) {
	t.Parallel()
	schema := "    output:\n      type: object\n      properties: {file: {type: string, casRef: true}}\n"
	_, err := runOne(t, schema, func(context.Context, agents.Call) (agents.Result, error) {
		return agents.Result{Meta: canonyaml.Map{{Key: "file", Value: "../../etc/passwd"}}}, nil
	}, context.Background())
	if err == nil || !strings.Contains(err.Error(), "casRef that is not a CAS hash") {
		t.Fatalf("err = %v", err)
	}
}

func TestKillCancelsTheRunningAgent(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan struct{})
	go func() { <-started; cancel() }()
	_, err := runOne(t, "", func(ctx context.Context, _ agents.Call) (agents.Result, error) {
		close(started)
		<-ctx.Done() // an agent that only stops when cancelled
		return agents.Result{Meta: canonyaml.Map{}}, nil
	}, ctx)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	// Cancelled before the step: no agent runs at all.
	ran := false
	_, err = runOne(t, "", func(context.Context, agents.Call) (agents.Result, error) {
		ran = true
		return agents.Result{}, nil
	}, ctx)
	if !errors.Is(err, context.Canceled) || ran {
		t.Fatalf("err = %v, ran = %v", err, ran)
	}
}

func TestStartRequiresStartRole(t *testing.T) {
	t.Parallel()
	w, err := Load([]byte(loopYAML), Options{})
	if err != nil {
		t.Fatal(err)
	}
	tc := startThread("x")
	tc.Start.Role = "coder"
	if _, err := w.Start(context.Background(), tc, newTestHost(t)); err == nil || err.Error() != "workflow loop expected start role to be __start__" {
		t.Fatalf("err = %v", err)
	}
}

// TestResumedThreadContinuesFromItsSteps: a fork or resumed thread starts
// with steps already done, and routing continues from the last one.
func TestResumedThreadContinuesFromItsSteps(t *testing.T) {
	t.Parallel()
	var calls []agents.Call
	w, err := Load([]byte(loopYAML), Options{NewAgent: factory(loopFakes(t, &calls))})
	if err != nil {
		t.Fatal(err)
	}
	tc := startThread("x")
	tc.Steps = []workflow.RoleStep{step("coder", `{"summary":"a"}`), step("reviewer", `{"status":"rejected","reviewed":"SSVQ0RZ55P9Y4"}`)}
	r, err := w.Start(context.Background(), tc, newTestHost(t))
	if err != nil {
		t.Fatal(err)
	}
	out, _, err := r.Next(context.Background())
	if err != nil || out.Role != "coder" || len(calls[0].Thread.Steps) != 2 {
		t.Fatalf("out = %+v, err = %v", out, err)
	}
	out, _, err = r.Next(context.Background())
	if err != nil || out.Role != "reviewer" || mustJSON(out.Meta)[:21] != `{"status":"approved",` {
		t.Fatalf("out = %+v, err = %v", out, err)
	}
	if len(tc.Steps) != 2 {
		t.Fatal("the caller's thread context was modified")
	}
}

func TestDescriptor(t *testing.T) {
	t.Parallel()
	w, err := Load([]byte(validYAML), Options{})
	if err != nil {
		t.Fatal(err)
	}
	d := w.Descriptor()
	data, err := d.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	want := `{"description":"Plan, code, review","roles":{` +
		`"planner":{"description":"Breaks the task into phases","systemPrompt":"You plan.\n","schema":{"type":"object"}},` +
		`"coder":{"description":"Writes the code","systemPrompt":"You code.","schema":{"type":"object"}},` +
		`"reviewer":{"description":"Reviews the code","systemPrompt":"You review.","schema":{"type":"object","properties":{"status":{"enum":["approved","rejected"]}},"required":["status"]}}},` +
		`"graph":{"edges":[` +
		`{"from":"__start__","to":"planner","condition":"FALLBACK","conditionDescription":null},` +
		`{"from":"planner","to":"coder","condition":"FALLBACK","conditionDescription":null},` +
		`{"from":"coder","to":"reviewer","condition":"FALLBACK","conditionDescription":null},` +
		`{"from":"reviewer","to":"__end__","condition":"approved","conditionDescription":"meta.status == \"approved\""},` +
		`{"from":"reviewer","to":"coder","condition":"rejected","conditionDescription":"meta.status == \"rejected\""},` +
		`{"from":"reviewer","to":"__end__","condition":"FALLBACK","conditionDescription":null}]}}`
	if string(data) != want {
		t.Fatalf("descriptor\n got %s\nwant %s", data, want)
	}
	sidecar, err := d.MarshalYAML()
	if err != nil {
		t.Fatal(err)
	}
	back, err := workflow.ParseDescriptorYAML(sidecar)
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := back.MarshalJSON(); string(again) != want {
		t.Fatalf("sidecar round trip\n got %s\nwant %s", again, want)
	}
}

// TestFallbackEdgeComesLast: FALLBACK is tried after every status, so the
// graph shows it last wherever it was written.
func TestFallbackEdgeComesLast(t *testing.T) {
	t.Parallel()
	w, err := Load([]byte(`version: 1
description: d
agent: {type: exec, command: x}
roles:
  a: {description: d, prompt: p}
graph:
  __start__: a
  a: {FALLBACK: __end__, "say \"hi\"": a}
`), Options{})
	if err != nil {
		t.Fatal(err)
	}
	edges := w.Descriptor().Graph.Edges
	if len(edges) != 3 || edges[1].Condition != `say "hi"` || *edges[1].ConditionDescription != `meta.status == "say \"hi\""` || edges[2].Condition != "FALLBACK" || edges[2].ConditionDescription != nil {
		t.Fatalf("edges = %+v", edges)
	}
}
