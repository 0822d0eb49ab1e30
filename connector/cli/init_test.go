package cli

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// inDir runs the rest of the test with dir as the working directory, which
// init and build resolve their arguments against.
func inDir(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
}

func readText(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// tree lists the files under dir, relative and slash-separated.
func tree(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			rel, err := filepath.Rel(dir, p)
			if err != nil {
				return err
			}
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

func TestInitWorkspaceWritesTheScaffold(t *testing.T) {
	c := newCLI(t)
	parent := t.TempDir()
	inDir(t, parent)
	root := filepath.Join(parent, "demo")
	if got := c.ok("init", "workspace", "demo"); got != "initialized workflow workspace at "+root+"\n" {
		t.Fatalf("stdout = %q", got)
	}
	want := []string{".gitignore", "AGENTS.md", "README.md", "package.json", "templates/.gitkeep", "tsconfig.json",
		"types/workflow-runtime.d.ts", "workflows/hello-entry.ts", "workflows/package.json"}
	if got := tree(t, root); !slices.Equal(got, want) {
		t.Fatalf("files = %v\nwant %v", got, want)
	}
	var pkg struct {
		Name       string
		Private    bool
		Type       string
		Workspaces []string
		Scripts    map[string]string
	}
	if err := json.Unmarshal([]byte(readText(t, filepath.Join(root, "package.json"))), &pkg); err != nil {
		t.Fatal(err)
	}
	if pkg.Name != "demo" || !pkg.Private || pkg.Type != "module" || !slices.Equal(pkg.Workspaces, []string{"templates/*", "workflows"}) ||
		pkg.Scripts["build"] != "uncaged-workflow build" {
		t.Fatalf("package.json = %+v", pkg)
	}
	var tsconfig struct {
		CompilerOptions struct {
			Strict bool
			Paths  map[string][]string
		}
	}
	if err := json.Unmarshal([]byte(readText(t, filepath.Join(root, "tsconfig.json"))), &tsconfig); err != nil {
		t.Fatal(err)
	}
	if !tsconfig.CompilerOptions.Strict || tsconfig.CompilerOptions.Paths["@uncaged/workflow-runtime"][0] != "./types/workflow-runtime.d.ts" {
		t.Fatalf("tsconfig = %+v", tsconfig)
	}
	readme := readText(t, filepath.Join(root, "README.md"))
	for _, s := range []string{"# demo", "uncaged-workflow build", "uncaged-workflow workflow add", "uncaged-workflow run"} {
		if !strings.Contains(readme, s) {
			t.Errorf("README.md lacks %q", s)
		}
	}
	types := readText(t, filepath.Join(root, "types", "workflow-runtime.d.ts"))
	for _, name := range []string{"START", "END", "FALLBACK", "createWorkflow", "buildDescriptor", "tableToModerator", "fnAdapter",
		"workflowAdapter", "workflowAsAgent", "agentAdapter", "llmAdapter", "reactAdapter", "cliAdapter", "cursorAdapter",
		"hermesAdapter", "execAdapter", "createAgentAdapter", "WorkflowRuntime", "ThreadContext"} {
		if !regexp.MustCompile(`export (declare )?(const|function|type) ` + name + `\b`).MatchString(types) {
			t.Errorf("workflow-runtime.d.ts does not declare %s", name)
		}
	}
}

func TestInitWorkspaceAgentsGuide(t *testing.T) {
	c := newCLI(t)
	inDir(t, t.TempDir())
	c.ok("init", "workspace", "ws")
	guide := readText(t, filepath.Join("ws", "AGENTS.md"))
	for _, s := range []string{"Project structure", "Core concepts", "Development flow", "Coding rules", "Template reuse",
		"Build and test", "Common pitfalls", "RoleMeta", "RoleDefinition", "WorkflowDefinition", "ModeratorTable", "AdapterFn",
		"ExtractFn", "Crockford Base32", "uncaged-workflow build", "uncaged-workflow workflow add", "uncaged-workflow run",
		"CLAUDE.md", "docs/architecture.md"} {
		if !strings.Contains(guide, s) {
			t.Errorf("AGENTS.md lacks %q", s)
		}
	}
	for _, re := range []string{`(?i)type[\s\S]*interface`, `(?i)function[\s\S]*class`, `(?i)no[\s\S]*default export`,
		`(?i)no[\s\S]*console`, `(?i)no[\s\S]*dynamic .?import`} {
		if !regexp.MustCompile(re).MatchString(guide) {
			t.Errorf("AGENTS.md does not match %s", re)
		}
	}
}

func TestInitWorkspaceNames(t *testing.T) {
	c := newCLI(t)
	parent := t.TempDir()
	inDir(t, parent)
	if got := c.ok("init", "workspace", "a/b"); got != "initialized workflow workspace at "+filepath.Join(parent, "a", "b")+"\n" {
		t.Fatalf("nested: %q", got)
	}
	if !strings.Contains(readText(t, filepath.Join(parent, "a", "b", "package.json")), `"name": "b"`) {
		t.Fatal("nested workspace is not named after its directory")
	}
	abs := filepath.Join(t.TempDir(), "My Flows")
	c.ok("init", "workspace", abs)
	if !strings.Contains(readText(t, filepath.Join(abs, "package.json")), `"name": "my-flows"`) {
		t.Fatal("package name is not npm-safe")
	}
	before := tree(t, parent)
	for _, bad := range []string{"", ".", "..", "a/..", "  "} {
		c.fails("invalid workspace path: "+bad, "init", "workspace", bad)
	}
	c.fails("directory already exists: "+filepath.Join(parent, "a", "b"), "init", "workspace", "a/b")
	c.fails("directory already exists: "+filepath.Join(parent, "a"), "init", "workspace", "a")
	c.fails("init workspace requires <name>", "init", "workspace")
	c.fails("too many arguments", "init", "workspace", "x", "y")
	c.fails("unknown flag: --force", "init", "workspace", "x", "--force")
	if after := tree(t, parent); !slices.Equal(before, after) {
		t.Fatalf("a refused init changed files:\n%v\n%v", before, after)
	}
}

func TestInitGroupHelpAndUnknownSubcommand(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	out, _, code := c.run("init")
	if code != 1 || !strings.Contains(out, "init subcommands:") || !strings.Contains(out, "uncaged-workflow init workspace <name>") ||
		!strings.Contains(out, "uncaged-workflow init template <name>") {
		t.Fatalf("init = %d %q", code, out)
	}
	if out := c.ok("init", "--help"); !strings.Contains(out, "init workspace <name>") {
		t.Fatalf("init --help = %q", out)
	}
	c.fails(`unknown command "project" for "uncaged-workflow init"`, "init", "project")
	if out := c.ok("init", "workspace", "--help"); !strings.Contains(out, "Initialize a new workflow workspace") {
		t.Fatalf("init workspace --help = %q", out)
	}
}

func TestInitTemplate(t *testing.T) {
	c := newCLI(t)
	parent := t.TempDir()
	inDir(t, parent)
	c.ok("init", "workspace", "ws")
	root := filepath.Join(parent, "ws")
	nested := filepath.Join(root, "workflows", "deep")
	inDir(t, nested)
	tpl := filepath.Join(root, "templates", "review-loop")
	entry := filepath.Join(root, "workflows", "review-loop-entry.ts")
	if got := c.ok("init", "template", "review-loop"); got != "initialized template at "+tpl+"\ncreated workflow entry at "+entry+"\n" {
		t.Fatalf("stdout = %q", got)
	}
	want := []string{"package.json", "src/index.ts", "src/moderator.ts", "src/roles.ts", "tsconfig.json"}
	if got := tree(t, tpl); !slices.Equal(got, want) {
		t.Fatalf("template files = %v", got)
	}
	var pkg struct{ Name, Type string }
	if err := json.Unmarshal([]byte(readText(t, filepath.Join(tpl, "package.json"))), &pkg); err != nil {
		t.Fatal(err)
	}
	if pkg.Name != "template-review-loop" || pkg.Type != "module" {
		t.Fatalf("template package.json = %+v", pkg)
	}
	if ts := readText(t, filepath.Join(tpl, "tsconfig.json")); !strings.Contains(ts, `"extends": "../../tsconfig.json"`) {
		t.Fatalf("template tsconfig = %s", ts)
	}
	for _, f := range []string{"src/roles.ts", "src/moderator.ts", "src/index.ts"} {
		src := readText(t, filepath.Join(tpl, f))
		for _, banned := range []string{"interface ", "?:", "export default", "__NAME__", "__IDENT__", "__TYPE__", "require("} {
			if strings.Contains(src, banned) {
				t.Errorf("%s contains %q", f, banned)
			}
		}
	}
	if m := readText(t, filepath.Join(tpl, "src", "moderator.ts")); !strings.Contains(m, "ModeratorTable") || !strings.Contains(m, "reviewLoopTemplateTable") {
		t.Fatalf("moderator.ts = %s", m)
	}
	if idx := readText(t, filepath.Join(tpl, "src", "index.ts")); !strings.Contains(idx, "export type { ReviewLoopTemplateMeta }") {
		t.Fatalf("index.ts = %s", idx)
	}
	if e := readText(t, entry); !strings.Contains(e, `from "template-review-loop"`) || !strings.Contains(e, "reviewLoopTemplateWorkflowDefinition") {
		t.Fatalf("entry = %s", e)
	}

	// An existing entry is the author's: a second template of another name
	// never touches it, and a hand-written entry of the same stem is kept.
	if err := os.WriteFile(filepath.Join(root, "workflows", "other-entry.ts"), []byte("// mine\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := c.ok("init", "template", "other"); strings.Contains(got, "created workflow entry") {
		t.Fatalf("entry overwritten: %q", got)
	}
	if readText(t, filepath.Join(root, "workflows", "other-entry.ts")) != "// mine\n" {
		t.Fatal("hand-written entry changed")
	}

	before := tree(t, root)
	c.fails("template already exists: "+tpl, "init", "template", "review-loop")
	for _, bad := range []string{"a/b", "..", ".", "", "Bad", "1st", "a--b", "a-", "a_b"} {
		c.fails("invalid template name", "init", "template", bad)
	}
	c.fails("init template requires <name>", "init", "template")
	if after := tree(t, root); !slices.Equal(before, after) {
		t.Fatal("a refused init template changed files")
	}

	inDir(t, t.TempDir())
	c.fails(`not inside a workflow workspace (no package.json with workspaces containing "templates/*")`, "init", "template", "x")
}

// A template's one role is named after the template (it was "greeter"
// whatever the template was called): the built workflow's descriptor has
// that role, routed from the start to the end, and nothing of a greeter.
func TestInitTemplateNamesItsRoleAfterTheTemplate(t *testing.T) {
	c := newCLI(t)
	root := newWorkspace(t, c)
	names := []string{"reviewer", "review-loop", "a1", "x"}
	for _, name := range names {
		c.ok("init", "template", name)
		for _, f := range []string{"src/roles.ts", "src/moderator.ts", "src/index.ts"} {
			if src := readText(t, filepath.Join(root, "templates", name, f)); strings.Contains(strings.ToLower(src), "greet") {
				t.Errorf("template %s: %s still names a greeter:\n%s", name, f, src)
			}
		}
	}
	c.ok("build")
	for _, name := range names {
		out := c.ok("workflow", "add", name, "dist/"+name+"-entry.esm.js")
		hash := strings.TrimSpace(out[strings.LastIndex(out, " ")+1:])
		desc := readText(t, filepath.Join(c.root, "bundles", hash+".yaml"))
		for _, want := range []string{"\"roles\":\n  \"" + name + "\":", "\"from\": \"__start__\"\n      \"to\": \"" + name + "\"", "\"from\": \"" + name + "\"\n      \"to\": \"__end__\""} {
			if !strings.Contains(desc, want) {
				t.Errorf("template %s: descriptor lacks %q:\n%s", name, want, desc)
			}
		}
		if strings.Contains(desc, "greeter") {
			t.Errorf("template %s: descriptor names a greeter:\n%s", name, desc)
		}
	}
}

func TestWorkspaceRootDetection(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cases := []struct {
		pkg  string
		want bool
	}{
		{`{"workspaces": ["templates/*"]}`, true},
		{`{"workspaces": {"packages": ["templates/*", "x"]}}`, true},
		{`{"workspaces": ["packages/*"]}`, false},
		{`{"workspaces": "templates/*"}`, false},
		{`{"name": "x"}`, false},
		{`not json`, false},
	}
	for _, tc := range cases {
		if err := os.WriteFile(filepath.Join(dir, "package.json"), []byte(tc.pkg), 0o644); err != nil {
			t.Fatal(err)
		}
		if got := isWorkspaceRoot(dir); got != tc.want {
			t.Errorf("%s: isWorkspaceRoot = %v", tc.pkg, got)
		}
	}
}

// typeScriptCompiler finds tsc: on PATH, or the dashboard's dev dependency.
func typeScriptCompiler(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("tsc"); err == nil {
		return p
	}
	p, err := filepath.Abs(filepath.Join("..", "..", "gateway", "web", "node_modules", ".bin", "tsc"))
	if err != nil {
		t.Skip(err)
	}
	if _, err := os.Stat(p); err != nil {
		t.Skip("tsc not installed (npm ci in gateway/web provides it)")
	}
	return p
}

// TestScaffoldTypeChecks proves the generated TypeScript and the runtime
// declarations agree, under strict mode, for every adapter.
func TestScaffoldTypeChecks(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the TypeScript compiler")
	}
	tsc := typeScriptCompiler(t)
	c := newCLI(t)
	root := newWorkspace(t, c)
	c.ok("init", "template", "review-loop")
	entry := `import {
  agentAdapter, buildDescriptor, cliAdapter, collectCasRefs, createAgentAdapter, createWorkflow, cursorAdapter,
  execAdapter, hermesAdapter, llmAdapter, reactAdapter, tableToModerator, workflowAdapter, workflowAsAgent,
} from "@uncaged/workflow-runtime";
import { reviewLoopTemplateWorkflowDefinition } from "template-review-loop";
import type { ReviewLoopTemplateMeta } from "template-review-loop";

const sample: ReviewLoopTemplateMeta = { "review-loop": { message: "x" } };
export const refs = collectCasRefs({ type: "string", casRef: true }, sample["review-loop"].message);
export const pick = tableToModerator(reviewLoopTemplateWorkflowDefinition.table);
export const descriptor = buildDescriptor(reviewLoopTemplateWorkflowDefinition);
export const run = createWorkflow(reviewLoopTemplateWorkflowDefinition, {
  adapter: llmAdapter({ model: "default", maxRounds: 4 }),
  overrides: {
    a: reactAdapter({ workspace: "/tmp", tools: ["read_file"] }),
    b: cliAdapter({ command: "claude", args: ["-p", "{prompt}"], timeout: 1000 }),
    c: cursorAdapter(),
    d: hermesAdapter({ model: "m" }),
    e: execAdapter({ command: "/bin/true" }),
    f: workflowAdapter("child"),
    g: workflowAsAgent("child"),
    h: agentAdapter({ type: "exec", command: "/bin/true" }),
    i: createAgentAdapter(async (_ctx, opts: { prompt: string }) => opts.prompt, async (_ctx, prompt) => ({ prompt })),
  },
});
`
	if err := os.WriteFile(filepath.Join(root, "workflows", "all-entry.ts"), []byte(entry), 0o644); err != nil {
		t.Fatal(err)
	}
	// The workspace project includes templates/*/src, so one run covers both.
	if out, err := exec.Command(tsc, "-p", root).CombinedOutput(); err != nil {
		t.Fatalf("tsc -p %s: %v\n%s", root, err, out)
	}
}
