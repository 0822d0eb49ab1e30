package agents

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/uncaged/workflow/engine/threadenv"
)

// envHost is a cmdHost that carries a thread environment, as the
// executor's run does.
type envHost struct {
	*cmdHost
	env *threadenv.Env
}

func (h envHost) ThreadEnv() *threadenv.Env { return h.env }
func (h envHost) Getenv(name string) string { return h.env.Getenv(name) }

func envCall(h envHost, role string) Call {
	c := cmdCall(h.cmdHost, role, "")
	c.Host = h
	return c
}

func resolvedDir(t *testing.T, dir string) string {
	t.Helper()
	p, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestCommandAgentRunsInTheThreadsEnvironment: the program is found on
// the thread's PATH, gets the thread's variables, and without a workspace
// runs in the thread's directory — not the engine host's.
func TestCommandAgentRunsInTheThreadsEnvironment(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	h := envHost{newCmdHost(t), threadenv.New([]string{"PATH=" + fakeAgents, "THREAD_K=from-thread"}, dir, "that of a test")}
	a := mustCommandAgent(t, Spec{Kind: KindExec, Command: "where.sh"})
	res, err := a.Run(context.Background(), envCall(h, "coder"))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"dir":"` + resolvedDir(t, dir) + `","k":"from-thread"}`
	if got := cmdMetaJSON(t, res.Meta); got != want {
		t.Fatalf("meta = %s, want %s", got, want)
	}

	// Not on the thread's PATH: the error says whose PATH it was.
	bare := envHost{h.cmdHost, threadenv.New([]string{"PATH=/nonexistent"}, dir, "that of `uncaged-workflow run` in /x, pid 1")}
	_, err = mustCommandAgent(t, Spec{Kind: KindExec, Command: "where.sh"}).Run(context.Background(), envCall(bare, "coder"))
	if err == nil || !strings.Contains(err.Error(), `command "where.sh" (the agent's command) was not found on PATH (the thread's environment is that of `+"`uncaged-workflow run`"+` in /x, pid 1)`) {
		t.Fatalf("program off the thread's PATH: %v", err)
	}
}
