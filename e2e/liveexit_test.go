package e2e

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/uncaged/workflow/shared/testkit"
)

// watcher is a `live --debug` process following a thread in the background.
type watcher struct {
	cmd            *exec.Cmd
	stdout, stderr testkit.Buffer
}

func watch(t *testing.T, root, id string) *watcher {
	t.Helper()
	w := &watcher{cmd: cliCommand(nil, "", root, "live", id, "--debug")}
	w.cmd.Stdout, w.cmd.Stderr = &w.stdout, &w.stderr
	if err := w.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.cmd.Process.Kill() }) // gone already unless the test failed
	// The debug log's first line says the thread started: live is
	// following it, its signal handler in place.
	testkit.WaitUntil(t, "live to show the thread's start", func() bool {
		return strings.Contains(w.stdout.String(), "thread "+id+" started")
	})
	return w
}

// exitCode waits for the process and returns its exit code.
func (w *watcher) exitCode(t *testing.T) int {
	t.Helper()
	err := w.cmd.Wait()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0
}

// live ends as the thread did, so `live <id> && next` runs next only after
// a success: 1 for a failed thread, 130 for a killed one (and when it is
// stopped with Ctrl-C before the end), each with a last line naming how.
func TestLiveExitCodeSaysHowTheThreadEnded(t *testing.T) {
	t.Parallel()
	root := engineRoot(t)
	add(t, root, "explode", "throws.esm.js")
	add(t, root, "spin", "spin.esm.js")

	failed := start(t, root, "explode")
	r := run(t, root, "live", failed)
	if r.code != 1 || !strings.Contains(r.stdout, "\nfailed: returnCode=1 — ") || !strings.Contains(r.stdout, "compiler exploded") || strings.Contains(r.stdout, "completed:") {
		t.Fatalf("live on a failed thread: %+v", r)
	}

	spinning := start(t, root, "spin")
	interrupted := watch(t, root, spinning)
	if err := interrupted.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if code := interrupted.exitCode(t); code != 130 || !strings.Contains(interrupted.stderr.String(), "stopped following thread "+spinning) {
		t.Fatalf("live stopped with Ctrl-C: exit %d, stderr %q", code, interrupted.stderr.String())
	}
	if r := run(t, root, "thread", "ps"); !strings.Contains(r.stdout, spinning) {
		t.Fatalf("Ctrl-C on live stopped the thread: %+v", r)
	}

	following := watch(t, root, spinning)
	if r := run(t, root, "thread", "kill", spinning); r.code != 0 {
		t.Fatalf("kill: %+v", r)
	}
	out := following.stdout.String
	if code := following.exitCode(t); code != 130 || !strings.Contains(out(), "\nkilled: returnCode=130 — ") || strings.Contains(out(), "completed:") {
		t.Fatalf("live on a killed thread: exit %d\n%s", code, out())
	}
}
