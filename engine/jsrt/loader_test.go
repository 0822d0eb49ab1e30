package jsrt

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func loadInvalid(t *testing.T, file string, opts Options) error {
	t.Helper()
	_, err := Load(readTestdata(t, filepath.Join("invalid", file)), file, opts)
	if err == nil {
		t.Fatalf("Load(%s) succeeded", file)
	}
	return err
}

func TestLoadErrorsExact(t *testing.T) {
	t.Parallel()
	allowed := strings.Join(AvailableModules(), ", ")
	for file, want := range map[string]string{
		"default_export.esm.js":          `workflow bundle must not use default export; use "export const run" instead`,
		"default_alias.esm.js":           `workflow bundle must not use default export; use "export const run" instead`,
		"no_run.esm.js":                  `workflow bundle must export run as a callable (e.g. "export const run = async function* (...)")`,
		"run_not_function.esm.js":        `workflow bundle must export run as a callable (e.g. "export const run = async function* (...)")`,
		"no_descriptor.esm.js":           `workflow bundle must export descriptor (e.g. "export const descriptor = { description, roles, graph }")`,
		"dynamic_import.esm.js":          `dynamic import() is not allowed in workflow bundles`,
		"dynamic_import_computed.esm.js": `dynamic import() is not allowed in workflow bundles`,
		"require_call.esm.js":            `require() is not allowed in workflow bundles`,
		"import_lodash.esm.js":           `disallowed import specifier "lodash" (workflow bundles may import only ` + allowed + `; Node built-ins may use the "node:" prefix; all other dependencies must be bundled)`,
		"import_net.esm.js":              `disallowed import specifier "node:net" (workflow bundles may import only ` + allowed + `; Node built-ins may use the "node:" prefix; all other dependencies must be bundled)`,
		"export_star.esm.js":             `disallowed import specifier "lodash/fp" (workflow bundles may import only ` + allowed + `; Node built-ins may use the "node:" prefix; all other dependencies must be bundled)`,
		"import_relative.esm.js":         `disallowed import specifier "./helper.js" (workflow bundles may import only ` + allowed + `; Node built-ins may use the "node:" prefix; all other dependencies must be bundled)`,
		"bad_role.esm.js":                `descriptor.roles.bad.schema must be a non-array object`,
		"function_role.esm.js":           `descriptor.roles.fn must be a non-array object`,
		"bad_edge.esm.js":                `descriptor.graph.edges[1].conditionDescription must be a string or null`,
	} {
		t.Run(file, func(t *testing.T) {
			if err := loadInvalid(t, file, Options{}); err.Error() != want {
				t.Fatalf("got  %s\nwant %s", err, want)
			}
		})
	}
}

func TestLoadSuffix(t *testing.T) {
	t.Parallel()
	src := readTestdata(t, "linear.esm.js")
	for _, name := range []string{"linear.js", "linear.mjs", "linear.esm.ts", ""} {
		if _, err := Load(src, name, Options{}); err == nil || err.Error() != `workflow bundle file must use the ".esm.js" suffix` {
			t.Errorf("Load(%q): %v", name, err)
		}
	}
}

func TestLoadParseError(t *testing.T) {
	t.Parallel()
	err := loadInvalid(t, "parse_error.esm.js", Options{})
	want := `failed to parse module: Expected identifier but found ";" (parse_error.esm.js:2:10)`
	if err.Error() != want {
		t.Fatalf("got  %s\nwant %s", err, want)
	}
}

func TestLoadTopLevelThrow(t *testing.T) {
	t.Parallel()
	err := loadInvalid(t, "toplevel_throw.esm.js", Options{})
	line := lineOf(t, "invalid/toplevel_throw.esm.js", "throw new Error")
	want := fmt.Sprintf("failed to import bundle: Error: configuration exploded at load (toplevel_throw.esm.js:%d:", line)
	if !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("got  %s\nwant %s...", err, want)
	}
}

func TestLoadTopLevelEnv(t *testing.T) {
	// Serial: unsets a variable of the process environment.
	const key = "JSRT_TEST_SURELY_UNSET_KEY"
	if err := os.Unsetenv(key); err != nil {
		t.Fatal(err)
	}
	err := loadInvalid(t, "toplevel_env.esm.js", Options{})
	line := lineOf(t, "invalid/toplevel_env.esm.js", "process.env")
	want := fmt.Sprintf("failed to import bundle: Error: environment variable %s is not set; bundles must read the environment lazily, inside run (toplevel_env.esm.js:%d:", key, line)
	if !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("got  %s\nwant %s...", err, want)
	}
	// A variable the loader's environment has is readable.
	b, err := Load(readTestdata(t, "invalid/toplevel_env.esm.js"), "toplevel_env.esm.js", Options{
		LookupEnv: func(name string) (string, bool) { return "k", name == key },
	})
	if err != nil {
		t.Fatal(err)
	}
	if d := b.Descriptor().Description; d != "uses k" {
		t.Fatalf("description = %q", d)
	}
}

func TestLoadTopLevelHostCallsFail(t *testing.T) {
	t.Parallel()
	src := `import { spawn } from "node:child_process";
export const run = async function* () {};
spawn("true");
export const descriptor = { description: "d", roles: {}, graph: { edges: [] } };`
	_, err := Load([]byte(src), "spawn.esm.js", Options{})
	if err == nil || !strings.Contains(err.Error(), "child processes are not available while a bundle is validated") || !strings.Contains(err.Error(), "spawn.esm.js:3:") {
		t.Errorf("spawn at top level: %v", err)
	}
}

func TestLoadValidationTimeout(t *testing.T) {
	t.Parallel()
	// The spin never ends: that Load returns at all, with this error, is
	// the timeout working.
	err := loadInvalid(t, "toplevel_spin.esm.js", Options{ValidationTimeout: 200 * time.Millisecond})
	if !strings.Contains(err.Error(), "failed to import bundle: evaluating the top level did not finish within 200ms") {
		t.Fatalf("err = %v", err)
	}
}

func TestTransformIsCached(t *testing.T) {
	// Serial: other tests loading bundles could evict its entry from the shared cache.
	// Unique bytes, so no other test has transformed them already.
	src := append(readTestdata(t, "linear.esm.js"), fmt.Sprintf("\n// %s %d\n", t.Name(), time.Now().UnixNano())...)
	before := TransformCount()
	first, err := Load(src, "cached.esm.js", Options{})
	if err != nil {
		t.Fatal(err)
	}
	second, err := Load(src, "cached.esm.js", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if first.FromCache() || !second.FromCache() {
		t.Fatalf("FromCache: first %v second %v", first.FromCache(), second.FromCache())
	}
	if n := TransformCount() - before; n != 1 {
		t.Fatalf("esbuild ran %d times for two loads of the same bytes", n)
	}
	if first.Hash() != second.Hash() || len(first.Hash()) != 13 {
		t.Fatalf("hashes %q %q", first.Hash(), second.Hash())
	}
	// Parse errors are remembered too.
	bad := []byte(fmt.Sprintf("export const x = ; // %d", time.Now().UnixNano()))
	before = TransformCount()
	_, err1 := Load(bad, "bad.esm.js", Options{})
	_, err2 := Load(bad, "bad.esm.js", Options{})
	if err1 == nil || err2 == nil || err1.Error() != err2.Error() || TransformCount()-before != 1 {
		t.Fatalf("parse error caching: %v / %v, %d transforms", err1, err2, TransformCount()-before)
	}
}

func TestAvailableModulesResolveWithAndWithoutPrefix(t *testing.T) {
	t.Parallel()
	var imports strings.Builder
	for i, m := range AvailableModules() {
		fmt.Fprintf(&imports, "import * as m%d from %q;\n", 2*i, m)
		if !strings.HasPrefix(m, "@") {
			fmt.Fprintf(&imports, "import * as m%d from %q;\n", 2*i+1, "node:"+m)
		}
	}
	src := imports.String() + `export const run = async function* () {};
export const descriptor = { description: typeof m0, roles: {}, graph: { edges: [] } };`
	b, err := Load([]byte(src), "all.esm.js", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if b.Descriptor().Description != "object" {
		t.Fatalf("description = %q", b.Descriptor().Description)
	}
}
