package jsrt

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/dop251/goja"

	"github.com/uncaged/workflow/engine/canonyaml"
	"github.com/uncaged/workflow/engine/ids"
	"github.com/uncaged/workflow/engine/membudget"
	"github.com/uncaged/workflow/engine/workflow"
)

// DefaultValidationTimeout bounds the evaluation of a bundle's top level
// during Load.
const DefaultValidationTimeout = 5 * time.Second

// Options adjust Load.
type Options struct {
	// LookupEnv is the environment a bundle's top level sees while Load
	// evaluates it; reading a variable it does not have throws, failing the
	// load. nil means the process environment (os.LookupEnv).
	LookupEnv func(name string) (string, bool)
	// ValidationTimeout bounds the top-level evaluation during Load, so a
	// bundle that never finishes loading cannot hang the caller. Zero means
	// DefaultValidationTimeout.
	ValidationTimeout time.Duration
}

// Bundle is a loaded workflow bundle: transformed, compiled, validated,
// and ready to start runs. It implements workflow.Workflow and is safe for
// concurrent use; every run gets its own JavaScript runtime.
type Bundle struct {
	name      string
	hash      string
	prog      *goja.Program
	desc      workflow.Descriptor
	fromCache bool
}

var _ workflow.Workflow = (*Bundle)(nil)

// Load validates a single-file ESM bundle and prepares it to run. name is
// the bundle's file name: it must end in ".esm.js", and error locations and
// stack traces use it. The checks, first failure wins:
//
//   - the file name suffix;
//   - the source parses (esbuild), and is transformed to CommonJS/ES2017 —
//     once per distinct source, cached in memory;
//   - no dynamic import(), no require(), and only the modules this host
//     provides are imported (AvailableModules);
//   - the top level evaluates without throwing, within
//     Options.ValidationTimeout, without touching host capabilities (the
//     CAS, fetch, processes) or unset environment variables;
//   - no default export, run is a function, descriptor is exported;
//   - the descriptor passes workflow.ValidateDescriptor.
//
// Error texts for these follow the original engine (docs/compatibility.md,
// "Bundles").
func Load(source []byte, name string, opts Options) (*Bundle, error) {
	if !strings.HasSuffix(name, ".esm.js") {
		return nil, errSuffix
	}
	c, cached := compileBundle(source, name)
	if c.err != nil {
		return nil, c.err
	}
	if err := checkImports(c.imports); err != nil {
		return nil, err
	}
	desc, err := validateTopLevel(c.prog, name, opts)
	if err != nil {
		return nil, err
	}
	return &Bundle{name: name, hash: ids.HashBytes(source), prog: c.prog, desc: desc, fromCache: cached}, nil
}

// checkImports applies the original validator's import rules to what
// esbuild found, in source order.
func checkImports(imports []importRecord) error {
	for _, imp := range imports {
		switch imp.Kind {
		case "dynamic-import":
			return errDynamicImport
		case "require-call", "require-resolve":
			return errRequire
		default:
			if _, ok := canonicalModule(imp.Path); !ok {
				return disallowedImport(imp.Path)
			}
		}
	}
	return nil
}

// ExternalImports lists, in source order and each once, the bare
// specifiers a bundle imports statically that the engine does not
// provide: the packages `workflow add` looks for in node_modules beside
// the bundle, as the original resolved them when a bundle was added. A
// relative, absolute or file: specifier, a dynamic import() or a
// require() is an error, as Load reports it, and so is source that does
// not parse.
func ExternalImports(source []byte, name string) ([]string, error) {
	c, _ := compileBundle(source, name)
	if c.err != nil {
		return nil, c.err
	}
	var out []string
	for _, imp := range c.imports {
		switch imp.Kind {
		case "dynamic-import":
			return nil, errDynamicImport
		case "require-call", "require-resolve":
			return nil, errRequire
		}
		if _, ok := canonicalModule(imp.Path); ok || slices.Contains(out, imp.Path) {
			continue
		}
		if !isBareSpecifier(imp.Path) {
			return nil, disallowedImport(imp.Path)
		}
		out = append(out, imp.Path)
	}
	return out, nil
}

// isBareSpecifier says whether spec names a package (as "left-pad",
// "@scope/pkg/sub" do) rather than a file or a URL, or a Node built-in
// the engine does not have ("node:…").
func isBareSpecifier(spec string) bool {
	if spec == "" || strings.HasPrefix(spec, ".") || strings.HasPrefix(spec, "/") || strings.Contains(spec, ":") {
		return false
	}
	return true
}

// validateTopLevel evaluates the module once in a throwaway runtime with
// no host ("validation mode") and extracts the descriptor.
func validateTopLevel(prog *goja.Program, name string, opts Options) (workflow.Descriptor, error) {
	timeout := opts.ValidationTimeout
	if timeout <= 0 {
		timeout = DefaultValidationTimeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	// The top level runs in the host too (every load of a bundle), so it
	// is held to the same budget as a run.
	e := newEnv(envConfig{validating: true, lookupEnv: opts.LookupEnv, bundleName: name, budget: membudget.Resolve("")})
	defer e.close()

	var desc workflow.Descriptor
	var checkErr error
	err := e.loop.runUntil(ctx, func() error {
		exports, err := e.evaluate(prog)
		if err != nil {
			return err
		}
		desc, checkErr = e.checkExports(exports)
		return nil
	}, func() bool { return true })
	var over *membudget.ExceededError
	switch {
	case errors.As(err, &over):
		return workflow.Descriptor{}, fmt.Errorf("failed to import bundle: evaluating the top level: %w", over)
	case errors.Is(err, context.DeadlineExceeded):
		return workflow.Descriptor{}, fmt.Errorf("failed to import bundle: evaluating the top level did not finish within %v", timeout)
	case err != nil:
		return workflow.Descriptor{}, fmt.Errorf("failed to import bundle: %w", exceptionError(err, name))
	}
	return desc, checkErr
}

// evaluate runs the compiled bundle as a CommonJS module and returns its
// exports. The runtime is fresh, so the module scope is the global one.
func (e *jsEnv) evaluate(prog *goja.Program) (*goja.Object, error) {
	module := e.vm.NewObject()
	exports := e.vm.NewObject()
	_ = module.Set("exports", exports)
	g := e.vm.GlobalObject()
	_ = g.Set("module", module)
	_ = g.Set("exports", exports)
	_ = g.Set("require", e.requireFunc)
	_ = g.Set("__filename", e.bundleName)
	_ = g.Set("__dirname", ".")
	if _, err := e.vm.RunProgram(prog); err != nil {
		return nil, err
	}
	return module.Get("exports").ToObject(e.vm), nil
}

// checkExports applies the export rules and converts the descriptor. It
// runs on the loop: reading exports may run getters.
func (e *jsEnv) checkExports(exports *goja.Object) (workflow.Descriptor, error) {
	if slices.Contains(exports.Keys(), "default") {
		return workflow.Descriptor{}, errDefaultExport
	}
	if _, ok := goja.AssertFunction(exports.Get("run")); !ok {
		return workflow.Descriptor{}, errRunNotCallable
	}
	dv := exports.Get("descriptor")
	if dv == nil || goja.IsUndefined(dv) {
		return workflow.Descriptor{}, errNoDescriptor
	}
	tree, err := e.exportTree(dv)
	if err != nil {
		return workflow.Descriptor{}, fmt.Errorf("descriptor cannot be read: %w", exceptionError(err, e.bundleName))
	}
	desc, err := workflow.ValidateDescriptor(tree)
	if err != nil {
		return workflow.Descriptor{}, err
	}
	for i := range desc.Roles {
		desc.Roles[i].Schema = stripFunctions(desc.Roles[i].Schema).(canonyaml.Map)
	}
	return desc, nil
}

// Descriptor returns the validated descriptor the bundle exports.
func (b *Bundle) Descriptor() workflow.Descriptor { return b.desc }

// Name is the file name the bundle was loaded under.
func (b *Bundle) Name() string { return b.name }

// Hash is the content hash of the bundle's source (its registry hash).
func (b *Bundle) Hash() string { return b.hash }

// FromCache reports whether Load found the transformed code in the cache
// instead of running esbuild.
func (b *Bundle) FromCache() bool { return b.fromCache }
