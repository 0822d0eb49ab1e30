package tools

import (
	"context"
	"testing"
)

// shell_exec runs with the workspace's Env — the thread's environment —
// not the engine host's.
func TestShellExecGetsTheWorkspacesEnvironment(t *testing.T) {
	t.Parallel()
	w, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Close() })
	w.Env = []string{"PATH=/usr/bin:/bin", "THREAD_K=from-thread"}
	out, err := w.ShellExec(context.Background(), `printf '%s|%s' "$THREAD_K" "${HOME-unset}"`, 0)
	if err != nil || out != "from-thread|unset" {
		t.Fatalf("shell_exec = %q, %v", out, err)
	}
}
