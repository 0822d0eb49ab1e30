package cli

import (
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
