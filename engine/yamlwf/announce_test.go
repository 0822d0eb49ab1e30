package yamlwf

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/uncaged/workflow/engine/agents"
)

// announcingHost is a testHost that records the roles announced to it
// (workflow.RoleAnnouncer), as the executor's host is told them.
type announcingHost struct {
	*testHost
	mu    sync.Mutex
	roles []string
}

func (h *announcingHost) RoleBegins(role string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.roles = append(h.roles, role)
}

func (h *announcingHost) announced() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.roles)
}

// A YAML workflow tells a host that asks which role it is running, each
// role before its agent runs, in the order the graph takes them (a loop's
// roles again on every turn), so a pause or a kill names the role in
// flight as it does for a bundle.
func TestRolesAreAnnouncedInOrderBeforeTheyRun(t *testing.T) {
	t.Parallel()
	w, err := Load([]byte(`version: 1
description: a draft is rejected once
roles:
  writer: {description: d, prompt: p, agent: {type: exec, command: writer}}
  reviewer: {description: d, prompt: p, agent: {type: exec, command: reviewer}}
graph:
  __start__: writer
  writer: reviewer
  reviewer: {approved: __end__, rejected: writer}
`), Options{})
	if err != nil {
		t.Fatal(err)
	}
	h := &announcingHost{testHost: newTestHost(t)}
	reviews := 0
	// Each agent checks that its own role was the last announced: the
	// announcement comes before the work, not after it.
	check := func(call agents.Call) {
		if got := h.announced(); len(got) == 0 || got[len(got)-1] != call.Role {
			t.Errorf("role %s ran after announcements %q", call.Role, got)
		}
	}
	w.newAgent = factory(map[string]agentFunc{
		"writer": func(_ context.Context, call agents.Call) (agents.Result, error) {
			check(call)
			return agents.Result{Meta: metaOf(t, `{}`)}, nil
		},
		"reviewer": func(_ context.Context, call agents.Call) (agents.Result, error) {
			check(call)
			reviews++
			if reviews == 1 {
				return agents.Result{Meta: metaOf(t, `{"status":"rejected"}`)}, nil
			}
			return agents.Result{Meta: metaOf(t, `{"status":"approved"}`)}, nil
		},
	})
	run, err := w.Start(context.Background(), startThread("go"), h)
	if err != nil {
		t.Fatal(err)
	}
	for {
		_, done, err := run.Next(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if done != nil {
			break
		}
	}
	want := []string{"writer", "reviewer", "writer", "reviewer"}
	if got := h.announced(); !slices.Equal(got, want) {
		t.Fatalf("announced %q, want %q", got, want)
	}
}
