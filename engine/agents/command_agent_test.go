package agents

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/uncaged/workflow/engine/canonyaml"
	"github.com/uncaged/workflow/engine/cas"
	"github.com/uncaged/workflow/engine/node"
	"github.com/uncaged/workflow/engine/registry"
	"github.com/uncaged/workflow/engine/workflow"
	"github.com/uncaged/workflow/shared/testkit"
)

// cmdHost is an agents.Host over a real CAS with a fake extract: it
// answers {"summary": <the content's first line>} without a model.
type cmdHost struct {
	store *cas.Store
	env   map[string]string

	mu        sync.Mutex
	logs      []cmdLogEntry
	extracted []string // content payloads extract was asked about
	schemas   []string // the schemas extract was asked with
	extractFn func(payload string) (canonyaml.Map, error)
}

type cmdLogEntry struct{ tag, content string }

func newCmdHost(t *testing.T) *cmdHost {
	t.Helper()
	return &cmdHost{store: cas.Open(filepath.Join(t.TempDir(), "cas")), env: map[string]string{}}
}

func (h *cmdHost) CAS() *cas.Store { return h.store }

func (h *cmdHost) Log(tag, content string) {
	h.mu.Lock()
	h.logs = append(h.logs, cmdLogEntry{tag, content})
	h.mu.Unlock()
}

func (h *cmdHost) RunChild(context.Context, string, string) (workflow.ChildResult, error) {
	return workflow.ChildResult{}, errors.New("no child workflows in this test")
}

func (h *cmdHost) Getenv(name string) string { return h.env[name] }

func (h *cmdHost) ResolveModel(string) (registry.Model, error) {
	return registry.Model{}, errors.New("no models in this test")
}

func (h *cmdHost) Extract(_ context.Context, schema []byte, hash string) (workflow.ExtractResult, error) {
	n, err := h.store.GetNode(hash)
	if err != nil {
		return workflow.ExtractResult{}, err
	}
	c, ok := n.(node.Content)
	if !ok {
		return workflow.ExtractResult{}, errors.New("not a content node")
	}
	h.mu.Lock()
	h.extracted = append(h.extracted, c.Payload)
	h.schemas = append(h.schemas, string(schema))
	fn := h.extractFn
	h.mu.Unlock()
	if fn != nil {
		m, err := fn(c.Payload)
		return workflow.ExtractResult{Meta: m, ContentPayload: c.Payload}, err
	}
	first, _, _ := strings.Cut(c.Payload, "\n")
	return workflow.ExtractResult{Meta: canonyaml.Map{{Key: "summary", Value: first}}, ContentPayload: c.Payload}, nil
}

func (h *cmdHost) logged(tag string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, l := range h.logs {
		if l.tag == tag {
			out = append(out, l.content)
		}
	}
	return out
}

func (h *cmdHost) extractCalls() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.extracted...)
}

// script copies a testdata script into a temp dir as an executable, so the
// tests do not depend on the checkout keeping file modes.
func fakeAgent(t *testing.T, name string) string {
	t.Helper()
	p := filepath.Join(fakeAgents, name)
	if _, err := os.Stat(p); err != nil {
		t.Fatal(err)
	}
	return p
}

// fakeAgents holds the scripts of testdata, made executable before any
// test runs. A test writing its own copy while a parallel test forks would
// have the child hold it open for writing until its exec, and running the
// copy could then fail with "text file busy" (golang.org/issue/22315).
var fakeAgents string

func TestMain(m *testing.M) {
	dir, err := writeFakeAgents()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fakeAgents = dir
	code := m.Run()
	_ = os.RemoveAll(dir) // a temporary directory: best effort
	os.Exit(code)
}

func writeFakeAgents() (string, error) {
	dir, err := os.MkdirTemp("", "agents-test-")
	if err != nil {
		return "", err
	}
	if err := copyExecutable(dir, "testdata"); err != nil {
		_ = os.RemoveAll(dir) // best effort: err is what matters
		return "", err
	}
	return dir, nil
}

// copyExecutable copies the files of from into dir, mode 0755.
func copyExecutable(dir, from string) error {
	ents, err := os.ReadDir(from)
	if err != nil {
		return err
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(from, e.Name()))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), b, 0o755); err != nil {
			return err
		}
	}
	return nil
}

func cmdCall(h *cmdHost, role, schema string) Call {
	c := Call{
		Role:         role,
		SystemPrompt: "You are the " + role + ".",
		Thread: workflow.ThreadContext{
			ThreadID: "01JTESTTHREAD0000000000000",
			Depth:    1,
			Start:    workflow.StartStep{Role: node.RoleStart, Content: "Fix the bug", Timestamp: 1},
			Steps: []workflow.RoleStep{{
				Role: "planner", Meta: canonyaml.Map{{Key: "plan", Value: "step one"}},
				ContentHash: "SSVQ0RZ55P9Y4", Refs: []string{"SSVQ0RZ55P9Y4"}, Timestamp: 2,
			}},
		},
		Host: h,
	}
	if schema != "" {
		c.Schema = []byte(schema)
	}
	return c
}

func mustCommandAgent(t *testing.T, s Spec) Agent {
	t.Helper()
	a, err := New(s)
	if err != nil {
		t.Fatalf("New(%+v): %v", s, err)
	}
	return a
}

func cmdMetaJSON(t *testing.T, m canonyaml.Map) string {
	t.Helper()
	b, err := m.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestExecAgentMetaFromStdout(t *testing.T) {
	t.Parallel()
	h := newCmdHost(t)
	a := mustCommandAgent(t, Spec{Kind: KindExec, Command: fakeAgent(t, "echo_env.sh"), Env: map[string]string{"EXTRA": "from-spec"}})
	res, err := a.Run(context.Background(), cmdCall(h, "coder", `{"type":"object","required":["role"]}`))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"role":"coder","thread":"01JTESTTHREAD0000000000000","depth":1,"extra":"from-spec"}`
	if got := cmdMetaJSON(t, res.Meta); got != want {
		t.Errorf("meta = %s, want %s", got, want)
	}
	if got := h.extractCalls(); len(got) != 0 {
		t.Errorf("exec must not extract, got %q", got)
	}
}

func TestExecAgentGetsThreadContextOnStdin(t *testing.T) {
	t.Parallel()
	h := newCmdHost(t)
	a := mustCommandAgent(t, Spec{Kind: KindExec, Command: fakeAgent(t, "stdin.sh")})
	schema := `{"type":"object","required":["threadId","role","depth","prompt","steps"]}`
	res, err := a.Run(context.Background(), cmdCall(h, "coder", schema))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"threadId":"01JTESTTHREAD0000000000000","role":"coder","depth":1,"prompt":"Fix the bug","systemPrompt":"You are the coder.","parentState":null,"steps":[{"role":"planner","meta":{"plan":"step one"},"contentHash":"SSVQ0RZ55P9Y4"}]}`
	if got := cmdMetaJSON(t, res.Meta); got != want {
		t.Errorf("meta = %s\nwant   %s", got, want)
	}
}

func TestExecAgentIsStrict(t *testing.T) {
	t.Parallel()
	cases := map[string]struct{ output, schema, want string }{
		"prose":         {"I fixed it.", "", "not JSON"},
		"array":         {"[1,2]", "", "not an object"},
		"schema":        {`{"status":"maybe"}`, `{"type":"object","properties":{"status":{"enum":["done"]}}}`, "stdout must be a JSON object valid against the role's schema"},
		"empty":         {"", "", "empty"},
		"fenced prose":  {"ok\n```json\n{\"a\":1}\n```", "", "not JSON"},
		"bad schema":    {`{"a":1}`, `{"type":`, "schema is not JSON"},
		"schema no obj": {`{"a":1}`, `[1]`, "must be a JSON Schema object"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			h := newCmdHost(t)
			a := mustCommandAgent(t, Spec{Kind: KindExec, Command: fakeAgent(t, "print.sh"), Env: map[string]string{"AGENT_OUTPUT": c.output}})
			_, err := a.Run(context.Background(), cmdCall(h, "coder", c.schema))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error containing %q", err, c.want)
			}
			if got := h.extractCalls(); len(got) != 0 {
				t.Errorf("exec must not extract, got %q", got)
			}
		})
	}
}

func TestCLIAgentFindsMetaInOutput(t *testing.T) {
	t.Parallel()
	schema := `{"type":"object","required":["status"],"properties":{"status":{"type":"string"}}}`
	cases := map[string]struct{ output, want string }{
		"whole output":  {`{"status":"done"}`, `{"status":"done"}`},
		"fenced block":  {"Work is done.\n```json\n{\"status\":\"fenced\"}\n```\nBye.", `{"status":"fenced"}`},
		"last fence":    {"```json\n{\"status\":\"first\"}\n```\n```json\n{\"status\":\"second\"}\n```", `{"status":"second"}`},
		"trailing JSON": {"I changed two files.\nResult:\n{\n  \"status\": \"trailing\"\n}", `{"status":"trailing"}`},
		"invalid fence": {"```json\n{\"other\":1}\n```\n{\"status\":\"tail\"}", `{"status":"tail"}`},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			h := newCmdHost(t)
			a := mustCommandAgent(t, Spec{Kind: KindCLI, Command: fakeAgent(t, "print.sh"), Args: []string{"{prompt}"}, Env: map[string]string{"AGENT_OUTPUT": c.output}})
			res, err := a.Run(context.Background(), cmdCall(h, "coder", schema))
			if err != nil {
				t.Fatal(err)
			}
			if got := cmdMetaJSON(t, res.Meta); got != c.want {
				t.Errorf("meta = %s, want %s", got, c.want)
			}
			if got := h.extractCalls(); len(got) != 0 {
				t.Errorf("no extract needed, got %q", got)
			}
		})
	}
}

func TestCLIAgentExtractsProse(t *testing.T) {
	t.Parallel()
	h := newCmdHost(t)
	out := "I fixed the bug in main.go.\n{\"status\": 1}" // JSON, but not valid against the schema
	a := mustCommandAgent(t, Spec{Kind: KindCLI, Command: fakeAgent(t, "print.sh"), Args: []string{"{prompt}"}, Env: map[string]string{"AGENT_OUTPUT": out}})
	res, err := a.Run(context.Background(), cmdCall(h, "coder", `{"type":"object","properties":{"status":{"type":"string"}},"required":["status"]}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := cmdMetaJSON(t, res.Meta); got != `{"summary":"I fixed the bug in main.go."}` {
		t.Errorf("meta = %s", got)
	}
	calls := h.extractCalls()
	if len(calls) != 1 || calls[0] != out+"\n" {
		t.Fatalf("extract saw %q, want the agent's stdout", calls)
	}
	// The stored content node is the agent's output, as extract read it.
	hash, err := h.store.PutNode(node.NewContent(out+"\n", nil))
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, l := range h.logged("agent") {
		found = found || strings.Contains(l, hash)
	}
	if !found {
		t.Errorf("the log does not name the output's content node %s: %q", hash, h.logged("agent"))
	}
}

func TestCLIAgentExtractFailure(t *testing.T) {
	t.Parallel()
	h := newCmdHost(t)
	h.extractFn = func(string) (canonyaml.Map, error) { return nil, errors.New("no extract model configured") }
	a := mustCommandAgent(t, Spec{Kind: KindCLI, Command: fakeAgent(t, "print.sh"), Args: []string{"x"}, Env: map[string]string{"AGENT_OUTPUT": "prose only"}})
	_, err := a.Run(context.Background(), cmdCall(h, "coder", ""))
	if err == nil || !strings.Contains(err.Error(), "no extract model configured") || !strings.Contains(err.Error(), "holds no JSON object") {
		t.Fatalf("got %v", err)
	}
}

func TestCLIAgentPromptOnStdinWithoutPromptArg(t *testing.T) {
	t.Parallel()
	h := newCmdHost(t)
	a := mustCommandAgent(t, Spec{Kind: KindCLI, Command: fakeAgent(t, "stdin.sh")})
	call := cmdCall(h, "coder", "")
	if _, err := a.Run(context.Background(), call); err != nil {
		t.Fatal(err)
	}
	want := "You are the coder.\n\n" + ThreadInput(call.Thread)
	if got := h.extractCalls(); len(got) != 1 || got[0] != want {
		t.Fatalf("stdin prompt = %q\nwant %q", got, want)
	}
}

func TestCLIAgentArgSubstitution(t *testing.T) {
	t.Parallel()
	h := newCmdHost(t)
	ws := t.TempDir()
	argvOut := filepath.Join(t.TempDir(), "argv")
	a := mustCommandAgent(t, Spec{
		Kind: KindCLI, Command: fakeAgent(t, "argv.sh"), Model: "m1", Workspace: ws,
		Args: []string{"--model={model}", "--dir", "{workspace}", "-p", "{prompt}"},
		Env:  map[string]string{"ARGV_OUT": argvOut},
	})
	call := cmdCall(h, "coder", "")
	if _, err := a.Run(context.Background(), call); err != nil {
		t.Fatal(err)
	}
	want := []string{"--model=m1", "--dir", ws, "-p", "You are the coder.\n\n" + ThreadInput(call.Thread)}
	checkArgvFile(t, argvOut, want, ws)
}

func readArgvFile(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(string(b), "\x00")
	return parts[:len(parts)-1]
}

func checkArgvFile(t *testing.T, argvOut string, want []string, cwd string) {
	t.Helper()
	got := readArgvFile(t, argvOut)
	if strings.Join(got, "\x01") != strings.Join(want, "\x01") {
		t.Errorf("argv = %q\nwant   %q", got, want)
	}
	if cwd == "" {
		return
	}
	b, err := os.ReadFile(argvOut + ".cwd")
	if err != nil {
		t.Fatal(err)
	}
	gotCwd, _ := filepath.EvalSymlinks(strings.TrimSpace(string(b)))
	wantCwd, _ := filepath.EvalSymlinks(cwd)
	if gotCwd != wantCwd {
		t.Errorf("cwd = %s, want %s", gotCwd, wantCwd)
	}
}

func TestCursorPresetArgv(t *testing.T) {
	t.Parallel()
	h := newCmdHost(t)
	ws := t.TempDir()
	argvOut := filepath.Join(t.TempDir(), "argv")
	a := mustCommandAgent(t, Spec{Kind: KindCursor, Command: fakeAgent(t, "argv.sh"), Workspace: ws, Env: map[string]string{"ARGV_OUT": argvOut}})
	call := cmdCall(h, "coder", `{"type":"object","required":["ok"]}`)
	res, err := a.Run(context.Background(), call)
	if err != nil {
		t.Fatal(err)
	}
	if got := cmdMetaJSON(t, res.Meta); got != `{"ok":true}` {
		t.Errorf("meta = %s", got)
	}
	full := "You are the coder.\n\n" + ThreadInput(call.Thread)
	checkArgvFile(t, argvOut, []string{"-p", full, "--model", "auto", "--workspace", ws, "--output-format", "text", "--trust", "--force"}, ws)
}

func TestCursorPresetEnvDefaults(t *testing.T) {
	t.Parallel()
	h := newCmdHost(t)
	ws := t.TempDir()
	argvOut := filepath.Join(t.TempDir(), "argv")
	h.env["WORKFLOW_CURSOR_COMMAND"] = fakeAgent(t, "argv.sh")
	h.env["WORKFLOW_CURSOR_MODEL"] = "gpt-env"
	h.env["WORKFLOW_CURSOR_TIMEOUT"] = "60000"
	a := mustCommandAgent(t, Spec{Kind: KindCursor, Workspace: ws, Env: map[string]string{"ARGV_OUT": argvOut}})
	call := cmdCall(h, "coder", "")
	if _, err := a.Run(context.Background(), call); err != nil {
		t.Fatal(err)
	}
	full := "You are the coder.\n\n" + ThreadInput(call.Thread)
	checkArgvFile(t, argvOut, []string{"-p", full, "--model", "gpt-env", "--workspace", ws, "--output-format", "text", "--trust", "--force"}, ws)

	// The spec's own values win over the environment's.
	a = mustCommandAgent(t, Spec{Kind: KindCursor, Model: "spec-model", Workspace: ws, Env: map[string]string{"ARGV_OUT": argvOut}})
	if _, err := a.Run(context.Background(), call); err != nil {
		t.Fatal(err)
	}
	if got := readArgvFile(t, argvOut); got[3] != "spec-model" {
		t.Errorf("model = %q, want spec-model", got[3])
	}

	h.env["WORKFLOW_CURSOR_TIMEOUT"] = "soon"
	if _, err := a.Run(context.Background(), call); err == nil || !strings.Contains(err.Error(), "WORKFLOW_CURSOR_TIMEOUT") {
		t.Errorf("bad timeout variable: got %v", err)
	}
	h.env["WORKFLOW_CURSOR_TIMEOUT"] = ""
	h.env["WORKFLOW_CURSOR_COMMAND"] = "bin/cursor-agent"
	if _, err := a.Run(context.Background(), call); err == nil || !strings.Contains(err.Error(), "absolute path") || !strings.Contains(err.Error(), "WORKFLOW_CURSOR_COMMAND") {
		t.Errorf("relative command variable: got %v", err)
	}
}

func TestCursorWorkspaceFromThread(t *testing.T) {
	t.Parallel()
	h := newCmdHost(t)
	ws := t.TempDir()
	argvOut := filepath.Join(t.TempDir(), "argv")
	h.extractFn = func(payload string) (canonyaml.Map, error) {
		if strings.HasPrefix(payload, "## Task\n") {
			return canonyaml.Map{{Key: "workspace", Value: " " + ws + " "}}, nil
		}
		return canonyaml.Map{{Key: "summary", Value: "coded"}}, nil
	}
	a := mustCommandAgent(t, Spec{Kind: KindCursor, Command: fakeAgent(t, "argv.sh"), Env: map[string]string{"ARGV_OUT": argvOut}})
	call := cmdCall(h, "coder", `{"type":"object","required":["ok"]}`)
	if _, err := a.Run(context.Background(), call); err != nil {
		t.Fatal(err)
	}
	full := "You are the coder.\n\n" + ThreadInput(call.Thread)
	checkArgvFile(t, argvOut, []string{"-p", full, "--model", "auto", "--workspace", ws, "--output-format", "text", "--trust", "--force"}, ws)

	wantInput := "## Task\nFix the bug\n\n## Step: planner\nMeta: {\"plan\":\"step one\"}\n\n" +
		"Extract the absolute filesystem path of the project workspace where code changes should be made."
	if got := h.extractCalls(); len(got) != 1 || got[0] != wantInput {
		t.Errorf("extract inputs = %q, want just %q", got, wantInput)
	}
	if len(h.schemas) != 1 || h.schemas[0] != workspaceSchema {
		t.Errorf("extract schemas = %q", h.schemas)
	}
	found := false
	for _, l := range h.logged("agent") {
		found = found || strings.Contains(l, "workspace "+ws+", extracted from the thread context")
	}
	if !found {
		t.Errorf("the derived workspace was not logged: %q", h.logged("agent"))
	}
}

func TestCursorWorkspaceExtractionFails(t *testing.T) {
	t.Parallel()
	const want = "cursor-agent: failed to extract workspace path from context. Ensure the task prompt or previous steps include a project path."
	gone := filepath.Join(t.TempDir(), "gone")
	cases := map[string]struct {
		meta    canonyaml.Map
		err     error
		wantErr string
	}{
		"relative path":  {meta: canonyaml.Map{{Key: "workspace", Value: "src/project"}}, wantErr: want},
		"empty path":     {meta: canonyaml.Map{{Key: "workspace", Value: ""}}, wantErr: want},
		"no field":       {meta: canonyaml.Map{{Key: "path", Value: "/tmp"}}, wantErr: want},
		"not a string":   {meta: canonyaml.Map{{Key: "workspace", Value: float64(1)}}, wantErr: want},
		"extract failed": {err: errors.New("no extract model configured"), wantErr: "no extract model configured"},
		"missing dir":    {meta: canonyaml.Map{{Key: "workspace", Value: gone}}, wantErr: "workspace " + gone + " is not an existing directory"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			h := newCmdHost(t)
			h.extractFn = func(string) (canonyaml.Map, error) { return c.meta, c.err }
			argvOut := filepath.Join(t.TempDir(), "argv")
			a := mustCommandAgent(t, Spec{Kind: KindCursor, Command: fakeAgent(t, "argv.sh"), Env: map[string]string{"ARGV_OUT": argvOut}})
			_, err := a.Run(context.Background(), cmdCall(h, "coder", ""))
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Fatalf("got %v, want an error containing %q", err, c.wantErr)
			}
			if c.err != nil && (!strings.Contains(err.Error(), want) || !errors.Is(err, c.err)) {
				t.Errorf("%v does not say how to fix it or hides the cause", err)
			}
			if _, serr := os.Stat(argvOut); !os.IsNotExist(serr) {
				t.Errorf("cursor-agent ran without a workspace (stat: %v)", serr)
			}
		})
	}

	// An explicit workspace is used as it is: no extraction.
	h := newCmdHost(t)
	a := mustCommandAgent(t, Spec{Kind: KindCursor, Command: fakeAgent(t, "argv.sh"), Workspace: t.TempDir(), Env: map[string]string{"ARGV_OUT": filepath.Join(t.TempDir(), "argv")}})
	if _, err := a.Run(context.Background(), cmdCall(h, "coder", `{"type":"object","required":["ok"]}`)); err != nil {
		t.Fatal(err)
	}
	if got := h.extractCalls(); len(got) != 0 {
		t.Errorf("extract was called with an explicit workspace: %q", got)
	}
}

func TestHermesPresetArgv(t *testing.T) {
	t.Parallel()
	h := newCmdHost(t)
	argvOut := filepath.Join(t.TempDir(), "argv")
	a := mustCommandAgent(t, Spec{Kind: KindHermes, Command: fakeAgent(t, "argv.sh"), Env: map[string]string{"ARGV_OUT": argvOut}})
	call := cmdCall(h, "tester", "")
	if _, err := a.Run(context.Background(), call); err != nil {
		t.Fatal(err)
	}
	full := "You are the tester.\n\n" + ThreadInput(call.Thread)
	checkArgvFile(t, argvOut, []string{"chat", "-q", full, "--yolo", "--max-turns", "90", "--quiet"}, "")

	h.env["WORKFLOW_HERMES_MODEL"] = "hermes-3"
	if _, err := a.Run(context.Background(), call); err != nil {
		t.Fatal(err)
	}
	checkArgvFile(t, argvOut, []string{"chat", "-q", full, "--yolo", "--max-turns", "90", "--quiet", "--model", "hermes-3"}, "")
}

func TestHermesDefaultCommandOnPath(t *testing.T) {
	// Serial: sets PATH (t.Setenv).
	h := newCmdHost(t)
	bin := t.TempDir()
	argvOut := filepath.Join(t.TempDir(), "argv")
	if err := os.Symlink(fakeAgent(t, "argv.sh"), filepath.Join(bin, "hermes")); err != nil {
		t.Fatal(err)
	}
	a := mustCommandAgent(t, Spec{Kind: KindHermes, Env: map[string]string{"ARGV_OUT": argvOut}})
	t.Setenv("PATH", bin)
	if _, err := a.Run(context.Background(), cmdCall(h, "tester", "")); err != nil {
		t.Fatal(err)
	}
	if got := readArgvFile(t, argvOut); len(got) < 1 || got[0] != "chat" {
		t.Errorf("argv = %q", got)
	}
	t.Setenv("PATH", t.TempDir())
	_, err := a.Run(context.Background(), cmdCall(h, "tester", ""))
	if err == nil || !strings.Contains(err.Error(), "not found on PATH") {
		t.Errorf("missing hermes: got %v", err)
	}
}

func TestCommandAgentValidation(t *testing.T) {
	t.Parallel()
	bad := map[string]struct {
		spec Spec
		want string
	}{
		"relative command":   {Spec{Kind: KindCLI, Command: "./agent.sh"}, "absolute path"},
		"relative dir":       {Spec{Kind: KindCursor, Command: "bin/cursor-agent"}, "absolute path"},
		"relative workspace": {Spec{Kind: KindCursor, Workspace: "proj"}, "workspace must be an absolute path"},
		"bad env name":       {Spec{Kind: KindExec, Command: "/bin/true", Env: map[string]string{"A=B": "x"}}, "not a valid variable name"},
	}
	for name, c := range bad {
		if _, err := New(c.spec); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error containing %q", name, err, c.want)
		}
	}

	h := newCmdHost(t)
	plain := filepath.Join(t.TempDir(), "plain")
	if err := os.WriteFile(plain, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	runBad := map[string]struct {
		spec Spec
		want string
	}{
		"missing workspace": {Spec{Kind: KindCLI, Command: "/bin/true", Workspace: filepath.Join(t.TempDir(), "gone")}, "not an existing directory"},
		"missing program":   {Spec{Kind: KindExec, Command: filepath.Join(t.TempDir(), "nope")}, "no such file"},
		"not executable":    {Spec{Kind: KindExec, Command: plain}, "not an executable file"},
		"not on PATH":       {Spec{Kind: KindCLI, Command: "no-such-agent-binary-xyz"}, "not found on PATH"},
	}
	for name, c := range runBad {
		a := mustCommandAgent(t, c.spec)
		if _, err := a.Run(context.Background(), cmdCall(h, "coder", "")); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error containing %q", name, err, c.want)
		}
	}
}

func TestCommandAgentNonZeroExit(t *testing.T) {
	t.Parallel()
	h := newCmdHost(t)
	a := mustCommandAgent(t, Spec{Kind: KindCLI, Command: fakeAgent(t, "fail.sh")})
	_, err := a.Run(context.Background(), cmdCall(h, "coder", ""))
	var ce *CommandError
	if !errors.As(err, &ce) || ce.Kind != ErrKindNonZeroExit || ce.ExitCode != 3 {
		t.Fatalf("got %v, want a non_zero_exit error with code 3", err)
	}
	if !strings.Contains(err.Error(), "exit code 3") || !strings.Contains(err.Error(), "boom: the model is unavailable") {
		t.Errorf("message %q lacks the exit code or stderr", err)
	}
	if got := h.logged("agent.err"); len(got) != 1 || got[0] != "boom: the model is unavailable" {
		t.Errorf("stderr log = %q", got)
	}
	if got := h.logged("agent.out"); len(got) != 1 || got[0] != "partial work" {
		t.Errorf("stdout log = %q", got)
	}
}

func TestCommandAgentTimeout(t *testing.T) {
	t.Parallel()
	h := newCmdHost(t)
	a := mustCommandAgent(t, Spec{Kind: KindExec, Command: fakeAgent(t, "sleep.sh"), TimeoutMs: 50})
	_, err := a.Run(context.Background(), cmdCall(h, "coder", ""))
	var ce *CommandError
	if !errors.As(err, &ce) || ce.Kind != ErrKindTimeout {
		t.Fatalf("got %v, want a timeout error", err)
	}
	if !strings.Contains(err.Error(), "timed out after 50 ms") {
		t.Errorf("message %q", err)
	}
}

func TestCommandAgentSpawnFailed(t *testing.T) {
	t.Parallel()
	h := newCmdHost(t)
	dir := t.TempDir()
	bogus := filepath.Join(dir, "bogus")
	// Executable bits but no valid format and no #! line: exec fails.
	if err := os.WriteFile(bogus, []byte{0x7f, 'E', 'L', 'F', 0, 0}, 0o755); err != nil {
		t.Fatal(err)
	}
	a := mustCommandAgent(t, Spec{Kind: KindExec, Command: bogus})
	_, err := a.Run(context.Background(), cmdCall(h, "coder", ""))
	var ce *CommandError
	if !errors.As(err, &ce) || ce.Kind != ErrKindSpawnFailed {
		t.Fatalf("got %v, want spawn_failed", err)
	}
}

func TestAPromptTooLongForTheCommandLineSaysSo(t *testing.T) {
	t.Parallel()
	h := newCmdHost(t)
	a := mustCommandAgent(t, Spec{Kind: KindCLI, Command: fakeAgent(t, "print.sh"), Args: []string{"{prompt}"}})
	call := cmdCall(h, "coder", "")
	call.Thread.Start.Content = strings.Repeat("x", 200<<10)
	_, err := a.Run(context.Background(), call)
	var ce *CommandError
	if !errors.As(err, &ce) || ce.Kind != ErrKindSpawnFailed || !errors.Is(err, syscall.E2BIG) ||
		!strings.Contains(err.Error(), "at most 128 KiB per argument") || !strings.Contains(err.Error(), "reads the prompt on stdin") {
		t.Fatalf("got %v, want spawn_failed explaining the argument limit", err)
	}
}

func TestCommandAgentCancelKillsGroup(t *testing.T) {
	// Serial: shortens the package-level killGrace.
	// The script ignores SIGTERM; a short grace keeps the test quick
	// without changing what it checks.
	defer func(g time.Duration) { killGrace = g }(killGrace)
	killGrace = 100 * time.Millisecond
	h := newCmdHost(t)
	pidFile := filepath.Join(t.TempDir(), "pid")
	a := mustCommandAgent(t, Spec{Kind: KindCLI, Command: fakeAgent(t, "grandchild.sh"), Env: map[string]string{"PIDFILE": pidFile}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		_, err := a.Run(ctx, cmdCall(h, "coder", ""))
		errc <- err
	}()
	var pid int
	testkit.WaitUntil(t, "the grandchild's pid", func() bool {
		b, err := os.ReadFile(pidFile)
		if err != nil {
			return false
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil
	})
	cancel()
	err := <-errc
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
	testkit.WaitUntil(t, "the grandchild to die", func() bool { return testkit.ProcessGone(pid) })
}

func TestCommandAgentStreamsLinesWhileRunning(t *testing.T) {
	t.Parallel()
	h := newCmdHost(t)
	release := filepath.Join(t.TempDir(), "release")
	a := mustCommandAgent(t, Spec{Kind: KindCLI, Command: fakeAgent(t, "lines.sh"), Env: map[string]string{"RELEASE": release}})
	type result struct {
		res Result
		err error
	}
	done := make(chan result, 1)
	go func() {
		r, err := a.Run(context.Background(), cmdCall(h, "coder", `{"type":"object","required":["lines"]}`))
		done <- result{r, err}
	}()
	testkit.WaitUntil(t, "500 lines in the log", func() bool {
		return len(h.logged("agent.out")) == 500 && len(h.logged("agent.err")) == 1
	})
	select {
	case r := <-done:
		t.Fatalf("the agent finished before it was released: %v", r.err)
	default:
	}
	if got := h.logged("agent.out"); got[0] != "line 0" || got[499] != "line 499" {
		t.Errorf("lines = %q ... %q", got[0], got[499])
	}
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	if got := cmdMetaJSON(t, r.res.Meta); got != `{"lines":500}` {
		t.Errorf("meta = %s", got)
	}
}

func TestLineLogBounds(t *testing.T) {
	t.Parallel()
	var lines []string
	l := &lineLog{tag: "t", log: func(_, c string) { lines = append(lines, c) }, keep: 10}
	_, _ = l.Write([]byte("abc\r\ndef\n0123456789xyz"))
	l.flush()
	if l.kept.String() != "abc\r\ndef\n0" || !l.truncated {
		t.Errorf("kept %q truncated=%v", l.kept.String(), l.truncated)
	}
	if strings.Join(lines, "|") != "abc|def|0123456789xyz" {
		t.Errorf("lines = %q", lines)
	}
	lines = nil
	long := &lineLog{tag: "t", log: func(_, c string) { lines = append(lines, c) }, tail: 4}
	_, _ = long.Write(bytes.Repeat([]byte("x"), maxLogLine+10))
	long.flush()
	if len(lines) != 2 || len(lines[0]) != maxLogLine || lines[1] != strings.Repeat("x", 10) {
		t.Errorf("long line split into %d parts", len(lines))
	}
	if long.tailText() != "…xxxx" {
		t.Errorf("tail = %q", long.tailText())
	}
}

func TestLineLogStopsLoggingFloods(t *testing.T) {
	t.Parallel()
	var lines []string
	l := &lineLog{tag: "t", log: func(_, c string) { lines = append(lines, c) }, keep: 8, logCap: 100}
	chunk := bytes.Repeat([]byte("y\n"), 25)
	for i := 0; i < 5; i++ {
		_, _ = l.Write(chunk)
	}
	l.flush()
	if len(lines) != 50+1 || !strings.Contains(lines[len(lines)-1], "the rest is not logged") {
		t.Errorf("%d lines, last %q", len(lines), lines[len(lines)-1])
	}
}
