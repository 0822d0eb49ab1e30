package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/uncaged/workflow/engine/host"
	"github.com/uncaged/workflow/engine/storage"
	"github.com/uncaged/workflow/engine/threads"
	"github.com/uncaged/workflow/shared/testkit"
)

// thread ps lists the threads whose role is at work — running, or pausing
// until that role is done — and not the paused ones (thread list shows
// those).
func TestThreadPsLeavesOutPausedThreads(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	gate := filepath.Join(t.TempDir(), "gate")
	addYAML(t, c, "gated", `version: 1
description: The first role waits for a file
roles:
  wait:
    description: Waits
    prompt: Wait.
    agent: {type: exec, command: /bin/sh, args: [-c, 'while [ ! -e "$GATE" ]; do sleep 0.02; done; echo "{}"'], env: {GATE: `+gate+`}}
  after: {description: Then, prompt: Then., agent: {type: exec, command: /bin/sh, args: [-c, 'echo "{}"']}}
graph: {__start__: wait, wait: after}
`)
	startHost(t, c)
	l := storage.Layout{Root: c.root}
	status := func(id string) threads.Status {
		cl, err := host.Dial(l)
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		list, err := cl.List()
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range list {
			if r.ThreadID == id {
				return r.Status
			}
		}
		return ""
	}

	id := strings.TrimSpace(c.ok("run", "gated"))
	testkit.WaitUntil(t, "the thread to run", func() bool { return status(id) == threads.StatusRunning })
	if got := c.ok("thread", "ps"); !strings.HasPrefix(got, id+"\t") || !strings.HasSuffix(got, "\tgated\n") {
		t.Fatalf("ps while it runs = %q", got)
	}
	c.ok("thread", "pause", id)
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	testkit.WaitUntil(t, "the thread to be paused after its role", func() bool { return status(id) == threads.StatusPaused })
	if got := c.ok("thread", "ps"); got != "(no running threads)\n" {
		t.Errorf("ps with the thread paused = %q", got)
	}
	if got := strings.TrimSpace(c.ok("thread", "ps", "--json")); got != "[]" {
		t.Errorf("ps --json with the thread paused = %s", got)
	}
	c.ok("thread", "resume", id)
	testkit.WaitUntil(t, "the thread to finish", func() bool { return status(id) == "" })
}
