package host

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/uncaged/workflow/engine/procgroup"
	"github.com/uncaged/workflow/engine/storage"
	"github.com/uncaged/workflow/engine/workflow"
	"github.com/uncaged/workflow/shared/testkit"
)

// statFields returns a process's session and start time from /proc.
func statFields(t *testing.T, pid int) (sid int, start uint64) {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	sid, _ = strconv.Atoi(f[3])
	start, _ = strconv.ParseUint(f[19], 10, 64)
	return sid, start
}

// A host that opens a root kills what the agents of the root's dead host
// left running before it does anything else.
func TestOpenKillsWhatADeadHostsAgentsLeft(t *testing.T) {
	t.Parallel()
	l := storage.Layout{Root: t.TempDir()}
	orphan := exec.Command("sleep", "600")
	orphan.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := orphan.Start(); err != nil {
		t.Fatal(err)
	}
	pid := orphan.Process.Pid
	t.Cleanup(func() {
		_ = orphan.Process.Kill() // not yet reaped: the pid is still this one
		_ = orphan.Wait()
	})
	sid, start := statFields(t, pid)
	_, selfStart := statFields(t, os.Getpid())
	boot, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	rec, _ := json.Marshal(procgroup.Record{PGID: pid, PID: pid, Start: start, Sid: sid, Boot: strings.TrimSpace(string(boot)),
		Host: os.Getpid(), HostStart: selfStart + 1, // a process that no longer runs
		Session: "dead", Thread: "T", Role: "coder", Command: "/bin/sleep"})
	if err := os.MkdirAll(AgentsDir(l), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(AgentsDir(l), strconv.Itoa(pid)+".json"), rec, 0o600); err != nil {
		t.Fatal(err)
	}

	h, err := Open(Options{Layout: l, Load: func(string) (workflow.Workflow, error) { return nil, errors.New("none") }})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if !testkit.ProcessGone(pid) {
		t.Fatal("Open returned with the dead host's agent still running")
	}
	if ents, _ := os.ReadDir(AgentsDir(l)); len(ents) != 0 {
		t.Fatalf("records left: %v", ents)
	}
}
