package jsrt

import (
	"embed"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/dop251/goja"
	"github.com/evanw/esbuild/pkg/api"
)

// RuntimeModule is the specifier of the engine's own module, the one a
// bundle imports createWorkflow, START, END and the adapters from.
const RuntimeModule = "@uncaged/workflow-runtime"

// moduleDef is a module the host provides. Modules are JavaScript (an
// embedded file, run like a CommonJS module) over a small Go binding, or
// pure Go. Only public modules may be imported by bundles; internal ones
// back globals such as fetch and console.
type moduleDef struct {
	public bool
	// script is the embedded js/ file implementing the module, or "".
	script string
	// host builds the Go binding: the script's __host, or the module's
	// exports when there is no script.
	host func(e *jsEnv) *goja.Object
}

var moduleDefs = map[string]moduleDef{
	RuntimeModule:     {public: true, script: "runtime.js", host: (*jsEnv).runtimeHostWithAgents},
	"buffer":          {public: true, script: "buffer.js", host: (*jsEnv).bufferHost},
	"child_process":   {public: true, script: "child_process.js", host: (*jsEnv).childProcessHost},
	"crypto":          {public: true, script: "crypto.js", host: (*jsEnv).cryptoHost},
	"events":          {public: true, script: "events.js"},
	"fs":              {public: true, script: "fs.js", host: (*jsEnv).fsHost},
	"fs/promises":     {public: true, script: "fs_promises.js"},
	"os":              {public: true, host: (*jsEnv).osModule},
	"path":            {public: true, script: "path.js"},
	"path/posix":      {public: true, script: "path_posix.js"},
	"process":         {public: true, script: "process.js", host: (*jsEnv).processHost},
	"timers":          {public: true, script: "timers.js", host: (*jsEnv).timersHost},
	"timers/promises": {public: true, script: "timers_promises.js"},
	"url":             {public: true, host: (*jsEnv).urlModule},
	"util":            {public: true, script: "util.js"},

	"internal:console":  {script: "console.js", host: (*jsEnv).consoleHost},
	"internal:encoding": {script: "encoding.js", host: (*jsEnv).encodingHost},
	"internal:fetch":    {script: "fetch.js", host: (*jsEnv).fetchHost},
	"internal:web":      {script: "web.js", host: (*jsEnv).webHost},
}

// AvailableModules lists the specifiers a bundle may import, sorted; Node
// built-ins may also be written with the "node:" prefix.
func AvailableModules() []string {
	var out []string
	for name, d := range moduleDefs {
		if d.public {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

var availableList = strings.Join(AvailableModules(), ", ")

// canonicalModule maps a specifier to the module it names, accepting the
// "node:" prefix for built-ins.
func canonicalModule(spec string) (string, bool) {
	name := spec
	if rest, ok := strings.CutPrefix(spec, "node:"); ok {
		if strings.HasPrefix(rest, "@") {
			return "", false
		}
		name = rest
	}
	d, ok := moduleDefs[name]
	if !ok || !d.public {
		return "", false
	}
	return name, true
}

func disallowedImport(spec string) error {
	return fmt.Errorf("disallowed import specifier %q (workflow bundles may import only %s; Node built-ins may use the \"node:\" prefix; all other dependencies must be bundled)", spec, availableList)
}

// requireFunc is the require a bundle's CommonJS code calls: public
// modules only.
func (e *jsEnv) requireFunc(call goja.FunctionCall) goja.Value {
	spec := call.Argument(0).String()
	name, ok := canonicalModule(spec)
	if !ok {
		e.throwError(fmt.Sprintf("module %q is not available to workflow bundles (available: %s)", spec, availableList),
			"code", "MODULE_NOT_FOUND")
	}
	return e.requireModule(name)
}

// internalRequire is the require of the embedded modules: everything,
// including internal modules.
func (e *jsEnv) internalRequire(call goja.FunctionCall) goja.Value {
	spec := call.Argument(0).String()
	name := strings.TrimPrefix(spec, "node:")
	if _, ok := moduleDefs[name]; !ok {
		e.throwError(fmt.Sprintf("internal module %q does not exist", spec))
	}
	return e.requireModule(name)
}

// requireModule loads a module once per runtime and returns its exports.
func (e *jsEnv) requireModule(name string) goja.Value {
	if m, ok := e.modules[name]; ok {
		return m.Get("exports")
	}
	def := moduleDefs[name]
	module := e.vm.NewObject()
	_ = module.Set("exports", e.vm.NewObject())
	_ = module.Set("id", name)
	e.modules[name] = module // before running it, so cycles see a partial module, as in Node
	var host *goja.Object
	if def.host != nil {
		host = def.host(e)
	}
	if def.script == "" {
		_ = module.Set("exports", host)
		return host
	}
	fn, err := e.vm.RunProgram(internalProgram(def.script))
	if err != nil {
		panic(err)
	}
	wrapper, _ := goja.AssertFunction(fn)
	var hostVal goja.Value = goja.Undefined()
	if host != nil {
		hostVal = host
	}
	if _, err := wrapper(goja.Undefined(), module.Get("exports"), e.vm.ToValue(e.internalRequire), module, hostVal); err != nil {
		delete(e.modules, name)
		panic(err)
	}
	return module.Get("exports")
}

//go:embed js/*.js
var jsFiles embed.FS

type scriptEntry struct {
	once sync.Once
	prog *goja.Program
}

var scripts sync.Map // file name → *scriptEntry

// internalProgram compiles an embedded module once per process: esbuild
// lowers it like a bundle, and a function wrapper gives it the CommonJS
// scope plus its Go binding. A failure here is a bug in this package.
func internalProgram(file string) *goja.Program {
	v, _ := scripts.LoadOrStore(file, &scriptEntry{})
	s := v.(*scriptEntry)
	s.once.Do(func() {
		src, err := jsFiles.ReadFile("js/" + file)
		if err != nil {
			panic(fmt.Sprintf("jsrt: embedded module %s: %v", file, err))
		}
		res := api.Transform(string(src), api.TransformOptions{
			Loader:     api.LoaderJS,
			Format:     api.FormatCommonJS,
			Target:     api.ES2017,
			Supported:  map[string]bool{"bigint": true},
			Sourcefile: "internal:" + file,
			Charset:    api.CharsetUTF8,
		})
		if len(res.Errors) > 0 {
			panic(fmt.Sprintf("jsrt: embedded module %s: %s (line %d)", file, res.Errors[0].Text, res.Errors[0].Location.Line))
		}
		code := "(function (exports, require, module, __host) {" + string(res.Code) + "\n})"
		prog, err := goja.Compile("internal:"+file, code, true)
		if err != nil {
			panic(fmt.Sprintf("jsrt: embedded module %s: %v", file, err))
		}
		s.prog = prog
	})
	return s.prog
}
