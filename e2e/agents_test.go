package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/uncaged/workflow/shared/testkit"
)

const planCodeReviewDir = "../examples/plan-code-review"

// fakeAPIKey is what `setup` stores; it must reach the model endpoint and
// nothing else the engine writes.
const fakeAPIKey = "sk-test"

// The greeting file the scripted coder writes, patches and extends.
const (
	greetingFile  = "greeting.txt"
	firstGreeting = "Hello, world!\n"
	finalGreeting = "Hello, world!\nGoodbye, world!\n"
)

// chatRequest is the part of an OpenAI chat-completions request the fake
// model reads.
type chatRequest struct {
	Model    string        `json:"model"`
	Messages []chatMessage `json:"messages"`
	Tools    []struct {
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	} `json:"tools"`
	Stream        bool `json:"stream"`
	StreamOptions struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

type chatMessage struct {
	Role       string  `json:"role"`
	Content    *string `json:"content"`
	ToolCallID string  `json:"tool_call_id"`
}

func (m chatMessage) text() string {
	if m.Content == nil {
		return ""
	}
	return *m.Content
}

// modelTurn is one scripted answer: streamed text, then at most one tool
// call (name and JSON arguments).
type modelTurn struct {
	text     string
	toolName string
	toolArgs string
}

// modelCall is what the fake saw of one request.
type modelCall struct {
	role, model, auth string
	// lastTool is the content of the request's last message when it is a
	// tool result: what the previous tool call returned.
	lastTool string
}

// fakeModel is an in-process OpenAI-compatible chat-completions endpoint
// that plays planner, coder and reviewer. It tells the roles apart by how
// their system prompts begin and derives each answer from the conversation
// it is sent, so one server serves any number of threads. A stalling fake
// answers nothing: it waits until the request is cancelled.
type fakeModel struct {
	srv   *httptest.Server
	stall bool
	quit  chan struct{}

	mu    sync.Mutex
	calls []modelCall
	// started is closed when the first request arrives, cancelled when a
	// stalled request's context ends.
	started, cancelled         chan struct{}
	startedOnce, cancelledOnce sync.Once
	// reportUsage makes every answer report fakePromptTokens and
	// fakeCompletionTokens, streamed ones only when asked to
	// (stream_options.include_usage), as OpenAI does. Set it before the
	// first request.
	reportUsage bool
}

func newFakeModel(t *testing.T, stall bool) *fakeModel {
	t.Helper()
	f := &fakeModel{stall: stall, quit: make(chan struct{}), started: make(chan struct{}), cancelled: make(chan struct{})}
	f.srv = httptest.NewServer(http.HandlerFunc(f.handle))
	t.Cleanup(f.srv.Close)
	t.Cleanup(func() { close(f.quit) }) // runs first: releases stalled handlers
	return f
}

// baseURL is what `setup --base-url` gets.
func (f *fakeModel) baseURL() string { return f.srv.URL + "/v1" }

func (f *fakeModel) seen() []modelCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]modelCall(nil), f.calls...)
}

func (f *fakeModel) handle(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
		http.Error(w, "fake model: no route "+r.Method+" "+r.URL.Path, http.StatusNotFound)
		return
	}
	raw, err := io.ReadAll(r.Body)
	var req chatRequest
	if err == nil {
		err = json.Unmarshal(raw, &req)
	}
	if err != nil || len(req.Messages) < 2 || len(req.Tools) == 0 {
		http.Error(w, fmt.Sprintf("fake model: want system and user messages and tools, got %s (%v)", raw, err), http.StatusBadRequest)
		return
	}
	call := modelCall{role: roleOf(req.Messages[0].text()), model: req.Model, auth: r.Header.Get("Authorization")}
	if last := req.Messages[len(req.Messages)-1]; last.Role == "tool" {
		call.lastTool = last.text()
	}
	f.mu.Lock()
	f.calls = append(f.calls, call)
	f.mu.Unlock()
	f.startedOnce.Do(func() { close(f.started) })
	if f.stall {
		select {
		case <-r.Context().Done():
			f.cancelledOnce.Do(func() { close(f.cancelled) })
		case <-f.quit:
		}
		return
	}
	if call.auth != "Bearer "+fakeAPIKey {
		http.Error(w, `{"error":{"message":"fake model: bad API key"}}`, http.StatusUnauthorized)
		return
	}
	turn, err := scriptedTurn(call.role, req)
	if err != nil {
		http.Error(w, "fake model: "+err.Error(), http.StatusBadRequest)
		return
	}
	var usage *[2]int // prompt and completion tokens to report
	if f.reportUsage && (!req.Stream || req.StreamOptions.IncludeUsage) {
		usage = &[2]int{fakePromptTokens, fakeCompletionTokens}
	}
	if req.Stream {
		streamTurn(w, turn, usage)
		return
	}
	jsonTurn(w, turn, usage)
}

// roleOf names the role whose system prompt this is (the example's prompts
// all begin "You are the <role> of ...").
func roleOf(system string) string {
	for _, role := range []string{"planner", "coder", "reviewer"} {
		if strings.HasPrefix(system, "You are the "+role+" ") {
			return role
		}
	}
	return "unknown"
}

func argsJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// scriptedTurn is the fake's answer. The output tool is the last one the
// request declares (the agent appends it after the workspace tools).
func scriptedTurn(role string, req chatRequest) (modelTurn, error) {
	user := req.Messages[1].text()
	output := req.Tools[len(req.Tools)-1].Function.Name
	switch role {
	case "planner":
		if strings.Contains(user, "impossible") {
			return modelTurn{text: "This cannot be planned.\n", toolName: output,
				toolArgs: argsJSON(map[string]any{"status": "aborted", "reason": "The task asks for something impossible."})}, nil
		}
		return modelTurn{
			text:     "Planning the greeting.\nOne phase is enough.\n",
			toolName: output,
			toolArgs: argsJSON(map[string]any{"status": "planned", "phases": []any{
				map[string]string{"title": "Write the greeting", "detail": "Create " + greetingFile + " with a greeting and check it with cat."},
			}}),
		}, nil
	case "coder":
		script := []modelTurn{
			{"I will write the file first.\n", "write_file", argsJSON(map[string]string{"path": greetingFile, "content": "Hello, TODO!\n"})},
			{"Now fill in the name.\n", "patch_file", argsJSON(map[string]string{"path": greetingFile, "old_string": "TODO", "new_string": "world"})},
			{"Checking the result.\n", "shell_exec", argsJSON(map[string]string{"command": "cat " + greetingFile})},
			{"Done.\n", output, argsJSON(map[string]any{"filesChanged": []string{greetingFile}, "summary": "Wrote the greeting and checked it with cat."})},
		}
		if strings.Contains(user, "## Latest Step: reviewer") {
			script = []modelTurn{
				{"Adding the farewell the review asks for.\n", "patch_file", argsJSON(map[string]string{"path": greetingFile, "old_string": firstGreeting, "new_string": finalGreeting})},
				{"Checking the result.\n", "shell_exec", argsJSON(map[string]string{"command": "cat " + greetingFile})},
				{"Done.\n", output, argsJSON(map[string]any{"filesChanged": []string{greetingFile}, "summary": "Added the farewell line and checked it with cat."})},
			}
		}
		done := 0
		for _, m := range req.Messages {
			if m.Role == "tool" {
				done++
			}
		}
		if done >= len(script) {
			return modelTurn{}, fmt.Errorf("coder script exhausted after %d tool results", done)
		}
		return script[done], nil
	case "reviewer":
		// The first review sends the work back; once an earlier review is
		// among the previous steps, the next one approves. A "hopeless"
		// task is abandoned at the third review, as the prompt asks; one
		// "never good enough" is rejected forever, as a model ignoring the
		// prompt might. The answer is plain JSON text, not a tool call.
		earlier := strings.Count(user, ": reviewer\nSummary:")
		rejected := `{"status":"rejected","issues":["` + greetingFile + ` has no farewell line."]}`
		switch {
		case strings.Contains(user, "never good enough"):
			return modelTurn{text: rejected}, nil
		case strings.Contains(user, "hopeless"):
			if earlier >= 2 {
				return modelTurn{text: `{"status":"abandoned","issues":["Still no farewell line after three attempts."]}`}, nil
			}
			return modelTurn{text: rejected}, nil
		case earlier >= 1:
			return modelTurn{text: `{"status":"approved","issues":[]}`}, nil
		}
		return modelTurn{text: rejected}, nil
	}
	return modelTurn{}, fmt.Errorf("no script for the system prompt of role %q", role)
}

// writeStream sends turn as server-sent events, the text and the tool
// call's arguments each split over two chunks.
func writeStream(w http.ResponseWriter, turn modelTurn) { streamTurn(w, turn, nil) }

// streamTurn is writeStream with usage (when not nil) in a last chunk of
// its own.
func streamTurn(w http.ResponseWriter, turn modelTurn, usage *[2]int) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	fl, _ := w.(http.Flusher)
	send := func(v any) {
		fmt.Fprintf(w, "data: %s\n\n", argsJSON(v))
		if fl != nil {
			fl.Flush()
		}
	}
	delta := func(d map[string]any) map[string]any {
		return map[string]any{"choices": []any{map[string]any{"index": 0, "delta": d, "finish_reason": nil}}}
	}
	half := len(turn.text) / 2
	for _, piece := range []string{turn.text[:half], turn.text[half:]} {
		if piece != "" {
			send(delta(map[string]any{"role": "assistant", "content": piece}))
		}
	}
	finish := "stop"
	if turn.toolName != "" {
		finish = "tool_calls"
		cut := len(turn.toolArgs) / 2
		send(delta(map[string]any{"tool_calls": []any{map[string]any{"index": 0, "id": "call_1", "type": "function",
			"function": map[string]any{"name": turn.toolName, "arguments": turn.toolArgs[:cut]}}}}))
		send(delta(map[string]any{"tool_calls": []any{map[string]any{"index": 0,
			"function": map[string]any{"arguments": turn.toolArgs[cut:]}}}}))
	}
	send(map[string]any{"choices": []any{map[string]any{"index": 0, "delta": map[string]any{}, "finish_reason": finish}}})
	if usage != nil {
		send(map[string]any{"choices": []any{}, "usage": map[string]int{"prompt_tokens": usage[0], "completion_tokens": usage[1]}})
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
}

// writeJSON sends turn as one plain chat-completions response.
func writeJSON(w http.ResponseWriter, turn modelTurn) { jsonTurn(w, turn, nil) }

// jsonTurn is writeJSON with usage when it is not nil.
func jsonTurn(w http.ResponseWriter, turn modelTurn, usage *[2]int) {
	msg := map[string]any{"role": "assistant", "content": turn.text}
	if turn.toolName != "" {
		msg["tool_calls"] = []any{map[string]any{"id": "call_1", "type": "function",
			"function": map[string]any{"name": turn.toolName, "arguments": turn.toolArgs}}}
	}
	resp := map[string]any{"choices": []any{map[string]any{"index": 0, "message": msg}}}
	if usage != nil {
		resp["usage"] = map[string]int{"prompt_tokens": usage[0], "completion_tokens": usage[1]}
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprint(w, argsJSON(resp))
}

// setupFakeProvider points the storage root's workflow.yaml at the fake.
func setupFakeProvider(t *testing.T, root string, f *fakeModel) {
	t.Helper()
	r := run(t, root, "setup", "--provider", "fake", "--base-url", f.baseURL(), "--api-key", fakeAPIKey, "--default-model", "fake/m1")
	if r.code != 0 {
		t.Fatalf("setup: %+v", r)
	}
}

// checkPlanCodeReviewRun checks a finished plan-code-review thread against
// the fake's script: the step sequence, the file in the workspace, what
// the model was sent, and what the debug log shows.
func checkPlanCodeReviewRun(t *testing.T, root, id, workspace string, f *fakeModel) {
	t.Helper()
	s := finishedApproving(t, root, id)
	if s.Status != "completed" || s.Result.ReturnCode != 0 || roles(s) != "planner,approve,coder,reviewer,coder,reviewer" {
		t.Fatalf("thread = %+v (roles %s)", s, roles(s))
	}
	if !strings.Contains(s.Steps[0].Content, `"status":"planned"`) || s.Steps[1].Content != `{"status":"approved"}` ||
		!strings.Contains(s.Steps[3].Content, `"status":"rejected"`) || s.Steps[5].Content != `{"status":"approved","issues":[]}` {
		t.Errorf("step contents: %+v", s.Steps)
	}
	if got, err := os.ReadFile(filepath.Join(workspace, greetingFile)); err != nil || string(got) != finalGreeting {
		t.Errorf("%s in the workspace = %q, %v; want %q", greetingFile, got, err, finalGreeting)
	}

	var catOutputs []string
	for _, c := range f.seen() {
		if c.model != "m1" || c.auth != "Bearer "+fakeAPIKey {
			t.Errorf("the %s request named model %q with Authorization %q", c.role, c.model, c.auth)
		}
		if c.role == "coder" && strings.HasPrefix(c.lastTool, "Hello") {
			catOutputs = append(catOutputs, c.lastTool)
		}
	}
	// shell_exec ran `cat` in the workspace after each attempt's patch.
	if want := []string{firstGreeting, finalGreeting}; !reflect.DeepEqual(catOutputs, want) {
		t.Errorf("shell_exec results the model saw = %q, want %q", catOutputs, want)
	}

	live := run(t, root, "live", id, "--debug")
	if live.code != 0 {
		t.Fatalf("live --debug: %+v", live)
	}
	for _, want := range []string{
		"Planning the greeting.", "One phase is enough.", // streamed text, line by line
		"tool write_file", "tool patch_file", "tool shell_exec", // tool calls as they stream in
		`tool shell_exec returned "Hello, world!"`, // and what they returned
		"no farewell line",
	} {
		if !strings.Contains(live.stdout, want) {
			t.Errorf("the debug log lacks %q:\n%s", want, live.stdout)
		}
	}
	if strings.Contains(live.stdout, fakeAPIKey) {
		t.Errorf("live --debug shows the API key:\n%s", live.stdout)
	}
}

// finishedApproving is finished for plan-code-review, whose plan a person
// approves: each time the thread waits for that, it is approved from the
// command line, as its user would.
func finishedApproving(t *testing.T, root, id string) shown {
	t.Helper()
	return finishedMeanwhile(t, root, id, func(s shown) {
		if s.Status == "waiting" {
			if r := run(t, root, "thread", "answer", id, "--json", `{"status":"approved"}`); r.code != 0 && !strings.Contains(r.stderr, "already answered") {
				t.Fatalf("thread answer: %+v", r)
			}
		}
	})
}

// planCodeReviewBundleRoot is an engine root set up with a provider for a
// fake model (stall: it never answers) and the example bundle registered as
// plan-code-review.
func planCodeReviewBundleRoot(t *testing.T, stall bool) (string, *fakeModel) {
	t.Helper()
	f := newFakeModel(t, stall)
	root := engineRoot(t)
	setupFakeProvider(t, root, f)
	if r := run(t, root, "workflow", "add", "plan-code-review", filepath.Join(planCodeReviewDir, "plan-code-review.esm.js")); r.code != 0 {
		t.Fatalf("workflow add: %+v", r)
	}
	return root, f
}

// checkKeyNotStored fails when the API key is in any file of the root but
// workflow.yaml, where setup put it: not in the debug logs, the CAS, the
// bundles or the thread indexes.
func checkKeyNotStored(t *testing.T, root string) {
	t.Helper()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() || p == filepath.Join(root, "workflow.yaml") {
			return err // directories, the host's socket and setup's own file
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if strings.Contains(string(b), fakeAPIKey) {
			t.Errorf("%s holds the API key", p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "logs")); err != nil {
		t.Errorf("no debug logs were written: %v", err)
	}
}

// TestPlanCodeReviewBundleWithAFakeModel runs the example bundle against a
// scripted model: the planner plans, the coder writes, patches and cats a
// file in the workspace the task names, the reviewer rejects the first
// attempt and approves the second.
func TestPlanCodeReviewBundleWithAFakeModel(t *testing.T) {
	t.Parallel()
	root, f := planCodeReviewBundleRoot(t, false)
	workspace := filepath.Join(t.TempDir(), "project") // the coder creates it
	id := start(t, root, "plan-code-review", "--prompt", "Write "+greetingFile+" that greets the world.\nWorkspace: "+workspace)
	checkPlanCodeReviewRun(t, root, id, workspace, f)
	checkKeyNotStored(t, root)
}

// TestPlanCodeReviewBundleRouting: a planner that aborts ends the thread at
// once, and a reviewer that rejects every attempt gets three before the
// bundle gives up, whatever it answers. With no workspace in the task the
// coder works in $WORKFLOW_WORKSPACE.
func TestPlanCodeReviewBundleRouting(t *testing.T) {
	t.Parallel()
	envWorkspace := t.TempDir()
	root, _ := planCodeReviewBundleRoot(t, false)
	// A thread gets the environment of the command that runs it.
	workspaceEnv := []string{"WORKFLOW_WORKSPACE=" + envWorkspace}
	aborted := finished(t, root, startEnv(t, root, workspaceEnv, "plan-code-review", "--prompt", "Do something impossible.\nWorkspace: "+t.TempDir()))
	if roles(aborted) != "planner" || aborted.Status != "completed" || aborted.Result.ReturnCode != 0 ||
		!strings.Contains(aborted.Steps[0].Content, `"status":"aborted"`) {
		t.Errorf("aborted plan: thread = %+v", aborted)
	}
	looped := finishedApproving(t, root, startEnv(t, root, workspaceEnv, "plan-code-review", "--prompt", "Write a greeting that is never good enough."))
	if want := "planner,approve,coder,reviewer,coder,reviewer,coder,reviewer"; roles(looped) != want || looped.Status != "completed" || looped.Result.ReturnCode != 0 {
		t.Errorf("endless rejections: roles %s, thread = %+v; want %s", roles(looped), looped, want)
	}
	// Three attempts: the first writes the greeting, each later one adds a
	// farewell.
	want := finalGreeting + "Goodbye, world!\n"
	if got, err := os.ReadFile(filepath.Join(envWorkspace, greetingFile)); err != nil || string(got) != want {
		t.Errorf("%s in $WORKFLOW_WORKSPACE = %q, %v; want %q", greetingFile, got, err, want)
	}
}

// TestPlanCodeReviewYAMLWithAFakeModel runs the YAML form the same way: its
// coder works in ./workspace beside the YAML file, both forms describe the
// same roles, and a reviewer that abandons the work ends the loop.
func TestPlanCodeReviewYAMLWithAFakeModel(t *testing.T) {
	t.Parallel()
	f := newFakeModel(t, false)
	root := engineRoot(t)
	setupFakeProvider(t, root, f)

	// A copy of the example, so its relative workspace lands in a temp dir.
	src, err := os.ReadFile(filepath.Join(planCodeReviewDir, "plan-code-review.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	workspace := filepath.Join(dir, "workspace")
	if err := os.Mkdir(workspace, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "plan-code-review.yaml"), src, 0o644); err != nil {
		t.Fatal(err)
	}
	r := run(t, root, "workflow", "add", "plan-code-review-yaml", filepath.Join(dir, "plan-code-review.yaml"))
	if r.code != 0 {
		t.Fatalf("workflow add of the YAML form: %+v", r)
	}
	yamlHash := registeredHash(t, r.stdout)
	r = run(t, root, "workflow", "add", "plan-code-review", filepath.Join(planCodeReviewDir, "plan-code-review.esm.js"))
	if r.code != 0 {
		t.Fatalf("workflow add of the bundle: %+v", r)
	}
	jsHash := registeredHash(t, r.stdout)
	if yamlRoles, jsRoles := descriptorRoles(t, root, yamlHash), descriptorRoles(t, root, jsHash); !reflect.DeepEqual(yamlRoles, jsRoles) {
		t.Errorf("the YAML and bundle forms describe different roles:\nYAML:   %v\nbundle: %v", yamlRoles, jsRoles)
	}

	id := start(t, root, "plan-code-review-yaml", "--prompt", "Write "+greetingFile+" that greets the world.")
	checkPlanCodeReviewRun(t, root, id, workspace, f)
	checkKeyNotStored(t, root)

	// The graph cannot count: the reviewer ends the loop by abandoning.
	hopeless := finishedApproving(t, root, start(t, root, "plan-code-review-yaml", "--prompt", "Write a hopeless greeting."))
	if want := "planner,approve,coder,reviewer,coder,reviewer,coder,reviewer"; roles(hopeless) != want || hopeless.Status != "completed" ||
		!strings.Contains(hopeless.Steps[7].Content, `"status":"abandoned"`) {
		t.Errorf("abandoned review: roles %s, thread = %+v; want %s ending abandoned", roles(hopeless), hopeless, want)
	}
}

// registeredHash is the hash `workflow add` printed last ("registered
// workflow "x" from f as <hash>").
func registeredHash(t *testing.T, stdout string) string {
	t.Helper()
	f := strings.Fields(stdout)
	if len(f) == 0 || len(f[len(f)-1]) != 13 {
		t.Fatalf("workflow add printed %q", stdout)
	}
	return f[len(f)-1]
}

// descriptorRoles reads the roles of a registered workflow's descriptor.
func descriptorRoles(t *testing.T, root, hash string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "bundles", hash+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Roles map[string]any `yaml:"roles"`
	}
	if err := yaml.Unmarshal(b, &d); err != nil || len(d.Roles) != 4 {
		t.Fatalf("descriptor %s: %v\n%s", hash, err, b)
	}
	return d.Roles
}

// TestKillWhileTheModelStalls: a model call that never answers must not
// hold a killed thread; the kill cancels the HTTP request.
func TestKillWhileTheModelStalls(t *testing.T) {
	t.Parallel()
	root, f := planCodeReviewBundleRoot(t, true)
	id := start(t, root, "plan-code-review", "--prompt", "Write a greeting.\nWorkspace: "+t.TempDir())
	select {
	case <-f.started:
	case <-time.After(testkit.WaitBound):
		t.Fatal("the planner never called the model")
	}
	began := time.Now()
	if r := run(t, root, "thread", "kill", id); r.code != 0 || r.stdout != "kill sent for thread "+id+"\n" {
		t.Fatalf("kill: %+v", r)
	}
	s := finished(t, root, id)
	t.Logf("kill of a stalled model call took %s", time.Since(began))
	if s.Status != "killed" || s.Result.ReturnCode != 130 || len(s.Steps) != 0 {
		t.Fatalf("thread = %+v", s)
	}
	select {
	case <-f.cancelled:
	case <-time.After(testkit.WaitBound):
		t.Fatal("the model request was not cancelled by the kill")
	}
	if calls := f.seen(); len(calls) != 1 || calls[0].role != "planner" {
		t.Errorf("model calls = %+v, want the planner's one", calls)
	}
}
