package yamlwf_test

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/uncaged/workflow/engine/agents"
	"github.com/uncaged/workflow/engine/canonyaml"
	"github.com/uncaged/workflow/engine/executor"
	"github.com/uncaged/workflow/engine/host"
	"github.com/uncaged/workflow/engine/registry"
	"github.com/uncaged/workflow/engine/storage"
	"github.com/uncaged/workflow/engine/threads"
	"github.com/uncaged/workflow/engine/workflow"
	"github.com/uncaged/workflow/engine/yamlwf"
	"github.com/uncaged/workflow/shared/testkit"
)

// agentFunc is a test agent: a function of the call.
type agentFunc func(ctx context.Context, call agents.Call) (agents.Result, error)

func (f agentFunc) Run(ctx context.Context, call agents.Call) (agents.Result, error) {
	return f(ctx, call)
}

// A YAML thread paused while a role runs is pausing, and its debug log
// names that role, as a bundle's does: the YAML runner announces each role
// to the engine host before it runs.
func TestAYAMLThreadsPauseNamesTheRoleInFlight(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	var waiting atomic.Int32
	wf, err := yamlwf.Load([]byte(`version: 1
description: the second role waits
agent: {type: exec, command: quick}
roles:
  first: {description: d, prompt: p}
  reviewer: {description: d, prompt: p, agent: {type: exec, command: wait}}
  last: {description: d, prompt: p}
graph:
  __start__: first
  first: reviewer
  reviewer: last
`), yamlwf.Options{NewAgent: func(s agents.Spec) (agents.Agent, error) {
		return agentFunc(func(ctx context.Context, _ agents.Call) (agents.Result, error) {
			if s.Command == "wait" {
				waiting.Add(1)
				select {
				case <-release:
				case <-ctx.Done():
					return agents.Result{}, ctx.Err()
				}
			}
			return agents.Result{Meta: canonyaml.Map{}}, nil
		}), nil
	}})
	if err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	if err := os.Chmod(dir, 0o700); err != nil { // a root is its owner's alone
		t.Fatal(err)
	}
	l := storage.Layout{Root: dir}
	const hash = "YAMLPAVSE0000"
	err = registry.Update(l.RegistryFile(), func(r *registry.Registry) error {
		r.Register("review", hash, 1)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	h, err := host.Open(host.Options{Layout: l, Load: func(string) (workflow.Workflow, error) { return wf, nil }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- h.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("host.Serve: %v", err)
		}
	})
	var client *host.Client
	testkit.WaitUntil(t, "the host's socket to answer", func() bool {
		client, err = host.Dial(l)
		return err == nil
	})
	defer client.Close()

	id, err := client.Run(host.RunRequest{Workflow: "review"})
	if err != nil {
		t.Fatal(err)
	}
	testkit.WaitUntil(t, "the reviewer to run", func() bool { return waiting.Load() == 1 })
	if err := client.Pause(id); err != nil {
		t.Fatal(err)
	}
	want := "pausing: pause requested; role reviewer finishes its step first"
	if got := pauseRecords(t, l, id); len(got) != 1 || got[0] != want {
		t.Fatalf("pause records = %q, want [%q]", got, want)
	}
	close(release)
	testkit.WaitUntil(t, "the thread to be held", func() bool { return len(pauseRecords(t, l, id)) == 2 })
	if got := pauseRecords(t, l, id)[1]; got != "paused: paused after step 2" {
		t.Fatalf("held with %q, want after the reviewer's step", got)
	}
	if err := client.Resume(id); err != nil {
		t.Fatal(err)
	}
	testkit.WaitUntil(t, "the thread to finish", func() bool {
		rec, err := threads.Resolve(l, id)
		return err == nil && rec.Source == threads.SourceHistory
	})
}

// pauseRecords are thread id's debug-log records of pausing, "tag: content".
func pauseRecords(t *testing.T, l storage.Layout, id string) []string {
	t.Helper()
	rec, err := threads.Resolve(l, id)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(l.InfoLog(rec.BundleHash, id))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var r struct{ Tag, Content string }
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		switch r.Tag {
		case executor.TagPausing, executor.TagPaused, executor.TagResumed:
			out = append(out, r.Tag+": "+r.Content)
		}
	}
	return out
}
