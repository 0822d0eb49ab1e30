package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/uncaged/workflow/shared/testkit"
)

// addressSpaceCap is the limit the reproduction ran the host
// under (prlimit --as=2500000000): the Go runtime, libc and the binary
// already take about 1.7 GB of it, so a runaway role meets it after well
// under 1 GB.
const addressSpaceCap = 2500000000

// startCappedHost runs `engine serve` for root with its address space
// capped, through prlimit when there is one, else the shell's ulimit.
func startCappedHost(t *testing.T, root string, args ...string) *proc {
	t.Helper()
	bin := filepath.Join(binDir, "uncaged-workflow")
	serve := append([]string{bin, "engine", "serve"}, args...)
	var cmd *exec.Cmd
	if p, err := exec.LookPath("prlimit"); err == nil {
		cmd = exec.Command(p, append([]string{fmt.Sprintf("--as=%d", addressSpaceCap)}, serve...)...)
	} else {
		cmd = exec.Command("sh", append([]string{"-c", fmt.Sprintf(`ulimit -v %d && exec "$0" "$@"`, addressSpaceCap/1024)}, serve...)...)
	}
	cmd.Env = append(os.Environ(), "UNCAGED_WORKFLOW_STORAGE_ROOT=", "WORKFLOW_STORAGE_ROOT="+root)
	p := launch(t, cmd, "the engine host")
	// Commands start a host of their own when none answers: wait for this
	// one before giving it threads.
	testkit.WaitUntil(t, "the capped engine host to serve", func() bool {
		if p.exited() {
			t.Fatalf("the engine host exited at start (%v):\n%s", p.exit, p.logs.String())
		}
		return hostPID(root) == cmd.Process.Pid && strings.Contains(run(t, root, "engine", "status").stdout, fmt.Sprintf("engine host pid %d", cmd.Process.Pid))
	})
	return p
}

// TestMemoryRunawayFailsAloneUnderACappedHost is the reproduction:
// one role keeps every array it allocates, beside a thread doing ordinary
// work, in a host whose address space is capped. The runaway thread fails
// with a summary that names the budget and how to raise it; the other
// completes; the host stays up and runs more threads.
func TestMemoryRunawayFailsAloneUnderACappedHost(t *testing.T) {
	t.Parallel()
	root := engineRoot(t)
	add(t, root, "hog", "hog.esm.js")
	add(t, root, "slow", "slow.esm.js")
	host := startCappedHost(t, root, "--memory-budget", "48MiB", "--idle-exit", "1m")

	bystander := start(t, root, "slow")
	runaway := start(t, root, "hog")
	// Either the runaway ends, or the host died under it.
	var s shown
	testkit.WaitUntil(t, "the runaway to end", func() bool {
		if host.exited() {
			t.Fatalf("the engine host died (a runaway role took it down); runaway %+v, bystander %+v", show(t, root, runaway), show(t, root, bystander))
		}
		s = show(t, root, runaway)
		return s.Result != nil
	})
	if s.Status != "failed" || s.Result.ReturnCode != 1 {
		t.Fatalf("runaway ended %s: %+v", s.Status, s.Result)
	}
	for _, want := range []string{"memory budget exceeded", "over its budget of 48MiB", "memoryBudget: 128MiB", "--memory-budget 128MiB"} {
		if !strings.Contains(s.Result.Summary, want) {
			t.Errorf("the runaway's summary lacks %q: %s", want, s.Result.Summary)
		}
	}
	if b := finished(t, root, bystander); b.Status != "completed" || b.Result.ReturnCode != 0 || roles(b) != "one,two,three,four,five" {
		t.Fatalf("bystander ended %s: %+v, steps %s", b.Status, b.Result, roles(b))
	}
	// The same host runs the next thread.
	next := start(t, root, "slow")
	if n := finished(t, root, next); n.Status != "completed" {
		t.Fatalf("a thread after the runaway ended %s: %+v", n.Status, n.Result)
	}
	if host.exited() {
		t.Fatal("the engine host exited")
	}
	if pid := hostPID(root); pid != host.cmd.Process.Pid {
		t.Fatalf("threads ran in host %d, not the capped one (%d)", pid, host.cmd.Process.Pid)
	}
	// The host set Go's memory limit from the cap it runs under.
	if out := host.logs.String(); !strings.Contains(out, `"threadBudget":"48MiB (--memory-budget)"`) || !strings.Contains(out, "(from RLIMIT_AS)") {
		t.Fatalf("the host's log does not show the budget and the limit it derived")
	}
}
