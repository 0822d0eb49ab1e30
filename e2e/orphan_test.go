//go:build linux

package e2e

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/uncaged/workflow/engine/procgroup"
	"github.com/uncaged/workflow/shared/testkit"
)

// orphanRole is the one role of the orphan tests, an exec agent. The
// first run of a thread starts a long child and blocks; a later run notes
// an overlap if any process of an earlier run still runs, then answers.
const orphanRole = `#!/bin/sh
cat >/dev/null
d="$ORPHAN_DIR/$WORKFLOW_THREAD_ID"
mkdir -p "$d"
echo run >> "$d/runs"
if [ ! -e "$d/agent" ]; then
  sleep 600 &
  echo $! > "$d/child.tmp" && mv "$d/child.tmp" "$d/child"
  echo $$ > "$d/agent.tmp" && mv "$d/agent.tmp" "$d/agent"
  wait
  exit 1
fi
running() { # pid, command name; a zombie has stopped running
  [ -r "/proc/$1/stat" ] && [ "$(cut -d' ' -f3 "/proc/$1/stat")" != Z ] && [ "$(cat "/proc/$1/comm")" = "$2" ]
}
running "$(cat "$d/agent")" orphan-role.sh && echo "agent" >> "$d/overlap"
running "$(cat "$d/child")" sleep && echo "child" >> "$d/overlap"
echo '{"ok": true}'
`

// orphanFlow registers the blocking workflow on root and returns the
// directory its runs report in.
func orphanFlow(t *testing.T, root string) string {
	t.Helper()
	dir := t.TempDir()
	script := filepath.Join(dir, "orphan-role.sh")
	if err := os.WriteFile(script, []byte(orphanRole), 0o755); err != nil {
		t.Fatal(err)
	}
	reports := filepath.Join(dir, "runs")
	wf := fmt.Sprintf(`version: 1
description: One role that blocks on its first run.
agents:
  blocker: {type: exec, command: %s, env: {ORPHAN_DIR: %s}}
roles:
  work:
    description: Blocks the first time, answers after
    prompt: Work.
    agent: blocker
    output: {type: object, properties: {ok: {type: boolean}}, required: [ok]}
graph:
  __start__: work
  work: __end__
`, script, reports)
	file := filepath.Join(dir, "orphan.yaml")
	if err := os.WriteFile(file, []byte(wf), 0o644); err != nil {
		t.Fatal(err)
	}
	addPath(t, root, "block-once", file)
	return reports
}

// procStart is a process's start time from /proc ("" once it is gone),
// so that a cleanup never kills a process that took a pid over.
func procStart(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	if f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:])); len(f) > 19 {
		return f[19]
	}
	return ""
}

// killAtCleanup kills pids when the test ends, if they still run.
func killAtCleanup(t *testing.T, pids ...int) {
	for _, pid := range pids {
		if start := procStart(pid); start != "" && pid > 1 {
			t.Cleanup(func() {
				if procStart(pid) == start {
					// Gone meanwhile (ESRCH) is what the test wanted.
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			})
		}
	}
}

// blockedRun starts a thread of block-once and returns it with the pids of
// its blocked agent and the agent's child, once both run.
func blockedRun(t *testing.T, root, reports string) (id string, agent, child int) {
	t.Helper()
	id = start(t, root, "block-once")
	read := func(name string) int {
		var pid int
		testkit.WaitUntil(t, name+" pid of "+id, func() bool {
			b, err := os.ReadFile(filepath.Join(reports, id, name))
			pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
			return err == nil && pid > 0
		})
		return pid
	}
	agent, child = read("agent"), read("child")
	killAtCleanup(t, agent, child)
	return id, agent, child
}

// watchdogOf returns the pid of the agent watchdog the host started.
func watchdogOf(t *testing.T, host int) int {
	t.Helper()
	var wd int
	testkit.WaitUntil(t, "the agent watchdog of host "+strconv.Itoa(host), func() bool {
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			pid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			cmdline, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
			stat, _ := os.ReadFile("/proc/" + e.Name() + "/stat")
			f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
			if strings.HasPrefix(string(cmdline), procgroup.WatchdogName+"\x00") && len(f) > 1 && f[1] == strconv.Itoa(host) {
				wd = pid
				return true
			}
		}
		return false
	})
	return wd
}

// killHost kills the engine host with SIGKILL and waits until it is gone.
func killHost(t *testing.T, root string) {
	t.Helper()
	pid := hostPID(root)
	if pid <= 0 {
		t.Fatal("no engine host to kill")
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("killing the engine host %d: %v", pid, err)
	}
	testkit.WaitUntil(t, "the engine host to die", func() bool { return testkit.ProcessGone(pid) })
}

// ranOnceAtATime checks the role's reports after the thread finished: it
// ran twice (blocked, then resumed) and never beside a leftover.
func ranOnceAtATime(t *testing.T, reports, id string) {
	t.Helper()
	if b, _ := os.ReadFile(filepath.Join(reports, id, "runs")); strings.Count(string(b), "run\n") != 2 {
		t.Errorf("the role ran %d times, want 2 (blocked, then resumed)", strings.Count(string(b), "run\n"))
	}
	if b, err := os.ReadFile(filepath.Join(reports, id, "overlap")); err == nil {
		t.Errorf("the resumed role ran while its first run's processes still ran: %q", b)
	}
}

// kill -9 of the engine host takes its agent's whole process group along,
// before any other host starts; a resume then runs the role alone.
func TestOrphanAgentDiesWithItsHost(t *testing.T) {
	t.Parallel()
	root := engineRoot(t)
	reports := orphanFlow(t, root)
	id, agent, child := blockedRun(t, root, reports)
	killHost(t, root)
	testkit.WaitUntil(t, "the agent and its child to die with the host", func() bool {
		return testkit.ProcessGone(agent) && testkit.ProcessGone(child)
	})
	if r := run(t, root, "thread", "resume", id); r.code != 0 {
		t.Fatalf("resume: %+v", r)
	}
	if s := finished(t, root, id); s.Status != "completed" {
		t.Fatalf("resumed thread: %+v", s)
	}
	ranOnceAtATime(t, reports, id)
}

// When the watchdog dies with the host (the whole process tree killed),
// Pdeathsig still ends the agent, and the host started for the next
// command kills the agent's child before it resumes or kills anything.
func TestOrphanLeftoversAreKilledBeforeTheNextCommand(t *testing.T) {
	t.Parallel()
	root := engineRoot(t)
	reports := orphanFlow(t, root)
	killHostAndWatchdog := func(agent, child int) {
		t.Helper()
		host := hostPID(root)
		wd := watchdogOf(t, host)
		killAtCleanup(t, wd)
		if err := syscall.Kill(wd, syscall.SIGKILL); err != nil {
			t.Fatalf("killing the watchdog %d: %v", wd, err)
		}
		testkit.WaitUntil(t, "the watchdog to die", func() bool { return testkit.ProcessGone(wd) })
		killHost(t, root)
		testkit.WaitUntil(t, "Pdeathsig to kill the agent", func() bool { return testkit.ProcessGone(agent) })
		if testkit.ProcessGone(child) {
			t.Fatal("the agent's child died with the host though its watchdog was dead: this test no longer tests the next host")
		}
	}

	id, agent, child := blockedRun(t, root, reports)
	killHostAndWatchdog(agent, child)
	if r := run(t, root, "thread", "resume", id); r.code != 0 {
		t.Fatalf("resume: %+v", r)
	}
	if s := finished(t, root, id); s.Status != "completed" {
		t.Fatalf("resumed thread: %+v", s)
	}
	ranOnceAtATime(t, reports, id)
	if !testkit.ProcessGone(child) {
		t.Error("the first run's child outlived the resume")
	}

	id, agent, child = blockedRun(t, root, reports)
	killHostAndWatchdog(agent, child)
	if r := run(t, root, "thread", "kill", id); r.code != 0 {
		t.Fatalf("kill: %+v", r)
	}
	if !testkit.ProcessGone(child) {
		t.Error("thread kill returned with the dead host's agent child still running")
	}
	if s := show(t, root, id); s.Status != "killed" {
		t.Errorf("killed thread: %+v", s)
	}
}
