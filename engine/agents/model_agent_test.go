package agents

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/uncaged/workflow/engine/canonyaml"
	"github.com/uncaged/workflow/engine/cas"
	"github.com/uncaged/workflow/engine/registry"
	"github.com/uncaged/workflow/engine/workflow"
)

// reply is one scripted answer of the fake model server.
type reply struct {
	status int
	body   string   // a plain JSON response
	events []string // else a server-sent event stream of these data lines
	block  bool     // else wait for the request to be cancelled
}

// modelRequest is what the fake server was asked.
type modelRequest struct {
	Model    string `json:"model"`
	Messages []struct {
		Role       string  `json:"role"`
		Content    *string `json:"content"`
		ToolCallID string  `json:"tool_call_id"`
	} `json:"messages"`
	Tools []struct {
		Function struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Parameters  json.RawMessage `json:"parameters"`
		} `json:"function"`
	} `json:"tools"`
}

func (r modelRequest) toolNames() []string {
	var out []string
	for _, t := range r.Tools {
		out = append(out, t.Function.Name)
	}
	return out
}

// toolResults are the tool messages of the request, by call id.
func (r modelRequest) toolResults() map[string]string {
	out := map[string]string{}
	for _, m := range r.Messages {
		if m.Role == "tool" && m.Content != nil {
			out[m.ToolCallID] = *m.Content
		}
	}
	return out
}

// fakeModel is an in-process OpenAI-compatible server replaying replies.
type fakeModel struct {
	srv     *httptest.Server
	mu      sync.Mutex
	replies []reply
	seen    []modelRequest
	arrived chan struct{} // one value per request, when someone listens
}

func newFakeModel(t *testing.T, replies ...reply) *fakeModel {
	f := &fakeModel{replies: replies, arrived: make(chan struct{}, 64)}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		var req modelRequest
		_ = json.Unmarshal(raw, &req)
		f.mu.Lock()
		f.seen = append(f.seen, req)
		select {
		case f.arrived <- struct{}{}:
		default:
		}
		if len(f.replies) == 0 {
			f.mu.Unlock()
			http.Error(w, "script exhausted", http.StatusTeapot)
			return
		}
		rep := f.replies[0]
		f.replies = f.replies[1:]
		f.mu.Unlock()
		switch {
		case rep.block:
			<-r.Context().Done()
		case rep.events != nil:
			w.Header().Set("Content-Type", "text/event-stream")
			for _, ev := range rep.events {
				// A write that fails shows on the client's side, which
				// is what the test checks.
				_, _ = io.WriteString(w, "data: "+ev+"\n\n")
				w.(http.Flusher).Flush()
			}
		default:
			if rep.status != 0 {
				w.WriteHeader(rep.status)
			}
			_, _ = io.WriteString(w, rep.body) // a failure shows on the client's side
		}
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeModel) requests() []modelRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]modelRequest(nil), f.seen...)
}

// calls streams one reply with the given tool calls as (id, name, args).
func calls(cs ...[3]string) reply {
	var ev []string
	for i, c := range cs {
		// Split the arguments over two chunks, as real servers do.
		half := len(c[2]) / 2
		first, _ := json.Marshal(map[string]any{"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"tool_calls": []any{
			map[string]any{"index": i, "id": c[0], "type": "function", "function": map[string]any{"name": c[1], "arguments": c[2][:half]}}}}}}})
		rest, _ := json.Marshal(map[string]any{"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"tool_calls": []any{
			map[string]any{"index": i, "function": map[string]any{"arguments": c[2][half:]}}}}}}})
		ev = append(ev, string(first), string(rest))
	}
	return reply{events: append(ev, `{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`, "[DONE]")}
}

// text streams a plain text reply.
func text(s string) reply {
	b, _ := json.Marshal(map[string]any{"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"content": s}, "finish_reason": "stop"}}})
	return reply{events: []string{string(b), "[DONE]"}}
}

// fakeHost is the engine side of a role: it resolves every model reference
// to the fake server and collects the debug log.
type fakeHost struct {
	store    *cas.Store
	model    registry.Model
	modelErr error
	mu       sync.Mutex
	refs     []string
	log      []string
}

func newHost(t *testing.T, f *fakeModel) *fakeHost {
	return &fakeHost{store: cas.Open(t.TempDir()), model: registry.Model{BaseURL: f.srv.URL, APIKey: "sk-agent-test", Model: "fake-model"}}
}

func (h *fakeHost) CAS() *cas.Store { return h.store }
func (h *fakeHost) Log(tag, content string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.log = append(h.log, tag+": "+content)
}
func (h *fakeHost) RunChild(context.Context, string, string) (workflow.ChildResult, error) {
	return workflow.ChildResult{}, errors.New("no children here")
}
func (h *fakeHost) Getenv(string) string { return "" }
func (h *fakeHost) Extract(context.Context, []byte, string) (workflow.ExtractResult, error) {
	return workflow.ExtractResult{}, errors.New("no extract here")
}
func (h *fakeHost) ResolveModel(ref string) (registry.Model, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.refs = append(h.refs, ref)
	return h.model, h.modelErr
}
func (h *fakeHost) logText() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return strings.Join(h.log, "\n")
}

func testThread() workflow.ThreadContext {
	return workflow.ThreadContext{
		ThreadID: "01TESTTHREAD",
		Start:    workflow.StartStep{Role: "__start__", Content: "Fix the bug in a.txt"},
		Steps:    []workflow.RoleStep{{Role: "planner", ContentHash: "HASHAAAAAAAAA", Meta: canonyaml.Map{{Key: "plan", Value: "patch it"}}}},
	}
}

func newAgent(t *testing.T, spec Spec) Agent {
	t.Helper()
	a, err := New(spec)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

const verdictSchema = `{"type":"object","properties":{"verdict":{"type":"string","enum":["ok","bad"]},"score":{"type":"number"}},"required":["verdict"],"additionalProperties":false}`

func TestLLMAgentReturnsTheValidatedResult(t *testing.T) {
	t.Parallel()
	// Keys come back in the order the model wrote them, not the schema's.
	f := newFakeModel(t, calls([3]string{"c1", "resolve", `{"score":0.5, "verdict":"ok"}`}))
	h := newHost(t, f)
	call := Call{Role: "reviewer", SystemPrompt: "You review code.", Schema: json.RawMessage(verdictSchema), Thread: testThread(), Host: h}
	res, err := newAgent(t, Spec{Kind: KindLLM}).Run(context.Background(), call)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(res.Meta)
	if string(got) != `{"score":0.5,"verdict":"ok"}` {
		t.Fatalf("meta %s", got)
	}
	if len(h.refs) != 1 || h.refs[0] != "default" {
		t.Fatalf("model refs %v", h.refs)
	}
	reqs := f.requests()
	if len(reqs) != 1 || reqs[0].Model != "fake-model" {
		t.Fatalf("requests %+v", reqs)
	}
	r := reqs[0]
	if names := r.toolNames(); len(names) != 1 || names[0] != "resolve" || r.Tools[0].Function.Description != OutputToolDescription {
		t.Fatalf("tools %+v", r.Tools)
	}
	sys, user := *r.Messages[0].Content, *r.Messages[1].Content
	if !strings.HasPrefix(sys, "You review code.\n\n") || !strings.Contains(sys, "call the resolve tool") {
		t.Fatalf("system prompt %q", sys)
	}
	if user != ThreadInput(call.Thread) {
		t.Fatalf("user message %q", user)
	}
	if log := h.logText(); !strings.Contains(log, `model: tool resolve {"score":0.5, "verdict":"ok"}`) || strings.Contains(log, "sk-agent-test") {
		t.Fatalf("log:\n%s", log)
	}
}

func TestLLMAgentRecoversFromBadOutput(t *testing.T) {
	t.Parallel()
	schema := `{"title":"review","description":"The verdict.","type":"object","properties":{"verdict":{"type":"string","enum":["ok","bad"]}},"required":["verdict"]}`
	f := newFakeModel(t,
		text("I think it is fine."),
		calls([3]string{"c1", "review", `{"verdict":"maybe"}`}),
		calls([3]string{"c2", "review", `{"verdict":`}),
		reply{body: `{"choices":[{"message":{"role":"assistant","content":"{\"verdict\":\"bad\"}"}}]}`},
	)
	h := newHost(t, f)
	res, err := newAgent(t, Spec{Kind: KindLLM, Model: "fast", MaxRounds: 4}).Run(context.Background(),
		Call{Role: "r", Schema: json.RawMessage(schema), Thread: testThread(), Host: h})
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := res.Meta.Get("verdict"); v != "bad" || h.refs[0] != "fast" {
		t.Fatalf("meta %v, refs %v", res.Meta, h.refs)
	}
	reqs := f.requests()
	if names := reqs[0].toolNames(); len(names) != 1 || names[0] != "review" || reqs[0].Tools[0].Function.Description != "The verdict." {
		t.Fatalf("output tool %+v", reqs[0].Tools)
	}
	last := reqs[1].Messages[len(reqs[1].Messages)-1]
	if !strings.Contains(*last.Content, "was not valid JSON") {
		t.Fatalf("no correction after prose: %q", *last.Content)
	}
	if r := reqs[2].toolResults()["c1"]; !strings.HasPrefix(r, "Schema validation failed:") {
		t.Fatalf("schema failure not reported: %q", r)
	}
	if r := reqs[3].toolResults()["c2"]; !strings.HasPrefix(r, "Tool arguments were not valid JSON") {
		t.Fatalf("bad JSON not reported: %q", r)
	}
}

func TestLLMAgentFailures(t *testing.T) {
	t.Parallel()
	// The model never produces a result within MaxRounds.
	f := newFakeModel(t, text("no"), text("still no"))
	h := newHost(t, f)
	_, err := newAgent(t, Spec{Kind: KindLLM, MaxRounds: 2}).Run(context.Background(), Call{Thread: testThread(), Host: h})
	if err == nil || err.Error() != "llm agent: max_react_rounds_exceeded" {
		t.Fatalf("err = %v", err)
	}

	// Server errors exhaust the client's retries.
	f = newFakeModel(t, reply{status: 500, body: "boom"}, reply{status: 502, body: "boom"}, reply{status: 503, body: "down"})
	_, err = newAgent(t, Spec{Kind: KindLLM}).Run(context.Background(), Call{Thread: testThread(), Host: newHost(t, f)})
	if err == nil || !strings.HasPrefix(err.Error(), "llm agent: http_error:503:down") || len(f.requests()) != 3 {
		t.Fatalf("err = %v after %d requests", err, len(f.requests()))
	}

	// The model cannot be resolved.
	h = newHost(t, f)
	h.modelErr = errors.New(`no model mapping for scene "default"`)
	_, err = newAgent(t, Spec{Kind: KindLLM}).Run(context.Background(), Call{Thread: testThread(), Host: h})
	if err == nil || err.Error() != `llm agent: no model mapping for scene "default"` {
		t.Fatalf("err = %v", err)
	}

	// A result that is not an object.
	f = newFakeModel(t, text(`[1,2]`))
	_, err = newAgent(t, Spec{Kind: KindLLM}).Run(context.Background(), Call{Schema: json.RawMessage(`{"type":"array"}`), Thread: testThread(), Host: newHost(t, f)})
	if err == nil || !strings.Contains(err.Error(), "not a JSON object") {
		t.Fatalf("err = %v", err)
	}

	// A schema that is not an object.
	_, err = newAgent(t, Spec{Kind: KindLLM}).Run(context.Background(), Call{Schema: json.RawMessage(`true`), Thread: testThread(), Host: newHost(t, f)})
	if err == nil || !strings.Contains(err.Error(), "schema must be a JSON object") {
		t.Fatalf("err = %v", err)
	}
}

func TestModelAgentTimeoutAndCancel(t *testing.T) {
	t.Parallel()
	f := newFakeModel(t, reply{block: true})
	_, err := newAgent(t, Spec{Kind: KindLLM, TimeoutMs: 50}).Run(context.Background(), Call{Thread: testThread(), Host: newHost(t, f)})
	if err == nil || !strings.Contains(err.Error(), "timed out after 50 ms") || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v", err)
	}

	f = newFakeModel(t, reply{block: true})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := newAgent(t, Spec{Kind: KindLLM}).Run(ctx, Call{Thread: testThread(), Host: newHost(t, f)})
		done <- err
	}()
	select {
	case <-f.arrived:
	case err := <-done:
		t.Fatalf("returned before the request: %v", err)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
}

func TestReactSpecChecks(t *testing.T) {
	t.Parallel()
	if _, err := New(Spec{Kind: KindReact}); err == nil || !strings.Contains(err.Error(), "needs a workspace") {
		t.Fatalf("err = %v", err)
	}
	if _, err := New(Spec{Kind: KindReact, Workspace: "/tmp", Tools: []string{"read_file", "delete_everything"}}); err == nil ||
		!strings.Contains(err.Error(), `unknown tool "delete_everything"`) {
		t.Fatalf("err = %v", err)
	}
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	f := newFakeModel(t)
	for ws, want := range map[string]string{file: "is not a directory", file + "-missing": "does not exist"} {
		_, err := newAgent(t, Spec{Kind: KindReact, Workspace: ws}).Run(context.Background(), Call{Thread: testThread(), Host: newHost(t, f)})
		if err == nil || !strings.HasPrefix(err.Error(), "react agent: workspace") || !strings.Contains(err.Error(), want) {
			t.Errorf("workspace %s: err = %v", ws, err)
		}
	}
	if len(f.requests()) != 0 {
		t.Fatal("a model was called without a workspace")
	}
}

func TestReactAgentEditsItsWorkspace(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	ws := filepath.Join(base, "ws")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "a.txt"), []byte("hello world\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(base, "secret"), []byte("outside"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/", filepath.Join(ws, "rootlink")); err != nil {
		t.Fatal(err)
	}

	f := newFakeModel(t,
		calls([3]string{"r1", "read_file", `{"path":"a.txt"}`}, [3]string{"w1", "write_file", `{"path":"src/new.go","content":"package x\n"}`}),
		calls([3]string{"p1", "patch_file", `{"path":"a.txt","old_string":"world","new_string":"there"}`},
			[3]string{"s1", "shell_exec", `{"command":"cat a.txt src/new.go && pwd"}`}),
		calls([3]string{"e1", "read_file", `{"path":"../secret"}`}, [3]string{"e2", "read_file", `{"path":"/etc/passwd"}`},
			[3]string{"e3", "write_file", `{"path":"rootlink/tmp/escaped","content":"x"}`}, [3]string{"e4", "nuke", `{}`}),
		calls([3]string{"done", "resolve", `{"filesChanged":["a.txt","src/new.go"]}`}),
	)
	h := newHost(t, f)
	res, err := newAgent(t, Spec{Kind: KindReact, Workspace: ws}).Run(context.Background(), Call{Role: "coder", SystemPrompt: "You write code.", Thread: testThread(), Host: h})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := json.Marshal(res.Meta); string(got) != `{"filesChanged":["a.txt","src/new.go"]}` {
		t.Fatalf("meta %s", got)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "a.txt")); string(b) != "hello there\n" {
		t.Fatalf("a.txt = %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "src", "new.go")); string(b) != "package x\n" {
		t.Fatalf("new.go = %q", b)
	}
	if _, err := os.Stat("/tmp/escaped"); err == nil {
		t.Fatal("a file was written through the symlink to /")
	}

	reqs := f.requests()
	if names := strings.Join(reqs[0].toolNames(), ","); names != "read_file,write_file,patch_file,shell_exec,resolve" {
		t.Fatalf("tools offered: %s", names)
	}
	if sys := *reqs[0].Messages[0].Content; !strings.HasPrefix(sys, "You write code.\n\nYou work in the directory "+ws) {
		t.Fatalf("system prompt %q", sys)
	}
	results := reqs[3].toolResults()
	want := map[string]string{
		"r1": "1|hello world",
		"w1": "Successfully wrote 10 bytes to src/new.go",
		"p1": "Successfully patched a.txt",
		"s1": "hello there\npackage x\n" + ws + "\n",
		"e1": "Error: path ../secret is outside the workspace " + ws,
		"e2": "Error: path /etc/passwd is outside the workspace " + ws,
		"e3": "Error: path rootlink/tmp/escaped is outside the workspace " + ws,
		"e4": "Unknown tool: nuke. Use one of the declared tools only.",
	}
	for id, w := range want {
		if results[id] != w {
			t.Errorf("tool result %s = %q, want %q", id, results[id], w)
		}
	}
	if log := h.logText(); !strings.Contains(log, `model: tool shell_exec {"command":"cat a.txt src/new.go && pwd"}`) {
		t.Fatalf("log:\n%s", log)
	}
}

func TestReactAgentToolSubset(t *testing.T) {
	t.Parallel()
	f := newFakeModel(t, calls([3]string{"s1", "shell_exec", `{"command":"touch x"}`}), text(`{}`))
	ws := t.TempDir()
	_, err := newAgent(t, Spec{Kind: KindReact, Workspace: ws, Tools: []string{"read_file"}, MaxRounds: 2}).Run(context.Background(),
		Call{Thread: testThread(), Host: newHost(t, f)})
	if err != nil {
		t.Fatal(err)
	}
	reqs := f.requests()
	if names := strings.Join(reqs[0].toolNames(), ","); names != "read_file,resolve" {
		t.Fatalf("tools offered: %s", names)
	}
	if r := reqs[1].toolResults()["s1"]; !strings.HasPrefix(r, "Unknown tool: shell_exec") {
		t.Fatalf("an unoffered tool ran: %q", r)
	}
	if _, err := os.Stat(filepath.Join(ws, "x")); err == nil {
		t.Fatal("shell_exec ran although not offered")
	}
}
