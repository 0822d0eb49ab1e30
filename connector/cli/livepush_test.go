package cli

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/uncaged/workflow/engine/host"
	"github.com/uncaged/workflow/engine/registry"
	"github.com/uncaged/workflow/engine/storage"
	"github.com/uncaged/workflow/engine/workflow"
	"github.com/uncaged/workflow/engine/workflow/workflowtest"
	"github.com/uncaged/workflow/shared/testkit"
)

// TestLiveFollowsTheHostsChanges: with an engine host running the thread,
// live prints each step as the host tells of it, with no timer to look
// by (both of live's timers are an hour): the change stream alone moves
// it, and its end ends live with the thread's outcome.
func TestLiveFollowsTheHostsChanges(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	l := storage.Layout{Root: c.root}
	flow := workflowtest.Stepped{Roles: []string{"scout", "planner", "coder", "reviewer"}, Next: make(chan struct{})}
	if err := registry.Update(l.RegistryFile(), func(r *registry.Registry) error {
		r.Register("gated", "GATED00000000", 1)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	h := serveHost(t, host.Options{Layout: l, Load: func(string) (workflow.Workflow, error) { return flow, nil }})
	id, err := h.Run(host.RunRequest{Workflow: "gated", Prompt: "go"})
	if err != nil {
		t.Fatal(err)
	}

	var out, errs testkit.Buffer
	code := make(chan int, 1)
	go func() {
		code <- Run([]string{"live", id}, Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errs,
			Getenv:       func(k string) string { return c.env[k] },
			liveSlowPoll: time.Hour, livePolledEvery: time.Hour})
	}()
	for i, role := range flow.Roles {
		flow.Next <- struct{}{}
		testkit.WaitUntil(t, fmt.Sprintf("live to print step %d (%s)", i+1, role), func() bool {
			return strings.Contains(out.String(), fmt.Sprintf("step %d: %s", i+1, role))
		})
	}
	flow.Next <- struct{}{}
	select {
	case got := <-code:
		if got != 0 {
			t.Fatalf("live: exit %d\nstdout: %s\nstderr: %s", got, out.String(), errs.String())
		}
	case <-time.After(testkit.WaitBound):
		t.Fatalf("live did not end with the thread\nstdout: %s", out.String())
	}
	if text := out.String(); !strings.HasSuffix(text, "completed: returnCode=0 — every role spoke\n") {
		t.Fatalf("live's last line:\n%s", text)
	}
}
