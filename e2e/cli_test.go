// Package e2e runs the real binaries, as a person or a script would.
package e2e

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/uncaged/workflow/shared/testkit"
	"github.com/uncaged/workflow/shared/testkit/pgtest"
)

var binDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "uncaged-e2e-bin-")
	if err != nil {
		panic(err)
	}
	// One build of all three: it shares their packages and compiles them
	// in parallel. Each binary is named after its package's directory.
	// They are built as the Dockerfiles and `make build` build them
	// (static, -trimpath): the tests run what ships, and the compiled
	// packages are shared with those builds and with `make lint`.
	build := exec.Command("go", "build", "-trimpath", "-o", dir+string(filepath.Separator),
		"../connector/cmd/uncaged-workflow", "../gateway/cmd/uncaged-gateway", "./internal/putblob")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building the binaries:", err)
		os.Exit(1)
	}
	binDir = dir
	home, err := testkit.PrivateHome("uncaged-e2e")
	if err != nil {
		fmt.Fprintln(os.Stderr, "making the tests' home:", err)
		os.Exit(1)
	}
	// pgtest.Main stops the PostgreSQL server the cluster tests start.
	code := pgtest.Main(m)
	for _, d := range []string{dir, home} {
		if err := os.RemoveAll(d); err != nil {
			fmt.Fprintln(os.Stderr, "removing", d+":", err)
		}
	}
	os.Exit(code)
}

type result struct {
	stdout, stderr string
	code           int
}

// run runs the CLI binary on root from the test's working directory.
func run(t *testing.T, root string, args ...string) result {
	t.Helper()
	return runIn(t, "", root, args...)
}

// runIn runs the CLI binary in dir, as someone working in a workspace does.
func runIn(t *testing.T, dir, root string, args ...string) result {
	t.Helper()
	return runEnv(t, nil, dir, root, args...)
}

// runEnv runs the CLI binary in dir with env added to its environment (and
// so to that of a thread it runs, forks or resumes). Tests run side by
// side, so they hand variables to their commands this way, never with
// t.Setenv.
func runEnv(t *testing.T, env []string, dir, root string, args ...string) result {
	t.Helper()
	return runCommand(t, cliCommand(env, dir, root, args...))
}

// cliCommand is the CLI binary's command for runEnv.
func cliCommand(env []string, dir, root string, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(binDir, "uncaged-workflow"), args...)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "UNCAGED_WORKFLOW_STORAGE_ROOT=", "WORKFLOW_STORAGE_ROOT="+root), env...)
	return cmd
}

// runCommand runs cmd to its end and returns what it printed and its exit
// code; only a command that could not run at all fails the test.
func runCommand(t *testing.T, cmd *exec.Cmd) result {
	t.Helper()
	r, err := runCommandErr(cmd)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// runCommandErr is runCommand for a goroutine other than the test's, which
// must not end the test itself: it returns the error.
func runCommandErr(cmd *exec.Cmd) (result, error) {
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		return result{}, err
	}
	return result{out.String(), errb.String(), code}, nil
}

func TestCasPutHelloThroughTheBinary(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	if r := run(t, root, "cas", "put", "hello"); r.code != 0 || r.stdout != "SSVQ0RZ55P9Y4\n" {
		t.Fatalf("cas put hello = %+v", r)
	}
	if r := run(t, root, "cas", "get", "SSVQ0RZ55P9Y4"); r.stdout != "type: content\npayload: hello\nrefs: []\n" {
		t.Fatalf("cas get = %+v", r)
	}
	if b, err := os.ReadFile(filepath.Join(root, "cas", "SSVQ0RZ55P9Y4.txt")); err != nil || string(b) != "type: content\npayload: hello\nrefs: []\n" {
		t.Fatalf("blob on disk = %q, %v (WORKFLOW_STORAGE_ROOT must be honoured)", b, err)
	}
	r := run(t, root, "cas", "get", "../../etc/passwd")
	if r.code != 1 || !strings.Contains(r.stderr, "invalid hash") || r.stdout != "" {
		t.Fatalf("bad hash = %+v", r)
	}
	if r := run(t, root); r.code != 1 || !strings.Contains(r.stdout, "Content-addressable storage:") {
		t.Fatalf("no args = %+v", r)
	}
}

// TestConcurrentProcessesRegisterWorkflows starts many CLI processes that
// register workflows at once; the file lock must keep every registration.
func TestConcurrentProcessesRegisterWorkflows(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	src := t.TempDir()
	const n = 12
	var wg sync.WaitGroup
	results := make([]result, n)
	errs := make([]error, n)
	for i := 0; i < n; i++ {
		f := filepath.Join(src, fmt.Sprintf("w%d.esm.js", i))
		if err := os.WriteFile(f, []byte(fmt.Sprintf("export const descriptor = { description: \"flow %d\", roles: {}, graph: { edges: [] } };\nexport const run = async function* () { return { returnCode: 0, summary: \"%d\" }; };\n", i, i)), 0o644); err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			results[i], errs[i] = runCommandErr(cliCommand(nil, "", root, "workflow", "add", fmt.Sprintf("flow-%d", i), f))
		}(i)
	}
	wg.Wait()
	for i, r := range results {
		if errs[i] != nil {
			t.Fatalf("add %d: %v", i, errs[i])
		}
		if r.code != 0 {
			t.Fatalf("add %d: %+v", i, r)
		}
	}
	r := run(t, root, "workflow", "list", "-o", "table")
	if lines := strings.Split(strings.TrimSpace(r.stdout), "\n"); len(lines) != 1+n { // a header, then one line each
		t.Fatalf("%d workflows listed, want %d:\n%s", len(lines), n, r.stdout)
	}
}

func TestOriginalStoreThroughTheBinary(t *testing.T) {
	t.Parallel()
	root := filepath.Join(t.TempDir(), "root")
	if err := os.CopyFS(root, os.DirFS("../connector/cli/testdata/original-root")); err != nil {
		t.Fatal(err)
	}
	r := run(t, root, "thread", "list", "-o", "table")
	if r.code != 0 || strings.Count(r.stdout, "  demo-flow  ") != 3 {
		t.Fatalf("thread list = %+v", r)
	}
	if r := run(t, root, "thread", "show", "06EZHZP3N4J2B8V6Q0T9W1X5Y4"); !strings.Contains(r.stdout, `"content": "plan-text"`) {
		t.Fatalf("thread show = %+v", r)
	}
	if r := run(t, root, "cas", "gc"); r.stdout != "scanned 6 threads, 14 active refs, deleted 1 entries\n" {
		t.Fatalf("cas gc = %+v", r)
	}
}
