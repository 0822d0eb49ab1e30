package jsrt

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"

	"github.com/dop251/goja"

	"github.com/uncaged/workflow/engine/canonyaml"
	"github.com/uncaged/workflow/engine/ids"
	"github.com/uncaged/workflow/engine/membudget"
	"github.com/uncaged/workflow/engine/workflow"
)

// errClosed is returned by a run used after Close.
var errClosed = errors.New("workflow run is closed")

// run is one execution of a bundle: a fresh runtime, the generator run
// returned, and the event loop that drives it.
type run struct {
	mu     sync.Mutex // held while JavaScript runs; see loop
	e      *jsEnv
	gen    *goja.Object
	next   goja.Callable
	err    error // sticky: once failed, every Next returns it
	done   bool
	closed bool
}

var _ workflow.Run = (*run)(nil)

// Start evaluates the bundle in a fresh runtime and calls
// run(thread, runtime). The bundle's top level runs again here, now with
// the host available; the generator does not advance until Next. ctx
// bounds this evaluation only; each Next has its own.
func (b *Bundle) Start(ctx context.Context, thread workflow.ThreadContext, host workflow.Host) (workflow.Run, error) {
	if host == nil {
		return nil, errors.New("jsrt: Start needs a host")
	}
	e := newEnv(envConfig{host: host, bundleName: b.name, budget: hostBudget(host)})
	r := &run{e: e}
	err := e.loop.runUntil(ctx, func() error {
		exports, err := e.evaluate(b.prog)
		if err != nil {
			return err
		}
		runFn, ok := goja.AssertFunction(exports.Get("run"))
		if !ok {
			return errRunNotCallable
		}
		g, err := runFn(goja.Undefined(), e.threadToJS(thread), e.runtimeObject())
		if err != nil {
			return err
		}
		gen, ok := g.(*goja.Object)
		if ok {
			r.next, ok = goja.AssertFunction(gen.Get("next"))
		}
		if !ok {
			return fmt.Errorf("run(thread, runtime) must return an async generator (write `export const run = async function* (thread, runtime) { ... }`), got %s", describeJS(g))
		}
		r.gen = gen
		return nil
	}, func() bool { return true })
	if err != nil {
		err = r.failure(ctx, err, "workflow failed to start")
		e.close()
		return nil, err
	}
	return r, nil
}

// hostBudget is the memory budget of a run on host: the host's when it
// has one (membudget.Budgeted), else membudget.Resolve("").
func hostBudget(host workflow.Host) int64 {
	if b, ok := host.(membudget.Budgeted); ok {
		return b.MemoryBudget()
	}
	return membudget.Resolve("")
}

// Next resumes the generator and runs the event loop until the promise of
// gen.next() settles.
func (r *run) Next(ctx context.Context) (*workflow.Output, *workflow.Completion, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.closed:
		return nil, nil, errClosed
	case r.err != nil:
		return nil, nil, r.err
	case r.done:
		return nil, nil, errors.New("workflow run already completed")
	}
	l := r.e.loop
	var p *goja.Promise
	var result goja.Value
	err := l.runUntil(ctx, func() error {
		v, err := r.next(r.gen)
		if err != nil {
			return err
		}
		if pr, ok := v.Export().(*goja.Promise); ok {
			p = pr
		} else {
			result = v // a synchronous generator works too
		}
		return nil
	}, func() bool { return p == nil || p.State() != goja.PromiseStatePending })
	_ = l.guard(func() error { r.e.reportUnhandled(p); return nil })
	if err == nil && p != nil {
		if p.State() == goja.PromiseStateRejected {
			err = asRefusal(valueError(p.Result(), r.e.bundleName), p.Result())
		} else {
			result = p.Result()
		}
	}
	if err != nil {
		return nil, nil, r.fail(ctx, err)
	}
	var out *workflow.Output
	var done *workflow.Completion
	// Reading the result may run getters: still JavaScript, still on the loop.
	err = l.runUntil(ctx, func() error {
		var err error
		out, done, err = r.e.stepResult(result)
		return err
	}, func() bool { return true })
	if err != nil {
		return nil, nil, r.fail(ctx, err)
	}
	if done != nil {
		r.done = true
	}
	return out, done, nil
}

// fail records err as the run's outcome and stops what the run started.
func (r *run) fail(ctx context.Context, err error) error {
	r.err = r.failure(ctx, err, "workflow run failed")
	r.e.loop.kill()
	return r.err
}

// failure turns what stopped the loop into the error the caller sees and
// logs exceptions with their stack.
func (r *run) failure(ctx context.Context, err error, prefix string) error {
	var over *membudget.ExceededError
	if errors.As(err, &over) && ctx.Err() == nil {
		r.e.host.Log("ERROR", over.Error())
		return fmt.Errorf("%s: %w", prefix, over)
	}
	var ie *goja.InterruptedError
	if errors.Is(err, errKilled) || errors.As(err, &ie) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		if ctx.Err() != nil {
			return fmt.Errorf("workflow run killed: %w", ctx.Err())
		}
		return errClosed
	}
	err = exceptionError(err, r.e.bundleName)
	stack := err.Error()
	var je *JSError
	if errors.As(err, &je) && je.Stack != "" {
		stack = je.Stack
		var ue *uncaughtError
		if errors.As(err, &ue) {
			stack = "uncaught exception: " + stack
		}
	}
	r.e.host.Log("ERROR", stack)
	return fmt.Errorf("%s: %w", prefix, err)
}

// Close kills whatever the run still has going — JavaScript, timers,
// requests, child processes — and waits for its goroutines.
func (r *run) Close() error {
	r.e.loop.kill() // interrupts a Next in progress, so the lock frees up
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil
	}
	r.closed = true
	r.e.close()
	return nil
}

// stepResult reads an iterator result {value, done}: a RoleOutput while
// the generator runs, a WorkflowCompletion when it returns.
func (e *jsEnv) stepResult(v goja.Value) (*workflow.Output, *workflow.Completion, error) {
	obj, ok := v.(*goja.Object)
	if !ok {
		return nil, nil, fmt.Errorf("gen.next() resolved to %s, not an iterator result", describeJS(v))
	}
	value := obj.Get("value")
	if obj.Get("done").ToBoolean() {
		c, err := e.completion(value)
		return nil, c, err
	}
	out, err := e.output(value)
	return out, nil, err
}

func (e *jsEnv) output(v goja.Value) (*workflow.Output, error) {
	obj, ok := v.(*goja.Object)
	if !ok || obj.ClassName() == "Array" || obj.ClassName() == "Function" {
		return nil, fmt.Errorf("the workflow yielded %s; a step must be a RoleOutput {role, contentHash, meta, refs, childThread}", describeJS(v))
	}
	out := &workflow.Output{}
	role := obj.Get("role")
	if role == nil || !goja.IsString(role) || role.String() == "" {
		return nil, fmt.Errorf("yielded RoleOutput.role must be a non-empty string, got %s", describeJS(role))
	}
	out.Role = role.String()

	ch := obj.Get("contentHash")
	if ch == nil || !goja.IsString(ch) {
		return nil, fmt.Errorf("yielded RoleOutput.contentHash must be a CAS hash string, got %s", describeJS(ch))
	}
	h, err := ids.ParseHash(ch.String())
	if err != nil {
		return nil, fmt.Errorf("yielded RoleOutput.contentHash %q is not a CAS hash", ch.String())
	}
	store := e.host.CAS()
	if store == nil {
		return nil, errors.New("the host has no CAS to check the yielded contentHash against")
	}
	exists, err := store.Exists(h)
	if err != nil {
		return nil, fmt.Errorf("yielded RoleOutput.contentHash %s: %w", h, err)
	}
	if !exists {
		return nil, fmt.Errorf("yielded RoleOutput.contentHash %s is not in the CAS; store the content with runtime.cas.put first", h)
	}
	out.ContentHash = h

	mv := obj.Get("meta")
	mo, ok := mv.(*goja.Object)
	if !ok || mo.ClassName() == "Array" || mo.ClassName() == "Function" {
		return nil, fmt.Errorf("yielded RoleOutput.meta must be a plain object, got %s", describeJS(mv))
	}
	tree, err := e.exportTree(mv)
	if err != nil {
		return nil, fmt.Errorf("yielded RoleOutput.meta cannot be serialized: %w", exceptionError(err, e.bundleName))
	}
	meta, ok := stripFunctions(tree).(canonyaml.Map)
	if !ok {
		return nil, fmt.Errorf("yielded RoleOutput.meta must serialize to an object (its toJSON returned something else)")
	}
	out.Meta = meta

	if out.Refs, err = e.hashList(obj.Get("refs"), "yielded RoleOutput.refs"); err != nil {
		return nil, err
	}

	switch ct := obj.Get("childThread"); {
	case ct == nil || goja.IsUndefined(ct) || goja.IsNull(ct):
	case goja.IsString(ct):
		h, err := ids.ParseHash(ct.String())
		if err != nil {
			return nil, fmt.Errorf("yielded RoleOutput.childThread %q is not a state hash", ct.String())
		}
		out.ChildThread = h
	default:
		return nil, fmt.Errorf("yielded RoleOutput.childThread must be a state hash or null, got %s", describeJS(ct))
	}
	return out, nil
}

func (e *jsEnv) completion(v goja.Value) (*workflow.Completion, error) {
	obj, ok := v.(*goja.Object)
	if !ok {
		return nil, fmt.Errorf("run must return a completion {returnCode, summary}, got %s", describeJS(v))
	}
	rc := obj.Get("returnCode")
	if rc == nil || !goja.IsNumber(rc) {
		return nil, fmt.Errorf("the completion's returnCode must be an integer, got %s", describeJS(rc))
	}
	f := rc.ToFloat()
	if f != math.Trunc(f) || math.IsInf(f, 0) || math.Abs(f) > math.MaxInt32 {
		return nil, fmt.Errorf("the completion's returnCode must be an integer, got %s", describeJS(rc))
	}
	s := obj.Get("summary")
	if s == nil || !goja.IsString(s) {
		return nil, fmt.Errorf("the completion's summary must be a string, got %s", describeJS(s))
	}
	return &workflow.Completion{ReturnCode: int(f), Summary: s.String()}, nil
}
