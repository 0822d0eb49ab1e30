package executor

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/uncaged/workflow/engine/registry"
	"github.com/uncaged/workflow/engine/threads"
)

// oversightModel is a fake OpenAI-compatible server for the supervisor and
// summarizer: it answers by the output tool a request offers (the last
// one) with that tool's scripted arguments, or with HTTP 400 when none are
// scripted, and records each request's user message.
type oversightModel struct {
	srv *httptest.Server
	// answers maps an output tool's name to its arguments; answerBlock
	// makes the request wait until the caller gives up.
	answers map[string]string
	arrived chan string // the tool name of each request, when listened for
	mu      sync.Mutex
	asked   map[string][]string // output tool name -> user messages
	models  map[string][]string // output tool name -> the model each request named
}

func newOversightModel(t *testing.T, answers map[string]string) *oversightModel {
	m := &oversightModel{answers: answers, asked: map[string][]string{}, models: map[string][]string{}, arrived: make(chan string, 64)}
	m.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Model    string `json:"model"`
			Messages []struct {
				Role    string `json:"role"`
				Content string `json:"content"`
			} `json:"messages"`
			Tools []struct {
				Function struct {
					Name string `json:"name"`
				} `json:"function"`
			} `json:"tools"`
		}
		b, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(b, &req); err != nil || len(req.Tools) == 0 || len(req.Messages) < 2 {
			http.Error(w, "unexpected request", http.StatusBadRequest)
			return
		}
		tool := req.Tools[len(req.Tools)-1].Function.Name
		m.mu.Lock()
		m.asked[tool] = append(m.asked[tool], req.Messages[1].Content)
		m.models[tool] = append(m.models[tool], req.Model)
		m.mu.Unlock()
		select {
		case m.arrived <- tool:
		default:
		}
		args, ok := m.answers[tool]
		if args == answerBlock {
			<-r.Context().Done()
			return
		}
		if !ok {
			http.Error(w, `{"error":"model refuses"}`, http.StatusBadRequest)
			return
		}
		// A failed write shows on the client's side.
		_ = json.NewEncoder(w).Encode(map[string]any{"choices": []any{map[string]any{"message": map[string]any{
			"role": "assistant", "content": nil,
			"tool_calls": []any{map[string]any{"id": "call_1", "type": "function", "function": map[string]any{"name": tool, "arguments": args}}},
		}}}})
	}))
	t.Cleanup(m.srv.Close)
	return m
}

const answerBlock = "\x00block"

func (m *oversightModel) questions(tool string) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.asked[tool]...)
}

// modelsAsked are the models the requests for tool named, in order.
func (m *oversightModel) modelsAsked(tool string) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.models[tool]...)
}

// configure writes workflow.yaml with the fake provider and the given
// scenes (besides default) and supervisor interval.
func configure(t *testing.T, e *Executor, m *oversightModel, interval int, scenes ...string) {
	t.Helper()
	models := map[string]string{"default": "fake/base"}
	for _, s := range scenes {
		models[s] = "fake/" + s + "-model"
	}
	err := registry.Update(e.Layout.RegistryFile(), func(r *registry.Registry) error {
		return r.SetConfig(registry.Config{MaxDepth: 3, SupervisorInterval: interval,
			Providers: map[string]registry.Provider{"fake": {BaseURL: m.srv.URL, APIKey: "sk-oversight"}},
			Models:    models})
	})
	if err != nil {
		t.Fatal(err)
	}
}

func debugLog(t *testing.T, e *Executor, id string) string {
	t.Helper()
	b, err := os.ReadFile(e.Layout.InfoLog("BUNDLEHASHAAA", id))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func endOf(t *testing.T, e *Executor, root string) (int, string) {
	t.Helper()
	end, err := threads.HeadEnd(e.CAS, root)
	if err != nil || end == nil {
		t.Fatalf("no end node at %s: %v", root, err)
	}
	return end.ReturnCode(), end.Summary()
}

func TestSupervisorKillsTheThread(t *testing.T) {
	t.Parallel()
	e := newExec(t)
	m := newOversightModel(t, map[string]string{"supervisor_decision": `{"decision":"kill","reason":"planner and coder loop"}`})
	configure(t, e, m, 2, SceneSupervisor, SceneSummarizer)
	th := begin(t, e, "SUP")
	res, err := e.Run(context.Background(), linear{roles: []string{"a", "b", "c", "d"}}, th, Env{})
	if err != nil {
		t.Fatal(err)
	}
	if res.ReturnCode != 1 || res.Summary != SummarySupervisorKilled {
		t.Fatalf("result %+v", res)
	}
	if got := roles(t, e, res.RootHash); strings.Join(got, ",") != "a,b,__end__" {
		t.Fatalf("chain = %v", got)
	}
	if code, summary := endOf(t, e, res.RootHash); code != 1 || summary != SummarySupervisorKilled {
		t.Fatalf("end node %d %q", code, summary)
	}
	q := m.questions("supervisor_decision")
	want := "Original task:\nhello\n\nRecent steps (oldest first):\n1. [a] {\"n\":1}\n2. [b] {\"n\":2}"
	if len(q) != 1 || q[0] != want {
		t.Fatalf("supervisor asked %q", q)
	}
	if len(m.questions("workflow_summary")) != 0 {
		t.Fatal("the summarizer ran for a killed thread")
	}
	log := debugLog(t, e, "SUP")
	if !strings.Contains(log, "supervisor says kill: planner and coder loop") || !strings.Contains(log, "thread SUP killed by supervisor") {
		t.Fatalf("log:\n%s", log)
	}
	if hist, _ := threads.ReadHistory(e.Layout.BundleDir("BUNDLEHASHAAA")); len(hist) != 1 {
		t.Fatalf("history %+v", hist)
	}
}

func TestSupervisorRunsEveryIntervalAndContinues(t *testing.T) {
	t.Parallel()
	e := newExec(t)
	m := newOversightModel(t, map[string]string{"supervisor_decision": `{"decision":"continue"}`})
	configure(t, e, m, 2, SceneSupervisor)
	res, err := e.Run(context.Background(), linear{roles: []string{"a", "b", "c", "d", "e"}}, begin(t, e, "OK"), Env{})
	if err != nil || res.ReturnCode != 0 || res.Summary != "completed: moderator returned END" {
		t.Fatalf("result %+v, %v", res, err)
	}
	q := m.questions("supervisor_decision")
	if len(q) != 2 || !strings.HasSuffix(q[1], "\n4. [d] {\"n\":4}") {
		t.Fatalf("supervisor asked %q", q)
	}
}

func TestSupervisorErrorIsSkipped(t *testing.T) {
	t.Parallel()
	e := newExec(t)
	m := newOversightModel(t, nil) // every request gets HTTP 400
	configure(t, e, m, 1, SceneSupervisor)
	res, err := e.Run(context.Background(), linear{roles: []string{"a", "b"}}, begin(t, e, "SKIP"), Env{})
	if err != nil || res.ReturnCode != 0 || strings.Join(roles(t, e, res.RootHash), ",") != "a,b,__end__" {
		t.Fatalf("result %+v, %v", res, err)
	}
	if n := len(m.questions("supervisor_decision")); n != 2 {
		t.Fatalf("supervisor asked %d times", n)
	}
	if log := debugLog(t, e, "SKIP"); strings.Count(log, "supervisor skipped: http_error:400:") != 2 {
		t.Fatalf("log:\n%s", log)
	}
}

// With the workflow.yaml setup writes — models.default and
// supervisorInterval 3, no scene of their own — the supervisor and the
// summarizer run with models.default, as the original's do; a scene of
// their own wins (for the summarizer, models.extract before default).
func TestSupervisorAndSummarizerFallBackToTheDefaultModel(t *testing.T) {
	t.Parallel()
	answers := map[string]string{"supervisor_decision": `{"decision":"continue"}`, "workflow_summary": `{"summary":"Did a, b and c."}`}
	for _, tc := range []struct {
		scenes                  []string
		supervisorAs, summaryAs string
	}{
		{nil, "base", "base"},
		{[]string{SceneSupervisor}, "supervisor-model", "base"},
		{[]string{"extract"}, "base", "extract-model"},
		{[]string{"extract", SceneSummarizer}, "base", "summarizer-model"},
	} {
		e := newExec(t)
		m := newOversightModel(t, answers)
		configure(t, e, m, registry.DefaultSupervisorInterval, tc.scenes...)
		res, err := e.Run(context.Background(), linear{roles: []string{"a", "b", "c"}}, begin(t, e, "DEF"), Env{})
		if err != nil || res.ReturnCode != 0 || res.Summary != "Did a, b and c." {
			t.Fatalf("scenes %v: result %+v, %v", tc.scenes, res, err)
		}
		if got := m.modelsAsked("supervisor_decision"); !slices.Equal(got, []string{tc.supervisorAs}) {
			t.Errorf("scenes %v: supervisor asked %q, want %s once (after step 3)", tc.scenes, got, tc.supervisorAs)
		}
		if got := m.modelsAsked("workflow_summary"); !slices.Equal(got, []string{tc.summaryAs}) {
			t.Errorf("scenes %v: summarizer asked %q, want %s once", tc.scenes, got, tc.summaryAs)
		}
	}
}

// Each is turned off on its own: the supervisor by supervisorInterval 0,
// the summarizer by summarizer: off; with no model at all (no config, or
// no models.default nor scene) neither runs, and nothing says so.
func TestSupervisorAndSummarizerOptOuts(t *testing.T) {
	t.Parallel()
	answers := map[string]string{"supervisor_decision": `{"decision":"continue"}`, "workflow_summary": `{"summary":"model summary"}`}
	for _, tc := range []struct {
		name                        string
		interval                    int
		summarizerOff, noModels     bool
		wantSupervisor, wantSummary int
	}{
		{"both on", 1, false, false, 2, 1},
		{"supervisorInterval 0", 0, false, false, 0, 1},
		{"summarizer off", 1, true, false, 2, 0},
		{"both off", 0, true, false, 0, 0},
		{"no models", 1, false, true, 0, 0},
	} {
		e := newExec(t)
		m := newOversightModel(t, answers)
		cfg := registry.Config{MaxDepth: 3, SupervisorInterval: tc.interval,
			Providers: map[string]registry.Provider{"fake": {BaseURL: m.srv.URL, APIKey: "sk-oversight"}},
			Models:    map[string]string{"default": "fake/base"}}
		if tc.summarizerOff {
			cfg.Summarizer = registry.SummarizerOff
		}
		if tc.noModels {
			cfg.Models = map[string]string{"coder": "fake/coder"}
		}
		if err := registry.Update(e.Layout.RegistryFile(), func(r *registry.Registry) error { return r.SetConfig(cfg) }); err != nil {
			t.Fatal(err)
		}
		res, err := e.Run(context.Background(), linear{roles: []string{"a", "b"}}, begin(t, e, "OPT"), Env{})
		if err != nil || res.ReturnCode != 0 {
			t.Fatalf("%s: result %+v, %v", tc.name, res, err)
		}
		sup, sum := len(m.questions("supervisor_decision")), len(m.questions("workflow_summary"))
		if sup != tc.wantSupervisor || sum != tc.wantSummary {
			t.Errorf("%s: supervisor asked %d times, summarizer %d; want %d and %d", tc.name, sup, sum, tc.wantSupervisor, tc.wantSummary)
		}
		if want := "completed: moderator returned END"; tc.wantSummary == 0 && res.Summary != want {
			t.Errorf("%s: summary %q, want the workflow's %q", tc.name, res.Summary, want)
		}
		if log := debugLog(t, e, "OPT"); tc.wantSupervisor+tc.wantSummary == 0 && (strings.Contains(log, "supervisor") || strings.Contains(log, "summarizer")) {
			t.Errorf("%s: the log speaks of what is off:\n%s", tc.name, log)
		}
	}
	// No config section at all.
	e := newExec(t)
	if res, err := e.Run(context.Background(), linear{roles: []string{"a"}}, begin(t, e, "NOCFG"), Env{}); err != nil || res.Summary != "completed: moderator returned END" {
		t.Fatalf("without a config: %+v, %v", res, err)
	}
}

func TestSummarizerReplacesTheSummary(t *testing.T) {
	t.Parallel()
	e := newExec(t)
	m := newOversightModel(t, map[string]string{"workflow_summary": `{"summary":"Planned and coded the fix."}`})
	configure(t, e, m, 3, SceneSummarizer)
	th := begin(t, e, "SUM")
	res, err := e.Run(context.Background(), linear{roles: []string{"planner", "coder"}}, th, Env{})
	if err != nil || res.ReturnCode != 0 || res.Summary != "Planned and coded the fix." {
		t.Fatalf("result %+v, %v", res, err)
	}
	if _, summary := endOf(t, e, res.RootHash); summary != res.Summary {
		t.Fatalf("end node summary %q", summary)
	}
	frames, _ := threads.Walk(e.CAS, res.RootHash)
	q := m.questions("workflow_summary")
	if len(q) != 1 || !strings.HasPrefix(q[0], "Original task:\nhello\n\nThe workflow ended with: completed: moderator returned END\n\n") {
		t.Fatalf("summarizer asked %q", q)
	}
	want := fmt.Sprintf("Steps (oldest first):\n1. [planner] contentHash: %s\n2. [coder] contentHash: %s",
		frames[0].State.Payload.Content, frames[1].State.Payload.Content)
	if !strings.HasSuffix(q[0], want) {
		t.Fatalf("summarizer input %q lacks %q", q[0], want)
	}
}

func TestSummarizerFailureKeepsTheWorkflowSummary(t *testing.T) {
	t.Parallel()
	e := newExec(t)
	m := newOversightModel(t, map[string]string{"workflow_summary": `{"summary":"   "}`})
	configure(t, e, m, 0, SceneSummarizer)
	res, err := e.Run(context.Background(), linear{roles: []string{"a"}}, begin(t, e, "KEEP"), Env{})
	if err != nil || res.Summary != "completed: moderator returned END" {
		t.Fatalf("result %+v, %v", res, err)
	}
	if log := debugLog(t, e, "KEEP"); !strings.Contains(log, "summarizer failed, keeping the workflow's summary") {
		t.Fatalf("log:\n%s", log)
	}

	// A model that refuses outright.
	e = newExec(t)
	configure(t, e, newOversightModel(t, nil), 0, SceneSummarizer)
	res, err = e.Run(context.Background(), linear{roles: []string{"a"}}, begin(t, e, "KEEP2"), Env{})
	if err != nil || res.Summary != "completed: moderator returned END" {
		t.Fatalf("result %+v, %v", res, err)
	}
	if log := debugLog(t, e, "KEEP2"); !strings.Contains(log, "summarizer failed, keeping the workflow's summary: http_error:400:") {
		t.Fatalf("log:\n%s", log)
	}
}

func TestSummarizerKeyFromMissingEnvIsAFailure(t *testing.T) {
	t.Parallel()
	e := newExec(t)
	m := newOversightModel(t, map[string]string{"workflow_summary": `{"summary":"never"}`})
	err := registry.Update(e.Layout.RegistryFile(), func(r *registry.Registry) error {
		return r.SetConfig(registry.Config{MaxDepth: 3,
			Providers: map[string]registry.Provider{"fake": {BaseURL: m.srv.URL, APIKey: "env:UNSET_OVERSIGHT_KEY"}},
			Models:    map[string]string{"default": "fake/base", SceneSummarizer: "fake/s"}})
	})
	if err != nil {
		t.Fatal(err)
	}
	res, err := e.Run(context.Background(), linear{roles: []string{"a"}}, begin(t, e, "ENV"), Env{Getenv: func(string) string { return "" }})
	if err != nil || res.Summary != "completed: moderator returned END" || len(m.questions("workflow_summary")) != 0 {
		t.Fatalf("result %+v, %v", res, err)
	}
	if log := debugLog(t, e, "ENV"); !strings.Contains(log, `environment variable \"UNSET_OVERSIGHT_KEY\" is not set`) {
		t.Fatalf("log:\n%s", log)
	}
}

func TestKillDuringSupervisorEndsWith130(t *testing.T) {
	t.Parallel()
	e := newExec(t)
	m := newOversightModel(t, map[string]string{"supervisor_decision": answerBlock, "workflow_summary": answerBlock})
	configure(t, e, m, 1, SceneSupervisor, SceneSummarizer)
	ctx, cancel := context.WithCancelCause(context.Background())
	done := make(chan Result)
	go func() {
		res, _ := e.Run(ctx, linear{roles: []string{"a", "b"}}, begin(t, e, "KILL"), Env{})
		done <- res
	}()
	if tool := <-m.arrived; tool != "supervisor_decision" {
		t.Fatalf("first request for %s", tool)
	}
	cancel(ErrKilled)
	res := <-done
	if res.ReturnCode != 130 || res.Summary != SummaryKilled+": killed after step 1" || strings.Join(roles(t, e, res.RootHash), ",") != "a,__end__" {
		t.Fatalf("result %+v", res)
	}
	if strings.Contains(debugLog(t, e, "KILL"), "supervisor skipped") {
		t.Fatal("a kill was logged as a supervisor failure")
	}
}

func TestKillDuringSummarizerEndsWith130(t *testing.T) {
	t.Parallel()
	e := newExec(t)
	m := newOversightModel(t, map[string]string{"workflow_summary": answerBlock})
	configure(t, e, m, 0, SceneSummarizer)
	ctx, cancel := context.WithCancelCause(context.Background())
	done := make(chan Result)
	go func() {
		res, _ := e.Run(ctx, linear{roles: []string{"a"}}, begin(t, e, "KILL2"), Env{})
		done <- res
	}()
	<-m.arrived
	cancel(ErrKilled)
	if res := <-done; res.ReturnCode != 130 || res.Summary != SummaryKilled+": killed after step 1" {
		t.Fatalf("result %+v", res)
	}
}
