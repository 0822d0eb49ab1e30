package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/uncaged/workflow/engine/atomicfile"
	"github.com/uncaged/workflow/shared/testkit"
)

// mockKey is the API key the greeting model wants; threads find it in
// $MOCK_KEY, which workflow.yaml names instead of the key.
const mockKey = "sk-mock"

// greetModel is a chat-completions server that answers every request with
// a call of the output tool, and records the Authorization it was sent.
type greetModel struct {
	srv  *httptest.Server
	mu   sync.Mutex
	auth []string
}

func newGreetModel(t *testing.T) *greetModel {
	t.Helper()
	m := &greetModel{}
	m.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, err := io.ReadAll(r.Body)
		var req chatRequest
		if err == nil {
			err = json.Unmarshal(raw, &req)
		}
		if err != nil || r.URL.Path != "/v1/chat/completions" || len(req.Tools) == 0 {
			http.Error(w, fmt.Sprintf("greet model: unexpected %s %s (%v)", r.Method, r.URL.Path, err), http.StatusBadRequest)
			return
		}
		m.mu.Lock()
		m.auth = append(m.auth, r.Header.Get("Authorization"))
		m.mu.Unlock()
		if r.Header.Get("Authorization") != "Bearer "+mockKey {
			http.Error(w, `{"error":{"message":"greet model: bad API key"}}`, http.StatusUnauthorized)
			return
		}
		turn := modelTurn{toolName: req.Tools[0].Function.Name, toolArgs: `{"greeting":"Hello, world!"}`}
		if req.Stream {
			writeStream(w, turn)
			return
		}
		writeJSON(w, turn)
	}))
	t.Cleanup(m.srv.Close)
	return m
}

func (m *greetModel) calls() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.auth...)
}

const greetWorkflow = `version: 1
description: Greets the world through a model
roles:
  greeter:
    description: Greets
    prompt: Greet the world.
    agent: {type: llm}
    output:
      type: object
      properties: {greeting: {type: string}}
      required: [greeting]
graph:
  __start__: greeter
  greeter: __end__
`

// greetRoot is an engine root whose model's key is "env:MOCK_KEY", with
// the greet workflow registered.
func greetRoot(t *testing.T) (string, *greetModel) {
	t.Helper()
	m := newGreetModel(t)
	root := engineRoot(t)
	if r := run(t, root, "setup", "--provider", "mock", "--base-url", m.srv.URL+"/v1", "--api-key", "env:MOCK_KEY", "--default-model", "mock/m1"); r.code != 0 {
		t.Fatalf("setup: %+v", r)
	}
	withoutOversight(t, root) // counts the role's calls
	wf := filepath.Join(t.TempDir(), "greet.yaml")
	if err := os.WriteFile(wf, []byte(greetWorkflow), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := run(t, root, "workflow", "add", "greet", wf); r.code != 0 {
		t.Fatalf("workflow add: %+v", r)
	}
	return root, m
}

// runIDIn starts a thread from dir with env and returns its id.
func runIDIn(t *testing.T, env []string, dir, root string, args ...string) string {
	t.Helper()
	r := runEnv(t, env, dir, root, append([]string{"run"}, args...)...)
	id := strings.TrimSpace(r.stdout)
	if r.code != 0 || len(id) != 26 {
		t.Fatalf("run %v: %+v", args, r)
	}
	return id
}

// TestThreadsRunWithTheCallersEnvironment is the first hour of a new user:
// a run without the key fails and says whose environment lacked it; after
// `export MOCK_KEY=…` the next run works, on the same engine host, which
// a run started without the key.
func TestThreadsRunWithTheCallersEnvironment(t *testing.T) {
	t.Parallel()
	root, m := greetRoot(t)
	dir := t.TempDir()

	// `unset MOCK_KEY` (an empty variable is not set for the engine).
	id := runIDIn(t, []string{"MOCK_KEY="}, dir, root, "greet", "--prompt", "hi")
	s := finished(t, root, id)
	want := `environment variable "MOCK_KEY" is not set (the thread's environment is that of ` + "`uncaged-workflow run`" + ` in ` + dir + `, pid `
	if s.Status != "failed" || !strings.Contains(s.Result.Summary, want) {
		t.Fatalf("run without the key: status %s, summary %q; want it to contain %q", s.Status, s.Result.Summary, want)
	}
	pid := hostPID(root)
	if pid <= 0 {
		t.Fatal("no engine host runs after the first run")
	}

	// `export MOCK_KEY=…`: the host started above runs this thread too.
	id = runIDIn(t, []string{"MOCK_KEY=" + mockKey}, dir, root, "greet", "--prompt", "hi")
	if s := finished(t, root, id); s.Status != "completed" || s.Result.ReturnCode != 0 || s.Steps[0].Content != `{"greeting":"Hello, world!"}` {
		t.Fatalf("run with the key: %+v", s)
	}
	if got := hostPID(root); got != pid || !atomicfile.Held(filepath.Join(root, "engine.lock")) {
		t.Fatalf("engine host pid %d after the second run, want the same host %d still up", got, pid)
	}
	if auth := m.calls(); len(auth) != 1 || auth[0] != "Bearer "+mockKey {
		t.Fatalf("the model was called with %q", auth)
	}
	// The key never lands in the root: not in nodes, logs or indexes.
	checkNotStored(t, root, mockKey)

	// A fork is the caller's too: without the key it fails again.
	r := runEnv(t, []string{"MOCK_KEY="}, dir, root, "thread", "fork", id)
	forkID := strings.TrimSpace(r.stdout)
	if r.code != 0 || len(forkID) != 26 {
		t.Fatalf("fork: %+v", r)
	}
	if f := finished(t, root, forkID); f.Status != "failed" || !strings.Contains(f.Result.Summary, "the thread's environment is that of `uncaged-workflow thread fork`") {
		t.Fatalf("fork without the key: %+v", f.Result)
	}
}

// checkNotStored fails when secret is in any file of root.
func checkNotStored(t *testing.T, root, secret string) {
	t.Helper()
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if strings.Contains(string(b), secret) {
			t.Errorf("%s holds %q", p, secret)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestConnectorAPIRunsWithTheConnectorsEnvironment: a thread started
// through the connector's API (here `serve`) gets the connector's
// environment, not that of the command that started the engine host.
func TestConnectorAPIRunsWithTheConnectorsEnvironment(t *testing.T) {
	t.Parallel()
	root, _ := greetRoot(t)
	// The host is started by a command that has the key...
	id := runIDIn(t, []string{"MOCK_KEY=" + mockKey}, "", root, "greet")
	if s := finished(t, root, id); s.Status != "completed" {
		t.Fatalf("run with the key: %+v", s)
	}
	// ...the connector has none.
	p := startProc(t, []string{"MOCK_KEY=", "UNCAGED_WORKFLOW_STORAGE_ROOT=" + root}, "uncaged-workflow", "serve", "--listen", "127.0.0.1:0")
	base := p.serving(t)
	resp, err := http.Post(base+"/api/threads", "application/json", strings.NewReader(`{"workflow":"greet","prompt":"hi"}`))
	if err != nil {
		t.Fatal(err)
	}
	var started struct{ ThreadID string }
	err = json.NewDecoder(resp.Body).Decode(&started)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("POST /api/threads: %d %v", resp.StatusCode, err)
	}
	s := finished(t, root, started.ThreadID)
	want := `environment variable "MOCK_KEY" is not set (the thread's environment is the connector's environment (pid ` + strconv.Itoa(p.cmd.Process.Pid) + `))`
	if s.Status != "failed" || !strings.Contains(s.Result.Summary, want) {
		t.Fatalf("thread through the API: status %s, summary %q; want %q", s.Status, s.Result.Summary, want)
	}
}

// TestHelloWorldBundleFindsItsRolesThroughTheRun: the hello-world bundle
// finds its scripts in $HELLO_WORLD_ROLES, else in ./roles; both are the
// run's, whatever the command that started the engine host had.
func TestHelloWorldBundleFindsItsRolesThroughTheRun(t *testing.T) {
	t.Parallel()
	rolesDir, err := filepath.Abs(filepath.Join(helloWorldDir, "roles"))
	if err != nil {
		t.Fatal(err)
	}
	root := engineRoot(t)
	addPath(t, root, "hello-world-js", filepath.Join(helloWorldDir, "hello-world.esm.js"))

	// Started from a directory without roles/ and without the variable,
	// the first run fails — and leaves an engine host running.
	id := runIDIn(t, []string{"HELLO_WORLD_ROLES="}, t.TempDir(), root, "hello-world-js", "--prompt", "Say hello.")
	if s := finished(t, root, id); s.Status != "failed" {
		t.Fatalf("run without the roles: %+v", s)
	}
	pid := hostPID(root)

	// HELLO_WORLD_ROLES=… uncaged-workflow run …
	id = runIDIn(t, []string{"HELLO_WORLD_ROLES=" + rolesDir}, t.TempDir(), root, "hello-world-js", "--prompt", "Say hello.")
	if s := finished(t, root, id); s.Status != "completed" || roles(s) != "writer,reviewer,writer,reviewer" {
		t.Fatalf("run with HELLO_WORLD_ROLES: %+v", s)
	}
	// cd examples/hello-world; uncaged-workflow run …: process.cwd() is
	// the run's directory.
	id = runIDIn(t, []string{"HELLO_WORLD_ROLES="}, helloWorldDir, root, "hello-world-js", "--prompt", "Say hello.")
	if s := finished(t, root, id); s.Status != "completed" || roles(s) != "writer,reviewer,writer,reviewer" {
		t.Fatalf("run from the example's directory: %+v", s)
	}
	if got := hostPID(root); got != pid {
		t.Fatalf("engine host pid %d, want the first run's %d", got, pid)
	}
}

// gateBundle's one role waits until the file its prompt names exists, so
// a test decides when its thread may end.
const gateBundle = `import { createWorkflow, buildDescriptor, START, END } from "@uncaged/workflow-runtime";
import fs from "node:fs";

const definition = {
  description: "Waits for a file.",
  roles: { wait: { description: "waits for the file the prompt names", systemPrompt: "", schema: { type: "object" } } },
  table: { [START]: [{ condition: "FALLBACK", role: "wait" }], wait: [{ condition: "FALLBACK", role: END }] },
};

export const descriptor = buildDescriptor(definition);

export const run = createWorkflow(definition, {
  adapter: () => async (ctx) => {
    while (!fs.existsSync(ctx.start.content)) await new Promise((resolve) => setTimeout(resolve, 20));
    return { meta: { opened: true }, childThread: null };
  },
  overrides: null,
});
`

// running reports whether id is among the threads `thread ps` lists.
func running(t *testing.T, root, id string) bool {
	t.Helper()
	r := run(t, root, "thread", "ps")
	return r.code == 0 && strings.Contains(r.stdout, id)
}

// TestEngineStopAndRestart: stop with no host is no error; stop refuses
// while a thread runs and --force stops it resumable; restart --force
// carries a running thread over into a new host.
func TestEngineStopAndRestart(t *testing.T) {
	t.Parallel()
	root := engineRoot(t)
	r := run(t, root, "engine", "stop")
	if r.code != 0 || r.stdout != "no engine host running for "+root+"\n" || r.stderr != "" {
		t.Fatalf("engine stop with no host: %+v", r)
	}

	bundle := filepath.Join(t.TempDir(), "gate.esm.js")
	if err := os.WriteFile(bundle, []byte(gateBundle), 0o644); err != nil {
		t.Fatal(err)
	}
	addPath(t, root, "gate", bundle)
	gate := filepath.Join(t.TempDir(), "open")
	id := start(t, root, "gate", "--prompt", gate)
	first := hostPID(root)
	r = run(t, root, "engine", "stop")
	if r.code != 1 || !strings.Contains(r.stderr, id+" (running)") || !strings.Contains(r.stderr, "--force") {
		t.Fatalf("engine stop with a thread running: %+v", r)
	}
	if !running(t, root, id) || hostPID(root) != first {
		t.Fatal("a refused stop stopped the host or the thread")
	}

	// restart --force: a new host, and the thread goes on in it.
	r = run(t, root, "engine", "restart", "--force")
	second := hostPID(root)
	if r.code != 0 || second == first || !strings.Contains(r.stdout, fmt.Sprintf("engine host pid %d stopped\n", first)) ||
		!strings.Contains(r.stdout, fmt.Sprintf("engine host pid %d started for %s\n", second, root)) || !strings.Contains(r.stdout, "thread "+id+" resumed\n") {
		t.Fatalf("engine restart --force (hosts %d, %d): %+v", first, second, r)
	}
	if !running(t, root, id) {
		t.Fatal("the thread does not run in the new host")
	}

	// stop --force: the thread is stopped where it is, and resumable.
	r = run(t, root, "engine", "stop", "--force")
	if r.code != 0 || !strings.Contains(r.stdout, fmt.Sprintf("engine host pid %d stopped\n", second)) ||
		!strings.Contains(r.stdout, "thread "+id+" stopped; resume it with `uncaged-workflow thread resume "+id+"`") {
		t.Fatalf("engine stop --force: %+v", r)
	}
	if atomicfile.Held(filepath.Join(root, "engine.lock")) {
		t.Fatal("the root is still locked after engine stop returned")
	}
	if _, err := os.Stat(filepath.Join(root, "engine.sock")); !os.IsNotExist(err) {
		t.Fatalf("the socket is still there after engine stop returned: %v", err)
	}
	if s := show(t, root, id); s.Status != "interrupted" {
		t.Fatalf("after a forced stop the thread is %s, want interrupted", s.Status)
	}
	if r := run(t, root, "thread", "resume", id); r.code != 0 {
		t.Fatalf("resume: %+v", r)
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if s := finished(t, root, id); s.Status != "completed" || roles(s) != "wait" {
		t.Fatalf("resumed thread: %+v (roles %s)", s, roles(s))
	}

	// An idle host stops without --force; restart with none starts one.
	testkit.WaitUntil(t, "the host to let go of "+id, func() bool { return !running(t, root, id) })
	if r := run(t, root, "engine", "stop"); r.code != 0 || !strings.HasPrefix(r.stdout, "engine host pid ") {
		t.Fatalf("engine stop when idle: %+v", r)
	}
	if r := run(t, root, "engine", "restart"); r.code != 0 || !strings.Contains(r.stdout, "started for "+root) {
		t.Fatalf("engine restart with no host: %+v", r)
	}
	stopHost(t, root, syscall.SIGTERM)
}

// rootBundle answers with the storage root its thread's environment names.
const rootBundle = `import { createWorkflow, buildDescriptor, START, END } from "@uncaged/workflow-runtime";

const definition = {
  description: "Reports the storage root.",
  roles: { report: { description: "reports", systemPrompt: "", schema: { type: "object" } } },
  table: { [START]: [{ condition: "FALLBACK", role: "report" }], report: [{ condition: "FALLBACK", role: END }] },
};

export const descriptor = buildDescriptor(definition);

export const run = createWorkflow(definition, {
  adapter: () => async () => ({ meta: { root: process.env.UNCAGED_WORKFLOW_STORAGE_ROOT || "" }, childThread: null }),
  overrides: null,
});
`

// TestAThreadKnowsARootGivenByFlag: a root named with --storage-root, not
// a variable, still reaches the thread's environment, so the processes it
// starts (an uncaged-workflow of their own) use the same root.
func TestAThreadKnowsARootGivenByFlag(t *testing.T) {
	t.Parallel()
	root := engineRoot(t)
	bundle := filepath.Join(t.TempDir(), "root.esm.js")
	if err := os.WriteFile(bundle, []byte(rootBundle), 0o644); err != nil {
		t.Fatal(err)
	}
	addPath(t, root, "report-root", bundle)
	// Neither variable: the flag alone names the root.
	r := runEnv(t, []string{"WORKFLOW_STORAGE_ROOT=", "UNCAGED_WORKFLOW_STORAGE_ROOT="}, "", root, "--storage-root", root, "run", "report-root")
	id := strings.TrimSpace(r.stdout)
	if r.code != 0 || len(id) != 26 {
		t.Fatalf("run --storage-root: %+v", r)
	}
	if s := finished(t, root, id); s.Status != "completed" || s.Steps[0].Content != `{"root":"`+root+`"}` {
		t.Fatalf("thread = %+v", s)
	}
}
