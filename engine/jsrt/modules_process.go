package jsrt

import (
	"fmt"
	"os"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/dop251/goja"

	"github.com/uncaged/workflow/engine/threadenv"
)

// nodePlatform is process.platform: Node's names for Go's GOOS.
func nodePlatform() string {
	if runtime.GOOS == "windows" {
		return "win32"
	}
	return runtime.GOOS
}

func nodeArch() string {
	switch runtime.GOARCH {
	case "amd64":
		return "x64"
	case "386":
		return "ia32"
	}
	return runtime.GOARCH
}

// processHost backs process.js: the environment, platform facts and the
// log that stands in for stdout.
func (e *jsEnv) processHost() *goja.Object {
	return e.obj(
		"env", e.vm.NewDynamicObject(&envObject{e}),
		"platform", nodePlatform(),
		"arch", nodeArch(),
		"pid", os.Getpid(),
		"ppid", os.Getppid(),
		"bundle", e.bundleName,
		"cwd", func(goja.FunctionCall) goja.Value {
			// The thread's directory: that of the command that started it,
			// not that of the long-lived host running it.
			if dir := threadenv.Of(e.host).Dir(); dir != "" {
				return e.vm.ToValue(dir)
			}
			wd, err := os.Getwd()
			if err != nil {
				e.throwError(err.Error())
			}
			return e.vm.ToValue(wd)
		},
		"hrtime", func(goja.FunctionCall) goja.Value {
			return e.vm.ToValue(float64(time.Since(e.started).Nanoseconds()))
		},
		"log", e.consoleLog,
	)
}

// envObject is process.env: the thread's environment through
// Host.Getenv, read-only. While a bundle is validated its top level sees
// the loader's environment, and reading a variable that is not set throws:
// a descriptor must not depend on the environment, and the original
// silently read undefined there.
type envObject struct{ e *jsEnv }

// notEnvKeys are property names generic code probes on any object
// (JSON.stringify, await, String(), inspection); they are never
// environment reads.
var notEnvKeys = map[string]bool{
	"toJSON": true, "then": true, "constructor": true, "toString": true, "valueOf": true,
	"hasOwnProperty": true, "isPrototypeOf": true, "propertyIsEnumerable": true,
	"toLocaleString": true, "__proto__": true, "inspect": true,
}

func (o *envObject) Get(key string) goja.Value {
	e := o.e
	if e.validating {
		if v, ok := e.lookupEnv(key); ok {
			return e.vm.ToValue(v)
		}
		if notEnvKeys[key] {
			return nil
		}
		e.throwError(fmt.Sprintf("environment variable %s is not set; bundles must read the environment lazily, inside run", key))
	}
	if v := e.host.Getenv(key); v != "" {
		return e.vm.ToValue(v)
	}
	return nil
}

func (o *envObject) Set(key string, _ goja.Value) bool {
	o.e.throwTypeError(fmt.Sprintf("cannot set process.env.%s: process.env is read-only in workflow bundles (pass env to child processes explicitly)", key))
	return false
}

func (o *envObject) Has(key string) bool {
	if o.e.validating {
		_, ok := o.e.lookupEnv(key)
		return ok
	}
	return o.e.host.Getenv(key) != ""
}

func (o *envObject) Delete(key string) bool {
	o.e.throwTypeError(fmt.Sprintf("cannot delete process.env.%s: process.env is read-only in workflow bundles", key))
	return false
}

// Keys lists the thread's variables, so {...process.env} works for child
// processes. A host that carries no thread environment (threadenv.Of) has
// no way to enumerate its variables; the process environment's names
// that it also has stand in.
func (o *envObject) Keys() []string {
	if o.e.validating {
		return nil
	}
	names := threadenv.Of(o.e.host).Names()
	if names == nil {
		for _, kv := range os.Environ() {
			k, _, _ := strings.Cut(kv, "=")
			names = append(names, k)
		}
	}
	var keys []string
	for _, k := range names {
		if k != "" && o.e.host.Getenv(k) != "" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	return keys
}

// consoleLog appends one line to the thread's debug log; while a bundle is
// validated there is no thread, and the line is dropped.
func (e *jsEnv) consoleLog(call goja.FunctionCall) goja.Value {
	if e.host != nil && !e.validating {
		e.host.Log("CONSOLE", call.Argument(0).String())
	}
	return goja.Undefined()
}

// consoleHost backs console.js.
func (e *jsEnv) consoleHost() *goja.Object {
	return e.obj("log", e.consoleLog)
}

// timersHost backs timers.js with the loop's timers.
func (e *jsEnv) timersHost() *goja.Object {
	l := e.loop
	callback := func(v goja.Value) goja.Callable {
		fn, ok := goja.AssertFunction(v)
		if !ok {
			e.throwTypeError("timer callback must be a function")
		}
		return fn
	}
	argsOf := func(v goja.Value) []goja.Value {
		var out []goja.Value
		if obj, ok := v.(*goja.Object); ok {
			e.vm.ForOf(obj, func(x goja.Value) bool {
				out = append(out, x)
				return true
			})
		}
		return out
	}
	return e.obj(
		"start", func(call goja.FunctionCall) goja.Value {
			id := l.startTimer(callback(call.Argument(0)), argsOf(call.Argument(2)), timerDelay(call.Argument(1)), call.Argument(3).ToBoolean(), false)
			return e.vm.ToValue(id)
		},
		"immediate", func(call goja.FunctionCall) goja.Value {
			return e.vm.ToValue(l.startTimer(callback(call.Argument(0)), argsOf(call.Argument(1)), 0, false, true))
		},
		"clear", func(call goja.FunctionCall) goja.Value {
			l.clearTimer(call.Argument(0).ToInteger())
			return goja.Undefined()
		},
		"ref", func(call goja.FunctionCall) goja.Value {
			l.setTimerRef(call.Argument(0).ToInteger(), call.Argument(1).ToBoolean())
			return goja.Undefined()
		},
		"hasRef", func(call goja.FunctionCall) goja.Value {
			t, ok := l.timers[call.Argument(0).ToInteger()]
			return e.vm.ToValue(ok && t.ref)
		},
		"refresh", func(call goja.FunctionCall) goja.Value {
			l.refreshTimer(call.Argument(0).ToInteger())
			return goja.Undefined()
		},
		"uncaught", func(call goja.FunctionCall) goja.Value {
			if l.fatal == nil {
				l.fatal = &uncaughtError{valueError(call.Argument(0), e.bundleName)}
			}
			return goja.Undefined()
		},
	)
}

// webHost backs web.js: the clock of performance.now and Event.timeStamp.
func (e *jsEnv) webHost() *goja.Object {
	return e.obj(
		"now", func(goja.FunctionCall) goja.Value {
			return e.vm.ToValue(float64(time.Since(e.started).Nanoseconds()) / 1e6)
		},
		"timeOrigin", float64(e.started.UnixNano())/1e6,
	)
}
