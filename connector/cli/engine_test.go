package cli

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/uncaged/workflow/engine/host"
	"github.com/uncaged/workflow/engine/storage"
	"github.com/uncaged/workflow/shared/testkit"
)

func TestEngineStopWithNoHostIsOneLine(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	out, errs, code := c.run("engine", "stop")
	if code != 0 || out != "no engine host running for "+c.root+"\n" || errs != "" {
		t.Fatalf("engine stop: exit %d\nstdout %q\nstderr %q", code, out, errs)
	}
	before := c.snapshot()
	c.fails("stop takes no arguments", "engine", "stop", "now")
	c.fails("restart takes no arguments", "engine", "restart", "now")
	c.unchanged(before)
	help := c.ok("engine", "--help")
	for _, want := range []string{"stop", "restart"} {
		if !strings.Contains(help, want) {
			t.Errorf("engine --help lacks %s:\n%s", want, help)
		}
	}
	if help := c.ok("engine", "stop", "--help"); !strings.Contains(help, "--force") || !strings.Contains(help, "resumable") {
		t.Errorf("engine stop --help does not say what --force does to threads:\n%s", help)
	}
}

func TestEngineStopEndsAnIdleHost(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	l := storage.Layout{Root: c.root}
	if err := l.EnsureRoot(); err != nil {
		t.Fatal(err)
	}
	h, err := host.Open(host.Options{Layout: l})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- h.Serve(context.Background()) }()
	testkit.WaitUntil(t, "the host answers", func() bool {
		cl, err := host.Dial(l)
		if err == nil {
			cl.Close()
		}
		return err == nil
	})
	if out := c.ok("engine", "stop"); out != fmt.Sprintf("engine host pid %d stopped\n", os.Getpid()) {
		t.Fatalf("engine stop = %q", out)
	}
	// Serve has returned (the command waited for the socket to go).
	if err := <-done; err != nil {
		t.Fatalf("Serve: %v", err)
	}
	if host.Running(l) {
		t.Fatal("the root is still locked")
	}
}
