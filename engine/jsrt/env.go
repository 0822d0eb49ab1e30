package jsrt

import (
	"context"
	"errors"
	"net/http"
	"os"
	"time"

	"github.com/dop251/goja"

	"github.com/uncaged/workflow/engine/membudget"
	"github.com/uncaged/workflow/engine/workflow"
)

// maxCallStackSize bounds JavaScript recursion. goja's default is
// unbounded, and native helpers recurse on the Go stack, so a runaway
// bundle could take the whole process down instead of failing its run.
const maxCallStackSize = 4096

// jsEnv is one goja runtime with the host modules installed: a fresh one
// for every run, and a throwaway one for validating a bundle at Load.
type jsEnv struct {
	vm   *goja.Runtime
	loop *loop

	// host is what the run may use; nil while validating, when the bundle's
	// top level must not need anything beyond pure computation.
	host       workflow.Host
	validating bool
	lookupEnv  func(string) (string, bool) // the environment while validating
	bundleName string
	started    time.Time

	modules map[string]*goja.Object // module objects by canonical name

	// unhandled holds rejected promises no handler has been attached to
	// yet, in rejection order (see reportUnhandled).
	unhandled []*goja.Promise

	// intrinsics are built-ins the memory gates use, and drain counts
	// what a gated iterator gave (memgate_builtins.go).
	intrinsics intrinsics
	drain      drain

	http  *http.Client     // per run, so Close can drop its idle connections
	procs *procTable       // child processes of this run
	fetch map[int64]func() // aborts of in-flight requests, by id
	ids   int64
}

type envConfig struct {
	host       workflow.Host
	validating bool
	lookupEnv  func(string) (string, bool)
	bundleName string
	// budget is the run's memory budget in bytes (membudget.Off: none).
	budget int64
}

func newEnv(cfg envConfig) *jsEnv {
	vm := goja.New()
	vm.SetMaxCallStackSize(maxCallStackSize)
	e := &jsEnv{
		vm:         vm,
		loop:       newLoop(vm, cfg.bundleName),
		host:       cfg.host,
		validating: cfg.validating,
		lookupEnv:  cfg.lookupEnv,
		bundleName: cfg.bundleName,
		started:    time.Now(),
		modules:    map[string]*goja.Object{},
		fetch:      map[int64]func(){},
	}
	if e.lookupEnv == nil {
		e.lookupEnv = os.LookupEnv
	}
	if !cfg.validating {
		vm.SetPromiseRejectionTracker(e.trackRejection)
	}
	e.installMemoryGates()
	e.procs = newProcTable()
	// Killing the run kills its process groups and closes our ends of their
	// pipes, so readers stop even if a grandchild left the group.
	e.loop.onCleanup(e.procs.killAll)
	e.loop.onCleanup(e.procs.closePipes)
	e.installGlobals()
	e.loop.acct = membudget.Open(cfg.budget, e.loop.exceed)
	return e
}

// nextID hands out ids for host handles (requests, processes). Loop-only.
func (e *jsEnv) nextID() int64 {
	e.ids++
	return e.ids
}

// close releases everything the runtime holds. Loop-only (the run's mutex
// is held, or the runtime never ran on another goroutine).
func (e *jsEnv) close() {
	e.loop.kill()
	// A child spawned while the kill was under way is caught here.
	e.procs.killAll()
	e.procs.closePipes()
	e.loop.close()
	if e.http != nil {
		e.http.CloseIdleConnections()
	}
	// After the loop's goroutines are gone: what the runtime held is now
	// garbage, which the watchdog is to expect back.
	e.loop.acct.Close()
}

// lazyGlobal names a global that is materialized from a module on first
// use, so a run pays only for the parts of the Node surface it touches.
type lazyGlobal struct {
	name, module, export string // export "" means the module itself
}

var lazyGlobals = []lazyGlobal{
	{"process", "process", ""},
	{"console", "internal:console", ""},
	{"Buffer", "buffer", "Buffer"},
	{"atob", "buffer", "atob"},
	{"btoa", "buffer", "btoa"},
	{"setTimeout", "timers", "setTimeout"},
	{"clearTimeout", "timers", "clearTimeout"},
	{"setInterval", "timers", "setInterval"},
	{"clearInterval", "timers", "clearInterval"},
	{"setImmediate", "timers", "setImmediate"},
	{"clearImmediate", "timers", "clearImmediate"},
	{"queueMicrotask", "timers", "queueMicrotask"},
	{"structuredClone", "internal:web", "structuredClone"},
	{"Event", "internal:web", "Event"},
	{"EventTarget", "internal:web", "EventTarget"},
	{"AbortController", "internal:web", "AbortController"},
	{"AbortSignal", "internal:web", "AbortSignal"},
	{"DOMException", "internal:web", "DOMException"},
	{"performance", "internal:web", "performance"},
	{"TextEncoder", "internal:encoding", "TextEncoder"},
	{"TextDecoder", "internal:encoding", "TextDecoder"},
	{"fetch", "internal:fetch", "fetch"},
	{"Headers", "internal:fetch", "Headers"},
	{"Request", "internal:fetch", "Request"},
	{"Response", "internal:fetch", "Response"},
	{"URL", "url", "URL"},
	{"URLSearchParams", "url", "URLSearchParams"},
	{"crypto", "crypto", "webcrypto"},
}

func (e *jsEnv) installGlobals() {
	g := e.vm.GlobalObject()
	_ = g.Set("global", g)
	for _, lg := range lazyGlobals {
		lg := lg
		getter := e.vm.ToValue(func(call goja.FunctionCall) goja.Value {
			v := e.requireModule(lg.module)
			if lg.export != "" {
				v = v.ToObject(e.vm).Get(lg.export)
			}
			// Replace the accessor with the plain value: later reads are
			// ordinary property reads, and assignment works as usual.
			_ = g.DefineDataProperty(lg.name, v, goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_FALSE)
			return v
		})
		setter := e.vm.ToValue(func(call goja.FunctionCall) goja.Value {
			_ = g.DefineDataProperty(lg.name, call.Argument(0), goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_FALSE)
			return goja.Undefined()
		})
		_ = g.DefineAccessorProperty(lg.name, getter, setter, goja.FLAG_TRUE, goja.FLAG_FALSE)
	}
}

// throwError throws a JavaScript Error with message and extra properties
// (Node's code, errno, syscall, path, ...). It does not return.
func (e *jsEnv) throwError(message string, props ...any) {
	panic(e.newError("Error", message, props...))
}

// throwTypeError throws a JavaScript TypeError.
func (e *jsEnv) throwTypeError(message string, props ...any) {
	panic(e.newError("TypeError", message, props...))
}

// newError builds an instance of the named error constructor; props are
// key, value pairs set on it.
func (e *jsEnv) newError(ctor, message string, props ...any) *goja.Object {
	return e.newErrorOf(e.vm.Get(ctor), message, props...)
}

// newErrorOf is newError with the constructor itself.
func (e *jsEnv) newErrorOf(c goja.Value, message string, props ...any) *goja.Object {
	obj, err := e.vm.New(c, e.vm.ToValue(message))
	if err != nil {
		obj = e.vm.NewGoError(err)
	}
	for i := 0; i+1 < len(props); i += 2 {
		_ = obj.Set(props[i].(string), props[i+1])
	}
	return obj
}

// errorValue converts a Go error to a JavaScript Error for rejecting a
// promise.
func (e *jsEnv) errorValue(err error) goja.Value {
	if je, ok := err.(*jsValueError); ok {
		return je.v
	}
	var coded codedError
	if errors.As(err, &coded) {
		return e.newError("Error", err.Error(), "code", coded.code)
	}
	return e.newError("Error", err.Error())
}

// jsValueError carries a JavaScript value through Go code unchanged.
type jsValueError struct{ v goja.Value }

func (e *jsValueError) Error() string { return safeString(e.v) }

// promise returns a new promise and functions settling it. They must be
// called on the loop; an uncatchable error they return (an interrupt)
// stops the loop.
func (e *jsEnv) promise() (goja.Value, func(any) error, func(any) error) {
	p, resolve, reject := e.vm.NewPromise()
	return e.vm.ToValue(p), resolve, reject
}

// async runs work on its own goroutine and returns a promise for its
// result; convert turns the result into a JavaScript value on the loop.
func (e *jsEnv) async(work func(ctx context.Context) (any, error), convert func(any) goja.Value) goja.Value {
	p, resolve, reject := e.promise()
	e.loop.goWork(func(ctx context.Context) func() error {
		res, err := work(ctx)
		return func() error {
			if err != nil {
				return reject(e.errorValue(err))
			}
			if convert != nil {
				return resolve(convert(res))
			}
			return resolve(res)
		}
	})
	return p
}

// settled returns a promise already resolved with v, or rejected with err:
// for host calls that are quick enough to do on the loop (CAS, files) but
// are promise-returning in the API bundles know.
func (e *jsEnv) settled(v any, err error) goja.Value {
	p, resolve, reject := e.promise()
	if err != nil {
		_ = reject(e.errorValue(err))
	} else {
		_ = resolve(v)
	}
	return p
}

// obj builds a plain object from key, value pairs, in order.
func (e *jsEnv) obj(kv ...any) *goja.Object {
	o := e.vm.NewObject()
	for i := 0; i+1 < len(kv); i += 2 {
		_ = o.Set(kv[i].(string), kv[i+1])
	}
	return o
}

func (e *jsEnv) trackRejection(p *goja.Promise, op goja.PromiseRejectionOperation) {
	switch op {
	case goja.PromiseRejectionReject:
		e.unhandled = append(e.unhandled, p)
	case goja.PromiseRejectionHandle:
		for i, q := range e.unhandled {
			if q == p {
				e.unhandled = append(e.unhandled[:i], e.unhandled[i+1:]...)
				break
			}
		}
	}
}

// reportUnhandled logs rejections nothing handled by the end of a step
// (except the step's own promise, whose rejection is the step's error).
// Node would end the process; a workflow carries on, but the author should
// see that a promise failed unobserved, such as a fetch nobody awaited.
func (e *jsEnv) reportUnhandled(step *goja.Promise) {
	for _, p := range e.unhandled {
		if p == step || p.State() != goja.PromiseStateRejected {
			continue
		}
		msg := valueError(p.Result(), e.bundleName)
		text := msg.Message
		if msg.Stack != "" {
			text = msg.Stack
		}
		e.host.Log("CONSOLE", "Unhandled promise rejection: "+text)
	}
	e.unhandled = nil
}
