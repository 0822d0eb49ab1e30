package jsrt

import (
	"container/list"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/dop251/goja"
	"github.com/dop251/goja/parser"
	"github.com/evanw/esbuild/pkg/api"

	"github.com/uncaged/workflow/engine/ids"
)

// compiled is a bundle after the esbuild pass and goja compilation: what
// every run of the same bytes shares. Programs are immutable and may run in
// any number of runtimes at once.
type compiled struct {
	prog    *goja.Program
	imports []importRecord // in source order
	err     error          // a parse error, remembered like a success
}

// importRecord is one import esbuild found in the source.
type importRecord struct {
	Path string
	Kind string // esbuild metafile kind: import-statement, require-call, dynamic-import, ...
}

var transformCount atomic.Uint64

// TransformCount reports how many times the esbuild transform has run in
// this process. Loading bytes that were loaded before does not transform
// again, which tests and benchmarks observe through this counter.
func TransformCount() uint64 { return transformCount.Load() }

// cacheSize bounds the transform cache: a host holds few bundles, and a
// fuzzer or a buggy caller must not grow memory without limit.
const cacheSize = 128

type cacheKey struct{ hash, name string }

// lru is a small least-recently-used cache of compiled bundles.
type lru struct {
	mu    sync.Mutex
	order *list.List // of *cacheEntry, most recent first
	items map[cacheKey]*list.Element
}

type cacheEntry struct {
	key cacheKey
	val *compiled
}

var bundleCache = &lru{order: list.New(), items: map[cacheKey]*list.Element{}}

func (c *lru) get(k cacheKey) (*compiled, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[k]; ok {
		c.order.MoveToFront(e)
		return e.Value.(*cacheEntry).val, true
	}
	return nil, false
}

func (c *lru) put(k cacheKey, v *compiled) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[k]; ok {
		e.Value.(*cacheEntry).val = v
		c.order.MoveToFront(e)
		return
	}
	c.items[k] = c.order.PushFront(&cacheEntry{key: k, val: v})
	for c.order.Len() > cacheSize {
		last := c.order.Back()
		c.order.Remove(last)
		delete(c.items, last.Value.(*cacheEntry).key)
	}
}

func (c *lru) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.order.Init()
	c.items = map[cacheKey]*list.Element{}
}

// compileBundle returns the compiled form of source, transforming it only
// the first time these bytes are seen under this name (the name is part of
// the key because it is baked into positions and the source map).
func compileBundle(source []byte, name string) (c *compiled, cached bool) {
	key := cacheKey{ids.HashBytes(source), name}
	if c, ok := bundleCache.get(key); ok {
		return c, true
	}
	c = transformAndCompile(string(source), name)
	bundleCache.put(key, c)
	return c, false
}

// esbuildOptions is the one esbuild configuration for bundles and the
// embedded modules: CommonJS, because goja has no ES modules; ES2017,
// because goja has async functions but no async generators, object spread
// in all forms or the newer syntax esbuild lowers; BigInt stays, goja has
// it. Bundle mode with every import external is what makes esbuild report
// the imports (with their kind) in the metafile without resolving any.
func esbuildOptions(source, name string) api.BuildOptions {
	return api.BuildOptions{
		Stdin: &api.StdinOptions{
			Contents:   source,
			Sourcefile: name,
			Loader:     api.LoaderJS,
		},
		Bundle:         true,
		Write:          false,
		Outfile:        "out.js",
		Format:         api.FormatCommonJS,
		Target:         api.ES2017,
		Supported:      map[string]bool{"bigint": true},
		Platform:       api.PlatformNeutral,
		Charset:        api.CharsetUTF8,
		Sourcemap:      api.SourceMapInline,
		SourcesContent: api.SourcesContentExclude,
		// Tree shaking could drop top-level statements esbuild thinks are
		// pure, which would hide top-level errors from validation.
		TreeShaking: api.TreeShakingFalse,
		Metafile:    true,
		LogLevel:    api.LogLevelSilent,
		Plugins:     []api.Plugin{externalEverything},
	}
}

var externalEverything = api.Plugin{
	Name: "external-everything",
	Setup: func(b api.PluginBuild) {
		b.OnResolve(api.OnResolveOptions{Filter: ".*"}, func(a api.OnResolveArgs) (api.OnResolveResult, error) {
			return api.OnResolveResult{Path: a.Path, External: true}, nil
		})
	},
}

func transformAndCompile(source, name string) *compiled {
	transformCount.Add(1)
	res := api.Build(esbuildOptions(inertSourceMapURLs(source), name))
	if len(res.Errors) > 0 {
		return &compiled{err: parseError(res.Errors[0], name)}
	}
	if len(res.OutputFiles) != 1 {
		return &compiled{err: fmt.Errorf("failed to parse module: esbuild produced %d outputs", len(res.OutputFiles))}
	}
	code := string(res.OutputFiles[0].Contents)
	imports, err := metafileImports(res.Metafile)
	if err != nil {
		return &compiled{err: fmt.Errorf("failed to parse module: %v", err)}
	}
	c := &compiled{imports: imports}
	prog, err := compileJS(name, code)
	if err != nil {
		c.err = gojaParseError(err, code)
	}
	c.prog = prog
	return c
}

// sourceMapURL matches what esbuild may take for a source map comment
// ("//# sourceMappingURL=…", "/*@ sourceMappingURL=… */"), and, since a
// regular expression cannot tell a comment from a string, the same text
// inside strings too.
var sourceMapURL = regexp.MustCompile(`[#@][ \t]*sourceMappingURL=([^\s*'"\x60]*)`)

// inertSourceMapURLs keeps esbuild from reading a file a bundle names as
// its source map: esbuild follows "file:" URLs, and a bundle must not make
// the host read files (a FIFO or /dev/zero would hang it). An inline map
// ("data:" URL, what `build` writes) is honoured: esbuild composes it with
// its own, so positions read as the original sources'. When the source
// names anything else, a comment esbuild cannot follow is appended — the
// last comment is the one esbuild uses — or, when the last one is inline,
// that one again. Appending moves no position.
func inertSourceMapURLs(source string) string {
	matches := sourceMapURL.FindAllStringSubmatch(source, -1)
	external := false
	for _, m := range matches {
		if !isDataURL(m[1]) {
			external = true
		}
	}
	if !external {
		return source
	}
	tail := "about:blank"
	if last := matches[len(matches)-1][1]; isDataURL(last) {
		tail = last
	}
	return source + "\n//# sourceMappingURL=" + tail + "\n"
}

func isDataURL(u string) bool {
	return len(u) >= 5 && strings.EqualFold(u[:5], "data:")
}

// compileJS parses esbuild output with goja. Source maps are honoured only
// inline: a bundle must not make the host read files through a
// sourceMappingURL comment.
func compileJS(name, code string) (*goja.Program, error) {
	ast, err := parser.ParseFile(nil, name, code, 0, parser.WithSourceMapLoader(func(string) ([]byte, error) {
		return nil, fmt.Errorf("external source maps are not loaded")
	}))
	if err != nil {
		return nil, err
	}
	return goja.CompileAST(ast, true)
}

func parseError(m api.Message, name string) error {
	if m.Location == nil {
		return fmt.Errorf("failed to parse module: %s", m.Text)
	}
	file := m.Location.File
	if file == "" {
		file = name
	}
	// esbuild columns count bytes from 0; editors and goja count from 1.
	return fmt.Errorf("failed to parse module: %s (%s:%d:%d)", m.Text, file, m.Location.Line, m.Location.Column+1)
}

// gojaParseError explains code that esbuild accepted but goja cannot
// compile. The case users hit is import() with a computed specifier:
// esbuild leaves it alone (there is nothing to record), and goja has no
// dynamic import at all.
func gojaParseError(err error, code string) error {
	var list parser.ErrorList
	if errors.As(err, &list) && len(list) > 0 {
		first := list[0]
		if strings.HasPrefix(textAt(code, first.Position.Line, first.Position.Column), "import") {
			return errDynamicImport
		}
		return fmt.Errorf("failed to parse module: %s (%s:%d:%d of the transformed code)",
			first.Message, first.Position.Filename, first.Position.Line, first.Position.Column)
	}
	return fmt.Errorf("failed to parse module: %v", err)
}

// textAt returns code from a 1-based line and column on.
func textAt(code string, line, col int) string {
	for ; line > 1; line-- {
		i := strings.IndexByte(code, '\n')
		if i < 0 {
			return ""
		}
		code = code[i+1:]
	}
	if col < 1 || col-1 > len(code) {
		return ""
	}
	return code[col-1:]
}

// metafileImports lists the imports of the single input in source order.
// The "<runtime>" record is esbuild's own helper module, not the bundle's.
func metafileImports(metafile string) ([]importRecord, error) {
	var meta struct {
		Inputs map[string]struct {
			Imports []importRecord `json:"imports"`
		} `json:"inputs"`
	}
	if err := json.Unmarshal([]byte(metafile), &meta); err != nil {
		return nil, err
	}
	var out []importRecord
	for _, in := range meta.Inputs {
		for _, imp := range in.Imports {
			if imp.Path == "<runtime>" {
				continue
			}
			out = append(out, imp)
		}
	}
	return out, nil
}
