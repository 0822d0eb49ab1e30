package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The fake agent CLIs of the compatibility bundle: each records its
// arguments and working directory in $COMPAT_RECORD/<name>, and answers
// its role's meta as JSON, which the engine's command agents take as is.
const (
	fakeCursor = `#!/bin/sh
{ pwd; printf '%s\n' "$@"; } > "$COMPAT_RECORD/cursor"
echo 'All green.'
echo '{"status":"passed","summary":"the greeting is there"}'
`
	fakeHermes = `#!/bin/sh
{ pwd; printf '%s\n' "$@"; } > "$COMPAT_RECORD/hermes"
echo '{"committed":true,"message":"Add a greeting"}'
`
)

// workspaceLine is how the task names the workspace the cursor agent's
// workspace extraction reads.
var workspaceLine = regexp.MustCompile(`(?m)^Workspace: (\S+)$`)

// extractingFake serves the fake model, and answers the engine's extract
// requests itself (the fake plays only planner, coder and reviewer): the
// workspace a cursor agent without one asks for, read from the task.
func extractingFake(t *testing.T, f *fakeModel) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var req chatRequest
		if json.Unmarshal(raw, &req) == nil && len(req.Messages) >= 2 &&
			strings.HasPrefix(req.Messages[0].text(), "You extract structured metadata") {
			m := workspaceLine.FindStringSubmatch(req.Messages[1].text())
			if m == nil {
				http.Error(w, "extract: no Workspace: line in "+req.Messages[1].text(), http.StatusBadRequest)
				return
			}
			turn := modelTurn{text: argsJSON(map[string]string{"workspace": m[1]})}
			if req.Stream {
				writeStream(w, turn)
			} else {
				writeJSON(w, turn)
			}
			return
		}
		r.Body = io.NopCloser(strings.NewReader(string(raw)))
		f.handle(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// writeExecutable writes a script into dir.
func writeExecutable(t *testing.T, dir, name, script string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestOriginalBuiltDevelopBundle registers a develop-style bundle built
// the original's way — its @uncaged/workflow-agent-* and utility imports
// left external — and runs it to completion: planner and reviewer on the
// llm package, the coder on the react package with its default tools, the
// tester on cursor-agent (whose workspace the extract model reads from
// the task) and the committer on hermes, both fake CLIs on PATH. Before
// the engine provided those packages, `workflow add` refused the bundle
// (disallowed import specifier "@uncaged/workflow-agent-cursor").
func TestOriginalBuiltDevelopBundle(t *testing.T) {
	t.Parallel()
	f := newFakeModel(t, false)
	model := extractingFake(t, f)
	root := engineRoot(t)
	if r := run(t, root, "setup", "--provider", "fake", "--base-url", model.URL+"/v1", "--api-key", fakeAPIKey, "--default-model", "fake/m1"); r.code != 0 {
		t.Fatalf("setup: %+v", r)
	}

	bin, record, workspace := t.TempDir(), t.TempDir(), t.TempDir()
	env := []string{
		"PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH"),
		"WORKFLOW_CURSOR_COMMAND=" + writeExecutable(t, bin, "cursor-agent", fakeCursor),
		"WORKFLOW_HERMES_COMMAND=" + writeExecutable(t, bin, "hermes", fakeHermes),
		"COMPAT_RECORD=" + record,
	}
	// The template reads its agents' commands at its top level, so adding
	// it needs them set, as it did in the original.
	if r := runEnv(t, nil, "", root, "workflow", "add", "develop", filepath.Join("testdata", "compat-develop.esm.js")); r.code != 1 ||
		!strings.Contains(r.stderr, "set WORKFLOW_CURSOR_COMMAND") {
		t.Fatalf("add without WORKFLOW_CURSOR_COMMAND: %+v", r)
	}
	if r := runEnv(t, env, "", root, "workflow", "add", "develop", filepath.Join("testdata", "compat-develop.esm.js")); r.code != 0 ||
		!strings.Contains(r.stdout, `registered workflow "develop"`) {
		t.Fatalf("workflow add: %+v", r)
	}

	// The coder's tools work in the thread's directory, as the original's
	// worked in the process's.
	r := runEnv(t, env, workspace, root, "run", "develop", "--prompt", "Write a greeting file.\nWorkspace: "+workspace)
	id := strings.TrimSpace(r.stdout)
	if r.code != 0 || len(id) != 26 {
		t.Fatalf("run: %+v", r)
	}
	s := finished(t, root, id)
	if want := "planner,coder,reviewer,coder,reviewer,tester,committer"; s.Status != "completed" || s.Result.ReturnCode != 0 || roles(s) != want {
		t.Fatalf("thread: roles %s, %+v; want %s", roles(s), s, want)
	}
	if !strings.Contains(s.Steps[0].Content, `"status":"planned"`) || s.Steps[4].Content != `{"status":"approved","issues":[]}` ||
		s.Steps[5].Content != `{"status":"passed","summary":"the greeting is there"}` ||
		s.Steps[6].Content != `{"committed":true,"message":"Add a greeting"}` {
		t.Errorf("step contents: %+v", s.Steps)
	}
	if got, err := os.ReadFile(filepath.Join(workspace, greetingFile)); err != nil || string(got) != finalGreeting {
		t.Errorf("%s in the workspace = %q, %v; want %q", greetingFile, got, err, finalGreeting)
	}
	for _, c := range f.seen() {
		if c.model != "m1" || c.auth != "Bearer "+fakeAPIKey {
			t.Errorf("the %s request named model %q with Authorization %q", c.role, c.model, c.auth)
		}
	}

	// cursor-agent ran in the extracted workspace with the original's
	// arguments; hermes with its own. Both got the role's prompt and the
	// thread input.
	cursor := readRecord(t, record, "cursor")
	if cursor[0] != workspace || !hasArgs(cursor, "--model", "auto") || !hasArgs(cursor, "--workspace", workspace) ||
		!hasArgs(cursor, "--output-format", "text", "--trust", "--force") || cursor[1] != "-p" ||
		!strings.Contains(strings.Join(cursor, "\n"), "You are the tester.") || !strings.Contains(strings.Join(cursor, "\n"), "## Task") {
		t.Errorf("cursor-agent ran as %q", cursor)
	}
	hermes := readRecord(t, record, "hermes")
	if !hasArgs(hermes, "chat", "-q") || !hasArgs(hermes, "--yolo", "--max-turns", "90", "--quiet") ||
		!strings.Contains(strings.Join(hermes, "\n"), "You are the committer.") {
		t.Errorf("hermes ran as %q", hermes)
	}
}

// readRecord reads what a fake CLI recorded: its working directory, then
// its arguments (multi-line ones spread over several lines).
func readRecord(t *testing.T, dir, name string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatalf("%s never ran: %v", name, err)
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

// hasArgs says whether seq appears in args, consecutively.
func hasArgs(args []string, seq ...string) bool {
	for i := 0; i+len(seq) <= len(args); i++ {
		if strings.Join(args[i:i+len(seq)], "\x00") == strings.Join(seq, "\x00") {
			return true
		}
	}
	return false
}

// npmBundle imports a package the engine does not provide, as a bundle
// the original's build wrote for a workspace with that dependency
// installed would.
const npmBundle = `import { createWorkflow, END, START } from "@uncaged/workflow-runtime";
import { greet } from "compat-greeting";
import shout from "compat-greeting/shout";
var definition = {
  description: "Greets with an npm package",
  roles: { greeter: { description: "greets", systemPrompt: "Greet.", schema: { type: "object" } } },
  table: { [START]: [{ condition: "FALLBACK", role: "greeter" }], greeter: [{ condition: "FALLBACK", role: END }] },
};
export var descriptor = { description: definition.description, roles: { greeter: { description: "greets", systemPrompt: "Greet.", schema: { type: "object" } } }, graph: { edges: [] } };
export var run = createWorkflow(definition, {
  adapter: () => async (ctx) => ({ meta: { greeting: shout(greet(ctx.start.content)) }, childThread: null }),
  overrides: null,
});
`

// TestBundleImportsFromNodeModules: `workflow add` bundles a package the
// engine does not provide from node_modules beside the bundle (here one
// level up, as Node looks), and the registered bundle runs with it; a
// package that is not installed is refused with what to do, and nothing
// is registered. Before, both were refused as disallowed imports.
func TestBundleImportsFromNodeModules(t *testing.T) {
	t.Parallel()
	root := engineRoot(t)
	project := t.TempDir()
	pkg := filepath.Join(project, "node_modules", "compat-greeting")
	if err := os.MkdirAll(pkg, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, text := range map[string]string{
		"package.json": `{"name":"compat-greeting","version":"1.0.0","type":"module","exports":{".":"./index.js","./shout":"./shout.js"}}`,
		"index.js":     "export function greet(name) { return `hello, ${name}`; }\n",
		"shout.js":     "export default function shout(s) { return s.toUpperCase() + \"!\"; }\n",
	} {
		if err := os.WriteFile(filepath.Join(pkg, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	dist := filepath.Join(project, "dist")
	if err := os.Mkdir(dist, 0o755); err != nil {
		t.Fatal(err)
	}
	bundle := filepath.Join(dist, "greet.esm.js")
	if err := os.WriteFile(bundle, []byte(npmBundle), 0o644); err != nil {
		t.Fatal(err)
	}
	r := run(t, root, "workflow", "add", "greet", bundle)
	if r.code != 0 || !strings.Contains(r.stderr, "bundled compat-greeting, compat-greeting/shout from node_modules") {
		t.Fatalf("workflow add: %+v", r)
	}
	s := finished(t, root, start(t, root, "greet", "--prompt", "world"))
	if s.Status != "completed" || len(s.Steps) != 1 || s.Steps[0].Content != `{"greeting":"HELLO, WORLD!"}` {
		t.Errorf("thread = %+v", s)
	}

	// Elsewhere there is no node_modules: nothing is registered.
	lone := filepath.Join(t.TempDir(), "lone.esm.js")
	if err := os.WriteFile(lone, []byte(npmBundle), 0o644); err != nil {
		t.Fatal(err)
	}
	r = run(t, root, "workflow", "add", "lone", lone)
	if r.code != 1 || !strings.Contains(r.stderr, `cannot resolve import "compat-greeting"`) ||
		!strings.Contains(r.stderr, "npm install compat-greeting") {
		t.Fatalf("add without node_modules: %+v", r)
	}
	if r := run(t, root, "workflow", "show", "lone"); r.code == 0 {
		t.Errorf("a bundle whose import was not found was registered: %+v", r)
	}
}
