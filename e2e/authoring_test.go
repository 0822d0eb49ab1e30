package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func mustRunIn(t *testing.T, dir, root string, args ...string) string {
	t.Helper()
	r := runIn(t, dir, root, args...)
	if r.code != 0 {
		t.Fatalf("%v: %+v", args, r)
	}
	return r.stdout
}

var buildLine = regexp.MustCompile(`(?m)^build: ([a-z0-9-]+) -> dist/([a-z0-9-]+)\.esm\.js \(\d+(\.\d)? (B|KB|MB), \d+ ms\)$`)

// TestAuthorBuildRegisterRun is the authoring path with nothing but the
// binary: scaffold a workspace, build it, register the bundle, run it.
func TestAuthorBuildRegisterRun(t *testing.T) {
	t.Parallel()
	root := engineRoot(t)
	parent := t.TempDir()
	ws := filepath.Join(parent, "demo")
	if out := mustRunIn(t, parent, root, "init", "workspace", "demo"); out != "initialized workflow workspace at "+ws+"\n" {
		t.Fatalf("init workspace = %q", out)
	}
	out := mustRunIn(t, ws, root, "build")
	if m := buildLine.FindAllStringSubmatch(out, -1); len(m) != 1 || m[0][1] != "hello-entry" {
		t.Fatalf("build = %q", out)
	}
	if out := mustRunIn(t, ws, root, "workflow", "add", "hello", "dist/hello-entry.esm.js"); !strings.HasPrefix(out, `registered workflow "hello" from hello-entry.esm.js as `) {
		t.Fatalf("add = %q", out)
	}
	id := strings.TrimSpace(mustRunIn(t, ws, root, "run", "hello", "--prompt", "world"))
	s := finished(t, root, id)
	if s.Status != "completed" || s.Result.ReturnCode != 0 || roles(s) != "greeter,checker" {
		t.Fatalf("thread = %+v", s)
	}
	if s.Steps[0].Content != `{"message":"Hello, world!"}` || s.Steps[1].Content != `{"approved":true,"length":13}` {
		t.Fatalf("steps = %+v", s.Steps)
	}

	// A template scaffolded inside the workspace builds into an entry that
	// registers and runs.
	if out := mustRunIn(t, filepath.Join(ws, "workflows"), root, "init", "template", "greeter"); !strings.Contains(out, "initialized template at "+filepath.Join(ws, "templates", "greeter")) {
		t.Fatalf("init template = %q", out)
	}
	out = mustRunIn(t, ws, root, "build")
	if m := buildLine.FindAllStringSubmatch(out, -1); len(m) != 2 || m[0][1] != "greeter-entry" {
		t.Fatalf("build = %q", out)
	}
	mustRunIn(t, ws, root, "workflow", "add", "greeter", "dist/greeter-entry.esm.js")
	id = strings.TrimSpace(mustRunIn(t, ws, root, "run", "greeter", "--prompt", "hi"))
	if s := finished(t, root, id); s.Status != "completed" || roles(s) != "greeter" || s.Steps[0].Content != `{"message":"greeter received: hi"}` {
		t.Fatalf("greeter thread = %+v", s)
	}
}

func TestBuildErrorsThroughTheBinary(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	parent := t.TempDir()
	mustRunIn(t, parent, root, "init", "workspace", "ws")
	ws := filepath.Join(parent, "ws")
	if err := os.WriteFile(filepath.Join(ws, "workflows", "broken-entry.ts"), []byte("export const run = (;\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := runIn(t, ws, root, "build", "workflows/broken-entry.ts")
	if r.code != 1 || !strings.Contains(r.stderr, "workflows/broken-entry.ts:1:21: error: Unexpected \";\"") || r.stdout != "" {
		t.Fatalf("build = %+v", r)
	}
	if _, err := os.Stat(filepath.Join(ws, "dist", "broken-entry.esm.js")); !os.IsNotExist(err) {
		t.Fatal("a failed build wrote its bundle")
	}
	if r := runIn(t, parent, root, "init", "template", "x"); r.code != 1 || !strings.Contains(r.stderr, "not inside a workflow workspace") {
		t.Fatalf("template outside a workspace = %+v", r)
	}
	if r := runIn(t, parent, root, "init", "workspace", "ws"); r.code != 1 || !strings.Contains(r.stderr, "directory already exists: "+ws) {
		t.Fatalf("existing workspace = %+v", r)
	}
}
