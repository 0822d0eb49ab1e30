package testkit

import (
	"os"
	"os/exec"
	"testing"
)

func TestWaitUntilReturnsOnceTheConditionHolds(t *testing.T) {
	t.Parallel()
	calls := 0
	WaitUntil(t, "the third call", func() bool { calls++; return calls == 3 })
	if calls != 3 {
		t.Errorf("cond called %d times, want 3", calls)
	}
}

func TestProcessGone(t *testing.T) {
	t.Parallel()
	if ProcessGone(os.Getpid()) {
		t.Error("this test's own process is reported gone")
	}
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	if ProcessGone(pid) {
		t.Error("a running child is reported gone")
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	// Not yet reaped: a zombie, which counts as gone.
	WaitUntil(t, "the killed child to stop", func() bool { return ProcessGone(pid) })
	_ = cmd.Wait() // "signal: killed", as intended
	if !ProcessGone(pid) {
		t.Error("a reaped child is reported running")
	}
}
