package jsrt

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/evanw/esbuild/pkg/api"
)

// buildWithSourceMap bundles testdata/sourcemap/workflows/<entry> the way
// `uncaged-workflow build` does: one ESM file with an inline source map
// whose sources are relative to the workspace.
func buildWithSourceMap(t *testing.T, entry string) []byte {
	t.Helper()
	ws, err := filepath.Abs(filepath.Join("testdata", "sourcemap"))
	if err != nil {
		t.Fatal(err)
	}
	res := api.Build(api.BuildOptions{
		EntryPoints:    []string{filepath.Join(ws, "workflows", entry)},
		AbsWorkingDir:  ws,
		Bundle:         true,
		Outfile:        strings.TrimSuffix(entry, ".ts") + ".esm.js",
		Format:         api.FormatESModule,
		Platform:       api.PlatformNode,
		Target:         api.ES2020,
		External:       []string{RuntimeModule},
		Sourcemap:      api.SourceMapInline,
		SourcesContent: api.SourcesContentExclude,
		LogLevel:       api.LogLevelSilent,
	})
	if len(res.Errors) > 0 {
		t.Fatalf("esbuild: %+v", res.Errors)
	}
	if len(res.OutputFiles) != 1 {
		t.Fatalf("esbuild wrote %d files", len(res.OutputFiles))
	}
	return res.OutputFiles[0].Contents
}

// TestSourceMapPointsErrorsAtTheSource: a role that throws in a bundle
// built with an inline source map reports the TypeScript file's line, in
// the error and in the logged stack, not the bundle's.
func TestSourceMapPointsErrorsAtTheSource(t *testing.T) {
	t.Parallel()
	src := buildWithSourceMap(t, "boom-entry.ts")
	if !strings.Contains(string(src), "//# sourceMappingURL=data:application/json;base64,") {
		t.Fatal("test bug: the bundle has no inline source map")
	}
	b, err := Load(src, "16EXBRW66PEZE.esm.js", Options{})
	if err != nil {
		t.Fatal(err)
	}
	h := newFakeHost(t)
	_, _, err = drive(t, b, h, threadFor(b, "the prompt"))
	if err == nil {
		t.Fatal("no error")
	}
	var je *JSError
	if !strings.Contains(err.Error(), "Error: second role exploded on the prompt") || !errors.As(err, &je) {
		t.Fatalf("error = %v", err)
	}
	if !regexp.MustCompile(`^workflows/boom-entry\.ts:9:\d+$`).MatchString(je.Location) {
		t.Fatalf("location %q, want workflows/boom-entry.ts:9:<col>", je.Location)
	}
	logs := h.logged("ERROR")
	if len(logs) != 1 || !strings.Contains(logs[0], "at explode (workflows/boom-entry.ts:9:") || strings.Contains(logs[0], ".esm.js:") {
		t.Fatalf("logged stack: %q", logs)
	}
}

// TestSourceMapAppliesToTopLevelErrors: a throw while the bundle loads is
// mapped too.
func TestSourceMapAppliesToTopLevelErrors(t *testing.T) {
	t.Parallel()
	_, err := Load(buildWithSourceMap(t, "top-entry.ts"), "top.esm.js", Options{})
	if err == nil || !regexp.MustCompile(`Error: top level of the source \(workflows/top-entry\.ts:3:\d+\)$`).MatchString(err.Error()) {
		t.Fatalf("err = %v", err)
	}
}

// TestLocationIsTheBundlesFrame: when the engine's own JavaScript throws
// on the bundle's behalf, the location is still the source's frame that
// called it, not the engine module's.
func TestLocationIsTheBundlesFrame(t *testing.T) {
	t.Parallel()
	_, err := Load(buildWithSourceMap(t, "clone-entry.ts"), "clone.esm.js", Options{})
	var je *JSError
	if !errors.As(err, &je) || !regexp.MustCompile(`^workflows/clone-entry\.ts:4:\d+$`).MatchString(je.Location) {
		t.Fatalf("err = %v", err)
	}
	if !strings.Contains(je.Stack, "internal:") {
		t.Fatalf("test bug: the engine's code is not on the stack:\n%s", je.Stack)
	}
}

// TestSourceMapFileURLsAreNotRead: a bundle naming a source map file makes
// the host read nothing; its positions stay the bundle's own.
func TestSourceMapFileURLsAreNotRead(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	mapFile := filepath.Join(dir, "secret.map")
	if err := os.WriteFile(mapFile, []byte(`{"version":3,"sources":["SECRET.ts"],"mappings":"AAAA"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, comment := range []string{
		"//# sourceMappingURL=file://" + mapFile,
		"//@ sourceMappingURL=FILE://" + mapFile,
		"/*# sourceMappingURL=file://" + mapFile + " */",
	} {
		src := "\nthrow new Error(`x`);\n" + comment + "\n"
		_, err := Load([]byte(src), "plain.esm.js", Options{})
		if err == nil || !strings.Contains(err.Error(), "plain.esm.js:2:") || strings.Contains(err.Error(), "SECRET") {
			t.Errorf("%s: err = %v", comment, err)
		}
	}
}

// TestInertSourceMapURLs: inline maps pass, anything else is outvoted by
// an appended comment esbuild does not follow.
func TestInertSourceMapURLs(t *testing.T) {
	t.Parallel()
	inline := "//# sourceMappingURL=data:application/json;base64,e30="
	cases := []struct{ in, want string }{
		{"code();\n", "code();\n"},
		{"code();\n" + inline, "code();\n" + inline},
		{"code();\n//# sourceMappingURL=code.js.map", "code();\n//# sourceMappingURL=code.js.map\n//# sourceMappingURL=about:blank\n"},
		{"code();\n//# sourceMappingURL=file:///etc/passwd", "code();\n//# sourceMappingURL=file:///etc/passwd\n//# sourceMappingURL=about:blank\n"},
		// A string that looks like a comment, then the real inline map: the
		// inline map is restated last.
		{"s = '//# sourceMappingURL=file:///x';\n" + inline, "s = '//# sourceMappingURL=file:///x';\n" + inline + "\n" + inline + "\n"},
	}
	for _, c := range cases {
		if got := inertSourceMapURLs(c.in); got != c.want {
			t.Errorf("inertSourceMapURLs(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
