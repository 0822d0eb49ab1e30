package cli

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// newWorkspace makes a fresh workspace and works inside it.
func newWorkspace(t *testing.T, c *cli) string {
	t.Helper()
	parent := t.TempDir()
	inDir(t, parent)
	c.ok("init", "workspace", "ws")
	root := filepath.Join(parent, "ws")
	t.Chdir(root)
	return root
}

var progressLine = regexp.MustCompile(`^build: ([a-z0-9-]+) -> (dist/[a-z0-9-]+\.esm\.js) \((\d+ B|\d+\.\d KB|\d+\.\d MB), \d+ ms\)$`)

func TestFreshWorkspaceBuildsRegistersAndDescribes(t *testing.T) {
	c := newCLI(t)
	root := newWorkspace(t, c)
	out := c.ok("build")
	if m := progressLine.FindStringSubmatch(strings.TrimSpace(out)); m == nil || m[1] != "hello-entry" || m[2] != "dist/hello-entry.esm.js" {
		t.Fatalf("build output = %q", out)
	}
	bundle := readText(t, filepath.Join(root, "dist", "hello-entry.esm.js"))
	if !strings.Contains(bundle, `from "@uncaged/workflow-runtime"`) {
		t.Fatal("the runtime import must stay external")
	}
	if got := readText(t, filepath.Join(root, "dist", "hello-entry.d.ts")); got != "export { run, descriptor } from \"../workflows/hello-entry.js\";\n" {
		t.Fatalf("d.ts = %q", got)
	}
	if got := c.ok("workflow", "add", "hello", "dist/hello-entry.esm.js"); !strings.HasPrefix(got, `registered workflow "hello" from hello-entry.esm.js as `) {
		t.Fatalf("add = %q", got)
	}
	show := c.ok("workflow", "show", "hello")
	if !strings.Contains(show, "hello") {
		t.Fatalf("show = %q", show)
	}
	// The descriptor the build produced is the one the registry stored.
	l := c.root
	matches, _ := filepath.Glob(filepath.Join(l, "bundles", "*.yaml"))
	if len(matches) != 1 {
		t.Fatalf("descriptors stored: %v", matches)
	}
	desc := readText(t, matches[0])
	for _, s := range []string{"greeter", "checker", "greetingApproved", "__start__", "__end__"} {
		if !strings.Contains(desc, s) {
			t.Errorf("descriptor lacks %q:\n%s", s, desc)
		}
	}
}

func TestBuildTemplateEntryAndBundledDependency(t *testing.T) {
	c := newCLI(t)
	root := newWorkspace(t, c)
	c.ok("init", "template", "greeter")
	// A package installed in node_modules is bundled, not imported.
	lib := filepath.Join(root, "node_modules", "shout")
	if err := os.MkdirAll(lib, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(lib, "package.json"), []byte(`{"name":"shout","main":"index.js"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(lib, "index.js"), []byte("exports.shout = (s) => s.toUpperCase() + '!';\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	entry := `import { buildDescriptor, createWorkflow, fnAdapter } from "@uncaged/workflow-runtime";
import { readFile } from "node:fs/promises";
import { greeterTemplateWorkflowDefinition } from "template-greeter";
import { shout } from "shout";

export const descriptor = buildDescriptor(greeterTemplateWorkflowDefinition);
export const run = createWorkflow(greeterTemplateWorkflowDefinition, {
  adapter: fnAdapter(async (ctx) => ({ message: shout(ctx.start.content) + String(typeof readFile) })),
  overrides: null,
});
`
	if err := os.WriteFile(filepath.Join(root, "workflows", "loud-entry.ts"), []byte(entry), 0o644); err != nil {
		t.Fatal(err)
	}
	out := c.ok("build")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var stems []string
	for _, line := range lines {
		m := progressLine.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("progress line %q", line)
		}
		stems = append(stems, m[1])
	}
	if !slices.Equal(stems, []string{"greeter-entry", "hello-entry", "loud-entry"}) {
		t.Fatalf("built %v", stems)
	}
	loud := readText(t, filepath.Join(root, "dist", "loud-entry.esm.js"))
	if strings.Contains(loud, `from "shout"`) || !strings.Contains(loud, "toUpperCase") || !strings.Contains(loud, `from "node:fs/promises"`) {
		t.Fatalf("loud bundle:\n%s", loud)
	}
	c.ok("workflow", "add", "greeter", "dist/greeter-entry.esm.js")
	c.ok("workflow", "add", "loud", "dist/loud-entry.esm.js")
}

func TestBuildSyntaxErrorNamesTheLocationAndWritesNothing(t *testing.T) {
	c := newCLI(t)
	root := newWorkspace(t, c)
	if err := os.WriteFile(filepath.Join(root, "workflows", "bad-entry.ts"), []byte("// broken\nexport const x = ;\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errs, code := c.run("build")
	if code != 1 {
		t.Fatalf("exit %d", code)
	}
	if !strings.Contains(errs, "workflows/bad-entry.ts:2:18: error: Unexpected \";\"") || !strings.Contains(errs, "build failed: 1 of 2 entries") {
		t.Fatalf("stderr = %q", errs)
	}
	// The good entry still builds; the bad one leaves no output behind.
	if !strings.Contains(out, "build: hello-entry -> dist/hello-entry.esm.js") {
		t.Fatalf("stdout = %q", out)
	}
	if _, err := os.Stat(filepath.Join(root, "dist", "bad-entry.esm.js")); !os.IsNotExist(err) {
		t.Fatal("a failed entry was written")
	}
}

func TestBuildRejectsWhatRegistrationWouldReject(t *testing.T) {
	c := newCLI(t)
	root := newWorkspace(t, c)
	cases := map[string]struct{ src, want string }{
		"http-entry.ts": {
			`import { request } from "node:http";
export const descriptor = { description: "x", roles: {}, graph: { edges: [] } };
export const run = async function* () { void request; return { returnCode: 0, summary: "" }; };
`, `disallowed import specifier "node:http"`},
		"default-entry.ts": {
			`export default 1;
export const descriptor = { description: "x", roles: {}, graph: { edges: [] } };
export const run = async function* () { return { returnCode: 0, summary: "" }; };
`, "default export"},
		"norun-entry.ts": {`export const descriptor = { description: "x", roles: {}, graph: { edges: [] } };
`, "run"},
		"missing-entry.ts": {`import { nothing } from "not-installed";
export const run = nothing;
`, `Could not resolve "not-installed"`},
	}
	for name, tc := range cases {
		p := filepath.Join(root, "workflows", name)
		if err := os.WriteFile(p, []byte(tc.src), 0o644); err != nil {
			t.Fatal(err)
		}
		_, errs, code := c.run("build", p)
		if code != 1 || !strings.Contains(errs, tc.want) {
			t.Errorf("%s: exit %d, stderr %q lacks %q", name, code, errs, tc.want)
		}
		if strings.Contains(errs, "as external") {
			t.Errorf("%s: esbuild's external hint leaked: %q", name, errs)
		}
	}
	if entries, _ := os.ReadDir(filepath.Join(root, "dist")); len(entries) != 0 {
		t.Fatalf("rejected bundles were written: %v", entries)
	}
}

func TestBuildArguments(t *testing.T) {
	c := newCLI(t)
	root := newWorkspace(t, c)
	// One entry by path, into another directory.
	out := c.ok("build", "workflows/hello-entry.ts", "--outdir", "out")
	if !strings.Contains(out, "build: hello-entry -> out/hello-entry.esm.js") {
		t.Fatalf("stdout = %q", out)
	}
	if got := readText(t, filepath.Join(root, "out", "hello-entry.d.ts")); got != "export { run, descriptor } from \"../workflows/hello-entry.js\";\n" {
		t.Fatalf("d.ts = %q", got)
	}
	// A workspace given as a directory, from elsewhere.
	t.Chdir(t.TempDir())
	if out := c.ok("build", root); !strings.Contains(out, "dist/hello-entry.esm.js") {
		t.Fatalf("build <dir> = %q", out)
	}
	bare := t.TempDir()
	c.fails("no workflows/ directory in "+bare, "build", bare)
	c.fails("entry not found: nope.ts", "build", "nope.ts")
	c.fails("missing value for --outdir", "build", "--outdir=")
	c.fails("unknown flag: --watch", "build", "--watch")
	if err := os.WriteFile(filepath.Join(root, "notes.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	c.fails("entry must be a .ts or .js file", "build", filepath.Join(root, "notes.txt"))
	c.fails("not both", "build", filepath.Join(root, "workflows", "hello-entry.ts"), root)
	other := filepath.Join(t.TempDir(), "hello-entry.ts")
	if err := os.WriteFile(other, []byte("export const x = 1;\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c.fails("two entries would both write hello-entry.esm.js", "build", filepath.Join(root, "workflows", "hello-entry.ts"), other)

	// A workspace with no entries is not an error, but says so.
	empty := filepath.Join(t.TempDir(), "empty")
	if err := os.MkdirAll(filepath.Join(empty, "workflows"), 0o755); err != nil {
		t.Fatal(err)
	}
	if out, errs, code := c.run("build", empty); code != 0 || out != "" || !strings.Contains(errs, "nothing to build") {
		t.Fatalf("empty: %d %q %q", code, out, errs)
	}
}

func TestFormatSize(t *testing.T) {
	t.Parallel()
	for n, want := range map[int]string{0: "0 B", 1023: "1023 B", 1024: "1.0 KB", 1536: "1.5 KB", 3 << 20: "3.0 MB"} {
		if got := formatSize(n); got != want {
			t.Errorf("formatSize(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestBuildPassesOnWarnings(t *testing.T) {
	c := newCLI(t)
	root := newWorkspace(t, c)
	// Comparing with -0 is legal but suspicious: esbuild warns, build goes on.
	src := `import { buildDescriptor, createWorkflow, fnAdapter, START, END, FALLBACK } from "@uncaged/workflow-runtime";
const def = { description: "w", roles: { a: { description: "a", systemPrompt: "a", schema: { type: "object" } } },
  table: { [START]: [{ condition: FALLBACK, role: "a" }], a: [{ condition: FALLBACK, role: END }] } };
export const descriptor = buildDescriptor(def);
export const run = createWorkflow(def, { adapter: fnAdapter((ctx) => ({ neg: ctx.depth === -0 })), overrides: null });
`
	if err := os.WriteFile(filepath.Join(root, "workflows", "warn-entry.ts"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errs, code := c.run("build", "workflows/warn-entry.ts")
	if code != 0 || !strings.Contains(out, "build: warn-entry -> dist/warn-entry.esm.js") || !strings.Contains(errs, "workflows/warn-entry.ts:5:") || !strings.Contains(errs, ": warning: ") {
		t.Fatalf("%d\n%s\n%s", code, out, errs)
	}
}

// TestBuildCarriesASourceMap: a built bundle is still one file, with an
// inline source map whose sources are relative to the workspace, and its
// bytes do not depend on where the workspace lives or on --outdir.
func TestBuildCarriesASourceMap(t *testing.T) {
	c := newCLI(t)
	root := newWorkspace(t, c)
	c.ok("build")
	bundle := readText(t, filepath.Join(root, "dist", "hello-entry.esm.js"))
	const prefix = "//# sourceMappingURL=data:application/json;base64,"
	i := strings.LastIndex(bundle, prefix)
	if i < 0 {
		t.Fatalf("no inline source map:\n%s", bundle)
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(bundle[i+len(prefix):]))
	if err != nil {
		t.Fatal(err)
	}
	var sm struct {
		Sources        []string `json:"sources"`
		SourcesContent []string `json:"sourcesContent"`
		Mappings       string   `json:"mappings"`
	}
	if err := json.Unmarshal(raw, &sm); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(sm.Sources, []string{"workflows/hello-entry.ts"}) || sm.SourcesContent != nil || sm.Mappings == "" {
		t.Fatalf("source map = %s", raw)
	}
	// The same workspace elsewhere, built into another directory, gives the
	// same bytes: the hash workflow add stores is the source's, not the
	// machine's.
	moved := filepath.Join(t.TempDir(), "elsewhere")
	if err := os.CopyFS(moved, os.DirFS(root)); err != nil {
		t.Fatal(err)
	}
	t.Chdir(moved)
	c.ok("build", "--outdir", "out")
	if again := readText(t, filepath.Join(moved, "out", "hello-entry.esm.js")); again != bundle {
		t.Fatal("the bundle's bytes depend on the workspace's location or --outdir")
	}
	if strings.Contains(bundle, root) {
		t.Fatal("the bundle holds an absolute path")
	}
}

// fakeTSC writes an executable tsc into dir that records its arguments and
// working directory in dir/tsc.log, prints output and exits with code.
func fakeTSC(t *testing.T, dir, output string, code int) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(dir, "tsc.log")
	script := fmt.Sprintf("#!/bin/sh\necho \"$PWD $*\" > %q\nprintf '%%s\\n' %q\nexit %d\n", log, output, code)
	if err := os.WriteFile(filepath.Join(dir, "tsc"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return log
}

// TestBuildCheck: without --check, build says it does not type-check;
// --check runs tsc --noEmit on the workspace's project first, and builds
// nothing when tsc fails or cannot be found.
func TestBuildCheck(t *testing.T) {
	c := newCLI(t)
	root := newWorkspace(t, c)
	c.env["PATH"] = t.TempDir() // no tsc anywhere

	_, errs, code := c.run("build")
	if code != 0 || errs != "build: types are not checked (esbuild strips them); build --check runs tsc first\n" {
		t.Fatalf("build: exit %d, stderr %q", code, errs)
	}
	dist := filepath.Join(root, "dist")
	if err := os.RemoveAll(dist); err != nil {
		t.Fatal(err)
	}

	c.fails("build --check: tsc not found in node_modules/.bin or on PATH; install it with: npm install --save-dev typescript", "build", "--check")
	if _, err := os.Stat(dist); !os.IsNotExist(err) {
		t.Fatal("build --check without tsc wrote bundles")
	}

	// A tsc on PATH that passes: the build goes on, and says so.
	onPath := t.TempDir()
	log := fakeTSC(t, onPath, "", 0)
	c.env["PATH"] = onPath
	out, errs, code := c.run("build", "--check")
	if code != 0 || errs != "" || !strings.HasPrefix(out, "build: types checked by "+filepath.Join(onPath, "tsc")+" (") || !strings.Contains(out, "build: hello-entry -> dist/hello-entry.esm.js") {
		t.Fatalf("build --check: exit %d\nstdout %q\nstderr %q", code, out, errs)
	}
	if got := readText(t, log); got != root+" --noEmit -p tsconfig.json\n" {
		t.Fatalf("tsc ran as %q", got)
	}
	if err := os.RemoveAll(dist); err != nil {
		t.Fatal(err)
	}

	// The workspace's own tsc comes first; its diagnostics are shown and
	// nothing is built.
	fakeTSC(t, filepath.Join(root, "node_modules", ".bin"), "workflows/hello-entry.ts(3,7): error TS2322: Type 'number' is not assignable to type 'string'.", 2)
	out, errs, code = c.run("build", "--check")
	if code != 1 || out != "" {
		t.Fatalf("failing tsc: exit %d, stdout %q", code, out)
	}
	want := "workflows/hello-entry.ts(3,7): error TS2322: Type 'number' is not assignable to type 'string'.\nbuild: type check failed (node_modules/.bin/tsc exited 2); nothing was built\n"
	if errs != want {
		t.Fatalf("stderr %q, want %q", errs, want)
	}
	if _, err := os.Stat(dist); !os.IsNotExist(err) {
		t.Fatal("a failed type check wrote bundles")
	}
}

// TestTSCArgsWithoutTSConfig: entries outside a project are checked alone,
// with the settings build bundles for.
func TestTSCArgsWithoutTSConfig(t *testing.T) {
	t.Parallel()
	plan := buildPlan{dir: t.TempDir(), entries: []string{"/x/a-entry.ts"}}
	if got := strings.Join(tscArgs(plan), " "); got != "--noEmit --strict --skipLibCheck --target ES2020 --module ESNext --moduleResolution Bundler /x/a-entry.ts" {
		t.Fatalf("args = %q", got)
	}
}
