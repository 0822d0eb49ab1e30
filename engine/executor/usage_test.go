package executor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/uncaged/workflow/engine/agents"
	"github.com/uncaged/workflow/engine/canonyaml"
	"github.com/uncaged/workflow/engine/registry"
	"github.com/uncaged/workflow/engine/threads"
	"github.com/uncaged/workflow/engine/usage"
	"github.com/uncaged/workflow/engine/workflow"
)

// usageModel answers every request by calling the last tool offered with
// a fitting argument, and reports 100 prompt and 10 completion tokens when
// report is set (else no usage at all, as some servers do).
func usageModel(t *testing.T, report bool) *httptest.Server {
	args := map[string]string{"supervisor_decision": `{"decision":"continue"}`, "workflow_summary": `{"summary":"all done"}`}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Tools []struct {
				Function struct {
					Name string `json:"name"`
				} `json:"function"`
			} `json:"tools"`
		}
		b, _ := io.ReadAll(r.Body)
		if json.Unmarshal(b, &req) != nil || len(req.Tools) == 0 {
			http.Error(w, "unexpected request", http.StatusBadRequest)
			return
		}
		tool := req.Tools[len(req.Tools)-1].Function.Name
		a, ok := args[tool]
		if !ok {
			a = `{"ok":true}`
		}
		resp := map[string]any{"choices": []any{map[string]any{"message": map[string]any{
			"role": "assistant", "content": nil,
			"tool_calls": []any{map[string]any{"id": "call_1", "type": "function", "function": map[string]any{"name": tool, "arguments": a}}},
		}}}}
		if report {
			resp["usage"] = map[string]any{"prompt_tokens": 100, "completion_tokens": 10}
		}
		_ = json.NewEncoder(w).Encode(resp) // a failure shows on the client's side
	}))
	t.Cleanup(srv.Close)
	return srv
}

// modelRoles runs each role with an llm agent, then extracts from the
// agent's output, as a bundle's command-agent role would.
type modelRoles struct{ roles []string }

func (w modelRoles) Descriptor() workflow.Descriptor { return workflow.Descriptor{} }

func (w modelRoles) Start(_ context.Context, tc workflow.ThreadContext, host workflow.Host) (workflow.Run, error) {
	return &modelRolesRun{w: w, tc: tc, host: host.(agents.Host), done: len(tc.Steps)}, nil
}

type modelRolesRun struct {
	w    modelRoles
	tc   workflow.ThreadContext
	host agents.Host
	done int
}

func (r *modelRolesRun) Next(ctx context.Context) (*workflow.Output, *workflow.Completion, error) {
	if r.done >= len(r.w.roles) {
		return nil, &workflow.Completion{Summary: "completed"}, nil
	}
	role := r.w.roles[r.done]
	agent, err := agents.New(agents.Spec{Kind: agents.KindLLM})
	if err != nil {
		return nil, nil, err
	}
	if _, err := agent.Run(ctx, agents.Call{Role: role, Thread: r.tc, Host: r.host}); err != nil {
		return nil, nil, err
	}
	h, err := r.host.CAS().Put(fmt.Sprintf("output of %s", role))
	if err != nil {
		return nil, nil, err
	}
	if _, err := r.host.Extract(ctx, []byte(`{"type":"object"}`), h); err != nil {
		return nil, nil, err
	}
	r.done++
	return &workflow.Output{Role: role, ContentHash: h, Meta: canonyaml.Map{{Key: "n", Value: r.done}}, Refs: []string{h}}, nil, nil
}

func (r *modelRolesRun) Close() error { return nil }

func configureUsage(t *testing.T, e *Executor, srv *httptest.Server) {
	t.Helper()
	err := registry.Update(e.Layout.RegistryFile(), func(r *registry.Registry) error {
		return r.SetConfig(registry.Config{MaxDepth: 3, SupervisorInterval: 1,
			Providers: map[string]registry.Provider{"fake": {BaseURL: srv.URL, APIKey: "sk-usage"}},
			Models:    map[string]string{"default": "fake/base", SceneSupervisor: "fake/judge", SceneSummarizer: "fake/base"},
			Prices:    registry.Prices{"fake/base": {Prompt: 1, Completion: 10}}})
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Every model call of a thread — its agents', the extractor's, the
// supervisor's and the summarizer's — is recorded with its step.
func TestEveryModelCallIsRecordedWithItsStep(t *testing.T) {
	t.Parallel()
	e := newExec(t)
	configureUsage(t, e, usageModel(t, true))
	th := begin(t, e, "USAGE")
	res, err := e.Run(context.Background(), modelRoles{roles: []string{"plan", "code"}}, th, Env{})
	if err != nil || res.ReturnCode != 0 || res.Summary != "all done" {
		t.Fatalf("result %+v, %v", res, err)
	}
	recs, err := usage.ReadThread(e.Layout, th.BundleHash, th.ID)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range recs {
		if r.Thread != "USAGE" || r.Workflow != "demo" || r.PromptTokens != 100 || r.CompletionTokens != 10 || r.Unknown || r.Time == 0 {
			t.Errorf("record %+v", r)
		}
		got = append(got, fmt.Sprintf("%d:%s:%s:%s", r.Step, r.Source, r.Role, r.Model))
	}
	want := "1:role:plan:fake/base 1:extract::fake/base 1:supervisor::fake/judge " +
		"2:role:code:fake/base 2:extract::fake/base 2:supervisor::fake/judge 3:summarizer::fake/base"
	if strings.Join(got, " ") != want {
		t.Fatalf("records:\n%s\nwant:\n%s", strings.Join(got, " "), want)
	}
	prices, err := usage.LoadPrices(e.Layout)
	if err != nil {
		t.Fatal(err)
	}
	sum := usage.Summarize(recs, prices)
	if sum.Total.Calls != 7 || sum.Total.PromptTokens != 700 || sum.Total.UnpricedCalls != 2 || *sum.Total.CostUSD != 5*200/1e6 {
		t.Errorf("total %+v (cost %v)", sum.Total, *sum.Total.CostUSD)
	}
	if s := sum.Step(3); s == nil || s.Calls != 1 {
		t.Errorf("the end's usage: %+v", s)
	}
}

// Recording usage changes no node: the same run, at the same clock, ends
// at the same hash whether the server reports usage or not.
func TestRecordingUsageChangesNoHash(t *testing.T) {
	t.Parallel()
	at := time.UnixMilli(1_760_000_000_000)
	run := func(report bool) (string, []usage.Record) {
		e := newExec(t)
		e.Now = func() time.Time { return at }
		configureUsage(t, e, usageModel(t, report))
		th := begin(t, e, "SAME")
		res, err := e.Run(context.Background(), modelRoles{roles: []string{"plan"}}, th, Env{})
		if err != nil {
			t.Fatal(err)
		}
		recs, err := usage.ReadThread(e.Layout, th.BundleHash, th.ID)
		if err != nil {
			t.Fatal(err)
		}
		return res.RootHash, recs
	}
	withUsage, recs := run(true)
	without, unknown := run(false)
	if withUsage != without {
		t.Fatalf("end %s with usage, %s without", withUsage, without)
	}
	if len(recs) != 4 || len(unknown) != 4 || !unknown[0].Unknown || unknown[0].PromptTokens != 0 || recs[0].Unknown {
		t.Fatalf("records %+v / %+v", recs, unknown)
	}
}

// A usage file that cannot be written loses the record, says so in the
// debug log, and does not stop the thread.
func TestUnwritableUsageFileDoesNotStopTheThread(t *testing.T) {
	t.Parallel()
	e := newExec(t)
	configureUsage(t, e, usageModel(t, true))
	th := begin(t, e, "NOUSAGE")
	if err := os.MkdirAll(usage.Path(e.Layout, th.BundleHash, th.ID), 0o755); err != nil { // a directory in its place
		t.Fatal(err)
	}
	res, err := e.Run(context.Background(), modelRoles{roles: []string{"plan"}}, th, Env{})
	if err != nil || res.ReturnCode != 0 {
		t.Fatalf("result %+v, %v", res, err)
	}
	if log := debugLog(t, e, th.ID); !strings.Contains(log, "the usage of a role model call was not recorded") {
		t.Fatalf("log:\n%s", log)
	}
}

// A thread the host left unfinished and a later host resumed goes on
// counting its steps where it stopped: the resumed run's calls belong to
// the steps they make, not to the first ones again.
func TestResumedThreadRecordsAtItsOwnSteps(t *testing.T) {
	t.Parallel()
	e := newExec(t)
	configureUsage(t, e, usageModel(t, true))
	th := begin(t, e, "RESUMED")
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	wf := modelRoles{roles: []string{"plan", "code"}}
	if _, err := e.Run(ctx, wf, th, Env{OnStep: func(string) { cancel(ErrShutdown) }}); !errors.Is(err, ErrLeftRunning) {
		t.Fatalf("err = %v", err)
	}
	rec, err := threads.Resolve(e.Layout, th.ID)
	if err != nil {
		t.Fatal(err)
	}
	resumed, err := e.ResumeThread(rec)
	if err != nil {
		t.Fatal(err)
	}
	if res, err := e.Run(context.Background(), wf, resumed, Env{}); err != nil || res.ReturnCode != 0 {
		t.Fatalf("resumed run: %+v, %v", res, err)
	}
	recs, err := usage.ReadThread(e.Layout, th.BundleHash, th.ID)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range recs {
		got = append(got, fmt.Sprintf("%d:%s:%s", r.Step, r.Source, r.Role))
	}
	if want := "1:role:plan 1:extract: 2:role:code 2:extract: 2:supervisor: 3:summarizer:"; strings.Join(got, " ") != want {
		t.Fatalf("records %s, want %s", strings.Join(got, " "), want)
	}
}
