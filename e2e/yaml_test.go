package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const helloWorldDir = "../examples/hello-world"

// TestYAMLWorkflowThroughTheBinary adds the YAML hello-world example, runs
// it (a reviewer loop of exec scripts), forks it, and runs the equivalent
// JavaScript bundle next to it: both threads hold the same steps.
func TestYAMLWorkflowThroughTheBinary(t *testing.T) {
	t.Parallel()
	rolesDir, err := filepath.Abs(filepath.Join(helloWorldDir, "roles"))
	if err != nil {
		t.Fatal(err)
	}
	root := engineRoot(t)
	// The bundle version finds its scripts through this variable of the
	// command that runs it (the thread gets that command's environment).
	hostEnv := []string{"HELLO_WORLD_ROLES=" + rolesDir}

	r := run(t, root, "workflow", "add", "hello-world", filepath.Join(helloWorldDir, "hello-world.yaml"))
	if r.code != 0 || !strings.HasPrefix(r.stdout, `registered workflow "hello-world" from hello-world.yaml as `) {
		t.Fatalf("workflow add: %+v", r)
	}
	hash := strings.TrimSpace(strings.TrimPrefix(r.stdout, `registered workflow "hello-world" from hello-world.yaml as `))
	stored, err := os.ReadFile(filepath.Join(root, "bundles", hash+".workflow.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(stored), "command: "+filepath.Join(rolesDir, "writer.sh")) {
		t.Fatalf("stored workflow keeps relative script paths:\n%s", stored)
	}
	if _, err := os.Stat(filepath.Join(root, "bundles", hash+".esm.js")); err == nil {
		t.Fatal("a YAML workflow was stored as a bundle")
	}
	desc, err := os.ReadFile(filepath.Join(root, "bundles", hash+".yaml"))
	if err != nil || !strings.Contains(string(desc), `"conditionDescription": "meta.status == \"approved\""`) {
		t.Fatalf("descriptor sidecar: %v\n%s", err, desc)
	}
	if r := run(t, root, "workflow", "show", "hello-world"); r.code != 0 || !strings.Contains(r.stdout, hash) {
		t.Fatalf("workflow show: %+v", r)
	}

	id := startEnv(t, root, hostEnv, "hello-world", "--prompt", "Say hello.")
	s := finished(t, root, id)
	if roles(s) != "writer,reviewer,writer,reviewer" || s.Status != "completed" || s.Result.ReturnCode != 0 || s.Result.Summary != "completed: moderator returned END" {
		t.Fatalf("thread show = %+v", s)
	}
	if s.Steps[2].Content != `{"draft":2,"greeting":"Hello, world!"}` {
		t.Fatalf("second draft = %q", s.Steps[2].Content)
	}

	// A fork re-runs the last role (the reviewer) from the stored chain.
	r = run(t, root, "thread", "fork", id)
	forkID := strings.TrimSpace(r.stdout)
	if r.code != 0 || len(forkID) != 26 {
		t.Fatalf("fork: %+v", r)
	}
	if f := finished(t, root, forkID); roles(f) != "writer,reviewer,writer,reviewer" || f.Status != "completed" {
		t.Fatalf("fork = %+v", f)
	}

	// A YAML workflow can run another one as a child thread.
	parent := filepath.Join(t.TempDir(), "parent.yaml")
	if err := os.WriteFile(parent, []byte(`version: 1
description: Delegates to hello-world
roles:
  delegate:
    description: Runs hello-world as a child thread
    prompt: unused by workflow agents
    agent: {type: workflow, workflow: hello-world}
    output:
      type: object
      properties: {returnCode: {const: 0}}
      required: [returnCode, rootHash]
graph: {__start__: delegate}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := run(t, root, "workflow", "add", "delegate-hello", parent); r.code != 0 {
		t.Fatalf("add parent: %+v", r)
	}
	p := finished(t, root, start(t, root, "delegate-hello", "--prompt", "Say hello."))
	if roles(p) != "delegate" || p.Status != "completed" || p.Steps[0].ChildThread == nil || !strings.Contains(p.Steps[0].Content, `"returnCode":0`) {
		t.Fatalf("parent = %+v", p)
	}

	r = run(t, root, "workflow", "add", "hello-world-js", filepath.Join(helloWorldDir, "hello-world.esm.js"))
	if r.code != 0 {
		t.Fatalf("add the bundle: %+v", r)
	}
	js := finished(t, root, startEnv(t, root, hostEnv, "hello-world-js", "--prompt", "Say hello."))
	if roles(js) != roles(s) || js.Status != "completed" {
		t.Fatalf("bundle thread = %+v", js)
	}
	for i := range s.Steps {
		if js.Steps[i].Content != s.Steps[i].Content {
			t.Errorf("step %d: bundle stored %q, YAML %q", i, js.Steps[i].Content, s.Steps[i].Content)
		}
	}
}

// TestBrokenYAMLWorkflowIsRefused: a bad YAML workflow fails `workflow add`
// with an error that says where, and leaves the store as it was.
func TestBrokenYAMLWorkflowIsRefused(t *testing.T) {
	t.Parallel()
	root := engineRoot(t)
	good, err := os.ReadFile(filepath.Join(helloWorldDir, "hello-world.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if r := run(t, root, "workflow", "add", "keep-me", filepath.Join(helloWorldDir, "hello-world.yaml")); r.code != 0 {
		t.Fatalf("add: %+v", r)
	}
	before := snapshot(t, root)
	src := t.TempDir()
	cases := []struct{ name, file, content, want string }{
		{"malformed", "bad.yaml", "version: 1\nroles: [\n", "bad.yaml: yaml: line"},
		{"unknown agent", "agent.yml", strings.Replace(string(good), "agent: reviewer", "agent: reveiwer", 1), `roles.reviewer.agent: unknown agent "reveiwer" (defined: reviewer, writer)`},
		{"typo key", "typo.yaml", strings.Replace(string(good), "    prompt: Write", "    promt: Write", 1), "roles.writer.promt: unknown key"},
		{"unknown target", "target.yaml", strings.Replace(string(good), "rejected: writer", "rejected: writter", 1), `graph.reviewer.rejected: unknown role "writter"`},
		{"empty", "empty.yaml", "", "empty workflow file"},
	}
	for _, c := range cases {
		path := filepath.Join(src, c.file)
		if err := os.WriteFile(path, []byte(c.content), 0o644); err != nil {
			t.Fatal(err)
		}
		r := run(t, root, "workflow", "add", "broken", path)
		if r.code != 1 || !strings.Contains(r.stderr, c.want) || r.stdout != "" {
			t.Errorf("%s: %+v, want an error with %q", c.name, r, c.want)
		}
	}
	if r := run(t, root, "workflow", "add", "broken", filepath.Join(helloWorldDir, "hello-world.yaml"), "--types", "x.d.ts"); r.code != 1 || !strings.Contains(r.stderr, "--types applies to .esm.js bundles only") {
		t.Errorf("--types with YAML: %+v", r)
	}
	after := snapshot(t, root)
	if len(after) != len(before) {
		t.Fatalf("files changed: %d before, %d after", len(before), len(after))
	}
	for p, b := range before {
		if after[p] != b {
			t.Fatalf("%s changed", p)
		}
	}
}

// snapshot maps every file under root (lock files aside) to its content.
func snapshot(t *testing.T, root string) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && !strings.HasSuffix(p, ".lock") {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			files[p] = string(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}
