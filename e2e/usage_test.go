package e2e

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"

	"github.com/uncaged/workflow/engine/ids"
)

// What the fake model reports for every call when reportUsage is set.
const (
	fakePromptTokens     = 120
	fakeCompletionTokens = 15
)

// The prices the test configures for fake/m1, in US dollars per million
// tokens.
const (
	promptPrice     = 3.0
	completionPrice = 15.0
)

// usageTotals is the usage JSON of thread show, the thread API and
// GET /api/usage.
type usageTotals struct {
	Calls            int
	PromptTokens     int64
	CompletionTokens int64
	TotalTokens      int64
	UnknownCalls     int
	Models           []string
	CostUSD          *float64 `json:"costUsd"`
	UnpricedCalls    int
}

// shownUsage is the part of `thread show` that carries usage.
type shownUsage struct {
	Steps []struct {
		Role  string
		Hash  string
		Usage *usageTotals
	}
	Result *struct{ Usage *usageTotals }
	Usage  usageTotals
}

func showUsage(t *testing.T, root, id string) shownUsage {
	t.Helper()
	r := run(t, root, "thread", "show", id, "--json")
	var s shownUsage
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &s) != nil {
		t.Fatalf("thread show %s --json: %+v", id, r)
	}
	return s
}

// addPrices writes config.prices for the fake model into workflow.yaml,
// which setup wrote with the config section first.
func addPrices(t *testing.T, root string) {
	t.Helper()
	path := filepath.Join(root, "workflow.yaml")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	priced := strings.Replace(string(b), `"workflows":`, "  \"prices\":\n    \"fake/m1\": {\"prompt\": 3, \"completion\": 15}\n\"workflows\":", 1)
	if priced == string(b) {
		t.Fatalf("no workflows section in workflow.yaml:\n%s", b)
	}
	if err := os.WriteFile(path, []byte(priced), 0o600); err != nil {
		t.Fatal(err)
	}
}

// runPricedPlanCodeReview runs plan-code-review on root to its end against
// a fake model that reports usage, with addPrices' prices for it, and
// returns the model and the thread's id.
func runPricedPlanCodeReview(t *testing.T, root string) (*fakeModel, string) {
	t.Helper()
	f := newFakeModel(t, false)
	f.reportUsage = true
	setupFakeProvider(t, root, f)
	withoutOversight(t, root) // counts the roles' calls
	addPrices(t, root)
	addPath(t, root, "plan-code-review", filepath.Join(planCodeReviewDir, "plan-code-review.esm.js"))
	workspace := filepath.Join(t.TempDir(), "project")
	id := start(t, root, "plan-code-review", "--prompt", "Write "+greetingFile+" that greets the world.\nWorkspace: "+workspace)
	if s := finishedApproving(t, root, id); s.Status != "completed" || roles(s) != "planner,approve,coder,reviewer,coder,reviewer" {
		t.Fatalf("thread = %+v", s)
	}
	return f, id
}

// wantTotals checks totals for calls calls of the fake model, all priced.
func wantTotals(t *testing.T, what string, got usageTotals, calls int) {
	t.Helper()
	n := int64(calls)
	cost := float64(calls) * (fakePromptTokens*promptPrice + fakeCompletionTokens*completionPrice) / 1e6
	if got.Calls != calls || got.PromptTokens != n*fakePromptTokens || got.CompletionTokens != n*fakeCompletionTokens ||
		got.TotalTokens != n*(fakePromptTokens+fakeCompletionTokens) || got.UnknownCalls != 0 || got.UnpricedCalls != 0 ||
		!reflect.DeepEqual(got.Models, []string{"fake/m1"}) || got.CostUSD == nil || math.Abs(*got.CostUSD-cost) > 1e-9 {
		t.Errorf("%s: usage %+v (cost %v), want %d calls of fake/m1 costing %v", what, got, got.CostUSD, calls, cost)
	}
}

// checkHashes proves recording changed no node: every step's state is in
// the CAS under the hash of its bytes, and no node holds a usage field.
func checkHashes(t *testing.T, root string, s shownUsage) {
	t.Helper()
	for _, st := range s.Steps {
		b, err := os.ReadFile(filepath.Join(root, "cas", st.Hash+".txt"))
		if err != nil || ids.HashBytes(b) != st.Hash {
			t.Errorf("step %s: the node at %s hashes to %s (%v)", st.Role, st.Hash, ids.HashBytes(b), err)
		}
	}
	nodes, err := filepath.Glob(filepath.Join(root, "cas", "*.txt"))
	if err != nil || len(nodes) == 0 {
		t.Fatalf("no CAS nodes: %v", err)
	}
	for _, p := range nodes {
		if b, err := os.ReadFile(p); err != nil || strings.Contains(string(b), "promptTokens") || strings.Contains(string(b), "prompt_tokens") {
			t.Errorf("%s holds usage (%v)", p, err)
		}
	}
}

// TestModelUsageIsRecordedAndShown runs the plan-code-review bundle on a
// connected machine against a fake model that reports usage when asked
// (streaming, so only with stream_options.include_usage), with a price for
// the model. Every call's tokens show per step and per thread in `thread
// show`, in the thread's API record through the gateway and in the
// machine's totals (CLI and API); they survive the connector's restart,
// and no node's hash changed for them.
func TestModelUsageIsRecordedAndShown(t *testing.T) {
	t.Parallel()
	g := startGateway(t)
	conn, root := g.connector("usage-box", nil)
	f, id := runPricedPlanCodeReview(t, root)
	calls := len(f.seen())
	if calls == 0 {
		t.Fatal("the model was never called")
	}

	shown := showUsage(t, root, id)
	wantTotals(t, "thread show", shown.Usage, calls)
	// The planner and reviewers answer at once; the coder's script takes
	// four model calls, then three. The person who approved the plan
	// called no model.
	var perStep []int
	sum := 0
	for _, st := range shown.Steps {
		if st.Role == "approve" {
			if st.Usage != nil {
				t.Errorf("the approval step shows usage: %+v", st.Usage)
			}
			continue
		}
		if st.Usage == nil {
			t.Fatalf("step %s has no usage: %+v", st.Role, shown.Steps)
		}
		perStep = append(perStep, st.Usage.Calls)
		sum += st.Usage.Calls
	}
	if want := []int{1, 4, 1, 3, 1}; !reflect.DeepEqual(perStep, want) || sum != calls {
		t.Errorf("calls per step %v (of %d), want %v", perStep, calls, want)
	}
	if shown.Result == nil || shown.Result.Usage != nil {
		t.Errorf("the end made no call, yet: %+v", shown.Result)
	}
	checkHashes(t, root, shown)

	// The same through the gateway: the thread's records and the machine's
	// totals.
	var detail struct {
		Records []struct {
			Type      string
			StateHash string
			Usage     *usageTotals
		}
		Usage usageTotals
	}
	resp, body := g.do("GET", "/api/clients/usage-box/threads/"+id, "")
	if resp.StatusCode != 200 || json.Unmarshal([]byte(body), &detail) != nil {
		t.Fatalf("thread detail through the gateway: %d %s", resp.StatusCode, body)
	}
	wantTotals(t, "the thread API", detail.Usage, calls)
	var apiPerStep []int
	for _, r := range detail.Records {
		if r.Type == "role" && r.Usage != nil {
			apiPerStep = append(apiPerStep, r.Usage.Calls)
		}
	}
	if !reflect.DeepEqual(apiPerStep, perStep) {
		t.Errorf("calls per step in the API %v, in thread show %v", apiPerStep, perStep)
	}
	machineUsage := func(what string) {
		t.Helper()
		var rep struct {
			Workflows []struct {
				Workflow string
				Threads  int
				usageTotals
			}
			Total usageTotals
		}
		resp, body := g.do("GET", "/api/clients/usage-box/usage?workflow=plan-code-review&since=2020-01-01T00:00:00Z", "")
		if resp.StatusCode != 200 || json.Unmarshal([]byte(body), &rep) != nil || len(rep.Workflows) != 1 ||
			rep.Workflows[0].Workflow != "plan-code-review" || rep.Workflows[0].Threads != 1 {
			t.Fatalf("%s: GET /api/usage: %d %s", what, resp.StatusCode, body)
		}
		wantTotals(t, what+": GET /api/usage", rep.Total, calls)
	}
	machineUsage("first run")
	r := run(t, root, "thread", "usage", "--since", "1d", "-o", "json")
	var cliRep struct{ Total usageTotals }
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &cliRep) != nil {
		t.Fatalf("thread usage -o json: %+v", r)
	}
	wantTotals(t, "thread usage", cliRep.Total, calls)
	if r := run(t, root, "thread", "usage"); r.code != 0 || !strings.Contains(r.stdout, "plan-code-review") || !strings.Contains(r.stdout, "TOTAL") {
		t.Errorf("thread usage: %+v", r)
	}

	// A restart of the machine's connect keeps it all.
	conn.stop(syscall.SIGTERM)
	after := showUsage(t, root, id)
	if !reflect.DeepEqual(after, shown) {
		t.Errorf("thread show after the engine stopped:\n%+v\nbefore:\n%+v", after, shown)
	}
	tok := gwCLI(t, g.key, "token", "create", "--connector", "usage-box")
	again := startProc(t, []string{"UNCAGED_WORKFLOW_STORAGE_ROOT=" + root, "UNCAGED_WORKFLOW_TOKEN=" + tok},
		"uncaged-workflow", "connect", "--name", "usage-box", "--gateway", "http://"+g.front)
	stopTogether(t, again)
	g.waitStatus("usage-box", "online")
	machineUsage("after the restart")
	if s := showUsage(t, root, id); !reflect.DeepEqual(s, shown) {
		t.Errorf("thread show after the restart:\n%+v\nbefore:\n%+v", s, shown)
	}
}
