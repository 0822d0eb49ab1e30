package jsrt

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/uncaged/workflow/engine/canonyaml"
	"github.com/uncaged/workflow/engine/node"
	"github.com/uncaged/workflow/engine/workflow"
	"github.com/uncaged/workflow/shared/testkit"
)

func TestLinearFlow(t *testing.T) {
	t.Parallel()
	b := loadTestdata(t, "linear.esm.js")
	h := newFakeHost(t)
	outs, done, err := drive(t, b, h, threadFor(b, "build a thing"))
	if err != nil {
		t.Fatal(err)
	}
	if got := roles(outs); got != "planner,coder,reviewer" {
		t.Fatalf("roles = %s", got)
	}
	if *done != (workflow.Completion{ReturnCode: 0, Summary: "completed: moderator returned END"}) {
		t.Fatalf("completion = %+v", done)
	}
	wantMeta := []string{
		`{"plan":"plan for: build a thing","prompt":"You plan."}`,
		`{"diff":"diff after planner","n":1}`,
		`{"approved":true,"seen":2}`,
	}
	for i, o := range outs {
		j, err := o.Meta.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		if string(j) != wantMeta[i] {
			t.Errorf("step %d meta = %s, want %s", i, j, wantMeta[i])
		}
		// The step's content is JSON.stringify(meta) in a content node
		// with no refs, exactly as the original stores it.
		want, _ := node.NewContent(wantMeta[i], nil).Marshal()
		got, err := h.store.Get(o.ContentHash)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("step %d content = %q, want %q", i, got, want)
		}
		if !reflect.DeepEqual(o.Refs, []string{o.ContentHash}) || o.ChildThread != "" {
			t.Errorf("step %d refs = %v childThread = %q", i, o.Refs, o.ChildThread)
		}
	}

	d := b.Descriptor()
	if d.Description != "Plan, code, review." || len(d.Roles) != 3 || d.Roles[0].Name != "planner" || d.Roles[2].Name != "reviewer" {
		t.Fatalf("descriptor = %+v", d)
	}
	if d.Roles[1].SystemPrompt != "You code." {
		t.Errorf("systemPrompt = %q", d.Roles[1].SystemPrompt)
	}
	if _, has := d.Roles[0].Schema.Get("$schema"); has {
		t.Errorf("$schema was not stripped: %v", d.Roles[0].Schema)
	}
	if len(d.Graph.Edges) != 4 || d.Graph.Edges[0].From != node.RoleStart || d.Graph.Edges[3].To != node.RoleEnd || d.Graph.Edges[0].ConditionDescription != nil {
		t.Errorf("edges = %+v", d.Graph.Edges)
	}
	y, err := d.MarshalYAML()
	if err != nil {
		t.Fatal(err)
	}
	back, err := workflow.ParseDescriptorYAML(y)
	if err != nil || !reflect.DeepEqual(back, d) {
		t.Fatalf("sidecar round trip: %v\n%s", err, y)
	}
}

func TestReviewLoop(t *testing.T) {
	t.Parallel()
	b := loadTestdata(t, "review_loop.esm.js")
	outs, done, err := drive(t, b, newFakeHost(t), threadFor(b, "fix the bug"))
	if err != nil {
		t.Fatal(err)
	}
	if got := roles(outs); got != "coder,reviewer,coder,reviewer,coder,reviewer" {
		t.Fatalf("roles = %s", got)
	}
	for i, want := range []bool{false, false, true} {
		v, _ := outs[2*i+1].Meta.Get("approved")
		if v != want {
			t.Errorf("review %d approved = %v", i, v)
		}
	}
	if done.ReturnCode != 0 || done.Summary != "completed: moderator returned END" {
		t.Fatalf("completion = %+v", done)
	}
	var named *workflow.Edge
	for i, e := range b.Descriptor().Graph.Edges {
		if e.Condition == "approved" {
			named = &b.Descriptor().Graph.Edges[i]
		}
	}
	if named == nil || named.From != "reviewer" || named.To != node.RoleEnd || named.ConditionDescription == nil || *named.ConditionDescription != "The reviewer approved the change" {
		t.Fatalf("named edge = %+v", named)
	}
}

func TestResumeFromSteps(t *testing.T) {
	t.Parallel()
	// A resumed thread (or a fork) starts with steps already done; the
	// moderator continues from the last one.
	b := loadTestdata(t, "linear.esm.js")
	h := newFakeHost(t)
	th := threadFor(b, "resume")
	th.Steps = []workflow.RoleStep{
		{Role: "planner", Meta: canonyaml.Map{{Key: "plan", Value: "p"}}, ContentHash: "0000000000000", Refs: []string{}, Timestamp: 1},
		{Role: "coder", Meta: canonyaml.Map{{Key: "diff", Value: "d"}}, ContentHash: "0000000000000", Refs: []string{}, Timestamp: 2},
	}
	outs, done, err := drive(t, b, h, th)
	if err != nil {
		t.Fatal(err)
	}
	if roles(outs) != "reviewer" || done.ReturnCode != 0 {
		t.Fatalf("roles = %s, completion = %+v", roles(outs), done)
	}
	if seen, _ := outs[0].Meta.Get("seen"); seen != float64(2) {
		t.Fatalf("reviewer saw %v steps", seen)
	}
}

func TestRoleThrowsMidRun(t *testing.T) {
	t.Parallel()
	b := loadTestdata(t, "throws.esm.js")
	h := newFakeHost(t)
	outs, _, err := drive(t, b, h, threadFor(b, "the prompt"))
	if len(outs) != 1 || outs[0].Role != "first" {
		t.Fatalf("outputs before the throw: %s", roles(outs))
	}
	if err == nil {
		t.Fatal("no error")
	}
	line := lineOf(t, "throws.esm.js", "throw new Error(`second role exploded")
	for _, want := range []string{"Error: second role exploded on the prompt", fmt.Sprintf("throws.esm.js:%d:", line)} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
	t.Logf("error: %v\nlog: %s", err, h.logged("ERROR"))
	var je *JSError
	if !errors.As(err, &je) {
		t.Fatalf("error is not a *JSError: %T", err)
	}
	logs := h.logged("ERROR")
	if len(logs) != 1 || !strings.Contains(logs[0], "second role exploded") || !strings.Contains(logs[0], "at ") {
		t.Fatalf("ERROR log = %q", logs)
	}
}

func TestErrorIsSticky(t *testing.T) {
	t.Parallel()
	b := loadTestdata(t, "async_errors.esm.js")
	h := newFakeHost(t)
	ctx := context.Background()
	r, err := b.Start(ctx, threadFor(b, "throwString"), h)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r.Close() }()
	_, _, err1 := r.Next(ctx)
	_, _, err2 := r.Next(ctx)
	if err1 == nil || err1 != err2 {
		t.Fatalf("errors: %v / %v", err1, err2)
	}
}

func TestAsyncErrors(t *testing.T) {
	t.Parallel()
	b := loadTestdata(t, "async_errors.esm.js")
	for _, c := range []struct {
		prompt string
		want   []string
		is     error
	}{
		{"timer", []string{"uncaught exception", "Error: thrown from a timer", "async_errors.esm.js:"}, nil},
		{"rejection", []string{"TypeError: rejected later", "async_errors.esm.js:"}, nil},
		// A thrown non-Error has no stack; as in Node, only the value is known.
		{"throwString", []string{"a bare string"}, nil},
		{"stall", []string{"workflow stalled"}, ErrStalled},
	} {
		t.Run(c.prompt, func(t *testing.T) {
			h := newFakeHost(t)
			_, _, err := drive(t, b, h, threadFor(b, c.prompt))
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			t.Logf("error: %v", err)
			if c.is != nil && !errors.Is(err, c.is) {
				t.Errorf("error %v is not %v", err, c.is)
			}
			if len(h.logged("ERROR")) != 1 {
				t.Errorf("ERROR log: %q", h.logged("ERROR"))
			}
		})
	}
}

func TestKillInfiniteLoop(t *testing.T) {
	t.Parallel()
	b := loadTestdata(t, "spin.esm.js")
	h := newFakeHost(t)
	r, err := b.Start(context.Background(), threadFor(b, "spin"), h)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r.Close() }()
	if out, _, err := r.Next(context.Background()); err != nil || out.Role != "warmup" {
		t.Fatalf("warmup: %v %v", out, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, _, err := r.Next(ctx)
		done <- err
	}()
	waitSpinning(t, h)
	cancelledAt := time.Now()
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
		t.Logf("while(true){} stopped %v after cancel", time.Since(cancelledAt))
	case <-time.After(testkit.WaitBound):
		t.Fatal("Next did not return after cancel")
	}
	if _, _, err := r.Next(context.Background()); err == nil {
		t.Fatal("a killed run stepped again")
	}
	if len(h.logged("ERROR")) != 0 {
		t.Errorf("a kill is not an error of the bundle: %q", h.logged("ERROR"))
	}
}

func TestCloseInterruptsNext(t *testing.T) {
	t.Parallel()
	b := loadTestdata(t, "spin.esm.js")
	h := newFakeHost(t)
	r, err := b.Start(context.Background(), threadFor(b, "spin"), h)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := r.Next(context.Background()); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, _, err := r.Next(context.Background())
		done <- err
	}()
	waitSpinning(t, h)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, errClosed) {
			t.Fatalf("err = %v", err)
		}
	case <-time.After(testkit.WaitBound):
		t.Fatal("Close did not stop Next")
	}
}

func TestAlreadyCancelledContext(t *testing.T) {
	t.Parallel()
	b := loadTestdata(t, "linear.esm.js")
	r, err := b.Start(context.Background(), threadFor(b, "x"), newFakeHost(t))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r.Close() }()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := r.Next(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
}

func TestRuntimeAPI(t *testing.T) {
	t.Parallel()
	b := loadTestdata(t, "runtime_api.esm.js")
	h := newFakeHost(t)
	th := threadFor(b, "old style")
	th.Depth = 2
	th.Start.ParentState = "1111111111111"
	th.Steps = []workflow.RoleStep{{Role: "earlier", Meta: canonyaml.Map{{Key: "n", Value: float64(7)}}, ContentHash: "0000000000000", Refs: []string{}, Timestamp: 5}}
	outs, done, err := drive(t, b, h, th)
	if err != nil {
		t.Fatal(err)
	}
	if len(outs) != 1 || done.ReturnCode != 0 || done.Summary != "probed" {
		t.Fatalf("outs = %d, completion = %+v", len(outs), done)
	}
	m := outs[0].Meta
	get := func(k string) any { v, _ := m.Get(k); return v }
	wantStored, _ := node.NewContent("prompt was: old style", nil).Marshal()
	checks := map[string]any{
		"stored":           string(wantStored),
		"missing":          nil,
		"listed":           true,
		"extractError":     errNoExtractModel.Error(),
		"extractedSchema":  `{"type":"object","properties":{"a":{"type":"string"}}}`,
		"extractedPayload": "prompt was: old style",
		"extractedRefs":    float64(0),
		"threadId":         th.ThreadID,
		"depth":            float64(2),
		"bundleHash":       b.Hash(),
		"startRole":        "__start__",
		"parentState":      "1111111111111",
		"priorSteps":       []any{"earlier:7"},
		"keys":             []any{"threadId", "depth", "bundleHash", "start", "steps"},
	}
	for k, want := range checks {
		if got := get(k); !reflect.DeepEqual(got, want) {
			t.Errorf("%s = %#v, want %#v", k, got, want)
		}
	}
	// Meta keeps JavaScript's key order.
	if m[len(m)-2].Key != "z" || m[len(m)-1].Key != "a" {
		t.Errorf("meta key order: %v", m)
	}
	// refs default to [] and childThread to "" when the bundle omits them.
	if outs[0].ChildThread != "" || len(outs[0].Refs) != 1 {
		t.Errorf("refs %v childThread %q", outs[0].Refs, outs[0].ChildThread)
	}
}

func TestBadYields(t *testing.T) {
	t.Parallel()
	b := loadTestdata(t, "bad_yield.esm.js")
	for prompt, want := range map[string]string{
		"notObject":     "the workflow yielded number 42; a step must be a RoleOutput",
		"emptyRole":     "yielded RoleOutput.role must be a non-empty string",
		"numberRole":    "yielded RoleOutput.role must be a non-empty string, got number 7",
		"badHash":       `yielded RoleOutput.contentHash "not a hash" is not a CAS hash`,
		"missingBlob":   "yielded RoleOutput.contentHash 0000000000000 is not in the CAS",
		"arrayMeta":     "yielded RoleOutput.meta must be a plain object, got an array",
		"noMeta":        "yielded RoleOutput.meta must be a plain object, got undefined",
		"badRefs":       `yielded RoleOutput.refs[0] "nope" is not a CAS hash`,
		"refsNotArray":  "yielded RoleOutput.refs must be an array of CAS hashes",
		"badChild":      "yielded RoleOutput.childThread must be a state hash or null, got number 5",
		"badCompletion": "the completion's returnCode must be an integer, got string zero",
		"noCompletion":  "run must return a completion {returnCode, summary}, got undefined",
	} {
		t.Run(prompt, func(t *testing.T) {
			_, _, err := drive(t, b, newFakeHost(t), threadFor(b, prompt))
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("err = %v, want it to contain %q", err, want)
			}
		})
	}
}

func TestChildWorkflow(t *testing.T) {
	t.Parallel()
	parent := loadTestdata(t, "child_workflow.esm.js")
	child := loadTestdata(t, "linear.esm.js")
	h := newFakeHost(t)
	h.child = func(ctx context.Context, name, prompt string) (workflow.ChildResult, error) {
		outs, done, err := drive(t, child, h, threadFor(child, prompt))
		if err != nil {
			return workflow.ChildResult{}, err
		}
		end, err := h.store.Put(fmt.Sprintf("end of %s after %d steps", name, len(outs)))
		if err != nil {
			return workflow.ChildResult{}, err
		}
		return workflow.ChildResult{ReturnCode: done.ReturnCode, Summary: done.Summary, RootHash: end, ThreadID: "child-thread"}, nil
	}
	outs, done, err := drive(t, parent, h, threadFor(parent, "delegate this"))
	if err != nil {
		t.Fatal(err)
	}
	if roles(outs) != "delegate" || done.ReturnCode != 0 {
		t.Fatalf("roles %s completion %+v", roles(outs), done)
	}
	if len(h.calls) != 1 || h.calls[0] != (childCall{"linear", "delegate this"}) {
		t.Fatalf("RunChild calls: %+v", h.calls)
	}
	meta, _ := outs[0].Meta.MarshalJSON()
	want := fmt.Sprintf(`{"returnCode":0,"summary":"completed: moderator returned END","rootHash":"%s","threadId":"child-thread"}`, outs[0].ChildThread)
	if string(meta) != want || outs[0].ChildThread == "" {
		t.Fatalf("meta = %s, childThread = %q", meta, outs[0].ChildThread)
	}

	h2 := newFakeHost(t) // no child runner: RunChild fails with the depth limit
	_, _, err = drive(t, parent, h2, threadFor(parent, "too deep"))
	if err == nil || !strings.Contains(err.Error(), `child workflow "linear" failed: workflow adapter depth limit exceeded`) {
		t.Fatalf("err = %v", err)
	}
}

func TestUnhandledRejectionIsLogged(t *testing.T) {
	t.Parallel()
	src := `
export const descriptor = { description: "d", roles: {}, graph: { edges: [] } };
export const run = async function* (thread, runtime) {
  Promise.reject(new Error("nobody listens"));
  Promise.reject(new Error("handled later")).catch(() => {});
  const h = await runtime.cas.put("x");
  yield { role: "r", contentHash: h, meta: {} };
  return { returnCode: 0, summary: "" };
};`
	b, err := Load([]byte(src), "unhandled.esm.js", Options{})
	if err != nil {
		t.Fatal(err)
	}
	h := newFakeHost(t)
	if _, _, err := drive(t, b, h, threadFor(b, "")); err != nil {
		t.Fatal(err)
	}
	logs := h.logged("CONSOLE")
	if len(logs) != 1 || !strings.HasPrefix(logs[0], "Unhandled promise rejection: Error: nobody listens") || !strings.Contains(logs[0], "unhandled.esm.js:4:") {
		t.Fatalf("CONSOLE = %q", logs)
	}
}

func TestConcurrentRuns(t *testing.T) {
	t.Parallel()
	b := loadTestdata(t, "review_loop.esm.js")
	errs := make(chan error, 8)
	for i := 0; i < 8; i++ {
		go func() {
			h := newFakeHost(t)
			outs, done, err := drive(t, b, h, threadFor(b, "parallel"))
			if err == nil && (len(outs) != 6 || done.ReturnCode != 0) {
				err = fmt.Errorf("%d outputs, %+v", len(outs), done)
			}
			errs <- err
		}()
	}
	for i := 0; i < 8; i++ {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

func TestRunLifecycle(t *testing.T) {
	t.Parallel()
	b := loadTestdata(t, "linear.esm.js")
	h := newFakeHost(t)
	ctx := context.Background()
	r, err := b.Start(ctx, threadFor(b, "x"), h)
	if err != nil {
		t.Fatal(err)
	}
	for {
		_, done, err := r.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if done != nil {
			break
		}
	}
	if _, _, err := r.Next(ctx); err == nil || !strings.Contains(err.Error(), "already completed") {
		t.Fatalf("Next after completion: %v", err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, _, err := r.Next(ctx); !errors.Is(err, errClosed) {
		t.Fatalf("Next after Close: %v", err)
	}
	// Closing a run that never stepped is fine too.
	r2, err := b.Start(ctx, threadFor(b, "y"), h)
	if err != nil {
		t.Fatal(err)
	}
	if err := r2.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestStartIsInterruptible(t *testing.T) {
	t.Parallel()
	// The top level spins only when the run's environment asks for it, so
	// Load (which sees no such variable) succeeds.
	src := `
if ("JSRT_SPIN_AT_START" in process.env) { for (;;) {} }
export const run = async function* () {};
export const descriptor = { description: "d", roles: {}, graph: { edges: [] } };`
	b, err := Load([]byte(src), "startspin.esm.js", Options{LookupEnv: func(string) (string, bool) { return "", false }})
	if err != nil {
		t.Fatal(err)
	}
	h := newFakeHost(t)
	h.env["JSRT_SPIN_AT_START"] = "1"
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	// The spin never ends: that Start returns the context's error at all
	// is the interrupt working.
	r, err := b.Start(ctx, threadFor(b, ""), h)
	if r != nil || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Start = %v, %v", r, err)
	}
}

func TestStartErrors(t *testing.T) {
	t.Parallel()
	src := `
export const descriptor = { description: "d", roles: {}, graph: { edges: [] } };
export const run = () => 42;`
	b, err := Load([]byte(src), "notgen.esm.js", Options{})
	if err != nil {
		t.Fatal(err)
	}
	h := newFakeHost(t)
	_, err = b.Start(context.Background(), threadFor(b, ""), h)
	if err == nil || !strings.Contains(err.Error(), "run(thread, runtime) must return an async generator") {
		t.Fatalf("err = %v", err)
	}
	if _, err := b.Start(context.Background(), threadFor(b, ""), nil); err == nil {
		t.Fatal("Start without a host succeeded")
	}
}

// waitSpinning waits until spin.esm.js, run by h, has entered its endless
// loop (it logs just before), so what interrupts it meets running code.
func waitSpinning(t *testing.T, h *fakeHost) {
	t.Helper()
	testkit.WaitUntil(t, "the bundle to spin", func() bool { return len(h.logged("CONSOLE")) > 0 })
}
