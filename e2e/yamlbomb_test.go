//go:build linux

package e2e

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/uncaged/workflow/shared/testkit"
)

// `workflow add` refuses the bomb with an error naming the limit, in
// bounded memory, and registers nothing.
func TestYAMLBombRefusedByWorkflowAdd(t *testing.T) {
	// Serial: the child's peak RSS counts this process's pages up to its exec, and tests running beside it change how many there are between it and its baseline.
	root := t.TempDir()
	dir := t.TempDir()
	file := filepath.Join(dir, "bomb.yaml")
	if err := os.WriteFile(file, []byte(testkit.AliasBombWorkflow()), 0o644); err != nil {
		t.Fatal(err)
	}
	// The deadline only keeps a regression from hanging the suite, and
	// the address-space cap from taking the machine's memory with it.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "uncaged-workflow"), "workflow", "add", "bomb", file)
	cmd.Env = append(os.Environ(), "UNCAGED_WORKFLOW_STORAGE_ROOT=", "WORKFLOW_STORAGE_ROOT="+root)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	limit := &unix.Rlimit{Cur: 2 << 30, Max: 2 << 30}
	if err := unix.Prlimit(cmd.Process.Pid, unix.RLIMIT_AS, limit, nil); err != nil {
		t.Logf("no address-space cap on the child: %v", err)
	}
	err := cmd.Wait()
	if ctx.Err() != nil {
		t.Fatalf("workflow add still ran after %s on a 32 KB file", 2*time.Minute)
	}
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	if code != 1 || out.Len() != 0 || !strings.Contains(errb.String(), "aliases") || !strings.Contains(errb.String(), "16 MiB") {
		t.Fatalf("workflow add bomb: exit %d\nstdout: %s\nstderr: %.500s", code, out.String(), errb.String())
	}
	// A child's peak RSS also counts the pages it shared with this test
	// process until its exec, and this process may be large: compare with
	// a command that does nothing, run the same way afterwards.
	if peak, base := maxRSS(cmd.ProcessState), maxRSS(baseline(t)); peak > base+256<<10 {
		t.Errorf("refusing the bomb took %d MB of memory (a command doing nothing: %d MB)", peak>>10, base>>10)
	}
	if r := run(t, root, "workflow", "list"); r.code != 0 || !strings.Contains(r.stdout, "no workflows registered") {
		t.Fatalf("after the refused add, workflow list = %+v", r)
	}
	if entries, _ := os.ReadDir(filepath.Join(root, "bundles")); len(entries) != 0 {
		t.Fatalf("the refused add stored %d bundle files", len(entries))
	}
}

// baseline runs `uncaged-workflow version` and returns how it ended.
func baseline(t *testing.T) *os.ProcessState {
	t.Helper()
	cmd := exec.Command(filepath.Join(binDir, "uncaged-workflow"), "version")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return cmd.ProcessState
}

// maxRSS is a finished process's peak resident set, in KiB.
func maxRSS(ps *os.ProcessState) int64 {
	if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
		return ru.Maxrss
	}
	return 0
}
