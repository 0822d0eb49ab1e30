package usage

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/uncaged/workflow/engine/registry"
	"github.com/uncaged/workflow/engine/storage"
)

func line(t *testing.T, r Record) string {
	t.Helper()
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return string(b) + "\n"
}

func writeFile(t *testing.T, path, s string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// A crash mid-write leaves a last line without its newline; damage may
// leave lines that are not records. Neither hides the records around it.
func TestReadSkipsTornAndDamagedLines(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "x"+FileSuffix)
	a := Record{Time: 1, Thread: "T", Step: 1, Source: SourceRole, Model: "p/m", PromptTokens: 10, CompletionTokens: 2}
	b := Record{Time: 2, Thread: "T", Step: 2, Source: SourceRole, Model: "p/m", Unknown: true}
	writeFile(t, path, line(t, a)+"not json\n\n{}\n"+strings.Repeat("x", maxLine+10)+"\n"+line(t, b)+`{"ts":3,"thread":"T","step":3,"source":"role","model":"p/m","promptTok`)
	got, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, []Record{a, b}) {
		t.Fatalf("records = %+v", got)
	}
	if recs, err := Read(filepath.Join(t.TempDir(), "missing")); err != nil || recs != nil {
		t.Fatalf("missing file: %v %v", recs, err)
	}
	if _, err := Read(t.TempDir()); err == nil {
		t.Fatal("a directory read as a usage file")
	}
}

func TestSummarizePerStepAndPriced(t *testing.T) {
	t.Parallel()
	prices := registry.Prices{"p/big": {Prompt: 2, Completion: 10}}
	recs := []Record{
		{Step: 1, Source: SourceRole, Model: "p/big", PromptTokens: 1_000_000, CompletionTokens: 100_000},
		{Step: 1, Source: SourceRole, Model: "p/small", PromptTokens: 50, CompletionTokens: 5},
		{Step: 2, Source: SourceSupervisor, Model: "p/big", Unknown: true},
	}
	th := Summarize(recs, prices)
	if th.Total.Calls != 3 || th.Total.PromptTokens != 1_000_050 || th.Total.CompletionTokens != 100_005 || th.Total.TotalTokens != 1_100_055 {
		t.Fatalf("total = %+v", th.Total)
	}
	if th.Total.CostUSD == nil || *th.Total.CostUSD != 3 || th.Total.UnpricedCalls != 1 || th.Total.UnknownCalls != 1 {
		t.Fatalf("total cost = %v, unpriced %d, unknown %d", th.Total.CostUSD, th.Total.UnpricedCalls, th.Total.UnknownCalls)
	}
	if !reflect.DeepEqual(th.Total.Models, []string{"p/big", "p/small"}) {
		t.Errorf("models = %v", th.Total.Models)
	}
	if s := th.Step(1); s == nil || s.Calls != 2 || *s.CostUSD != 3 {
		t.Errorf("step 1 = %+v", s)
	}
	if s := th.Step(2); s == nil || s.Calls != 1 || s.CostUSD == nil || *s.CostUSD != 0 {
		t.Errorf("step 2 = %+v", s)
	}
	if th.Step(3) != nil {
		t.Error("a step without calls has totals")
	}
	unpriced := Summarize(recs, nil).Total
	if unpriced.CostUSD != nil || unpriced.UnpricedCalls != 3 {
		t.Errorf("without prices: %+v", unpriced)
	}
	empty, _ := json.Marshal(Summarize(nil, prices).Total)
	if string(empty) != `{"calls":0,"promptTokens":0,"completionTokens":0,"totalTokens":0,"unknownCalls":0,"models":[],"unpricedCalls":0}` {
		t.Errorf("no calls: %s", empty)
	}
	var merged Totals
	merged.Merge(th.Total)
	merged.Merge(Summarize(recs[:1], prices).Total)
	if merged.Calls != 4 || *merged.CostUSD != 6 || len(merged.Models) != 2 {
		t.Errorf("merged = %+v", merged)
	}
}

func TestMachineTotalsPerWorkflowOverARange(t *testing.T) {
	t.Parallel()
	l := storage.Layout{Root: t.TempDir()}
	day := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	ms := func(h int) int64 { return day.Add(time.Duration(h) * time.Hour).UnixMilli() }
	writeFile(t, Path(l, "BUNDLEA", "T1"), line(t, Record{Time: ms(1), Thread: "T1", Workflow: "review", Step: 1, Source: SourceRole, Model: "p/m", PromptTokens: 100, CompletionTokens: 10})+
		line(t, Record{Time: ms(30), Thread: "T1", Workflow: "review", Step: 2, Source: SourceRole, Model: "p/m", PromptTokens: 1, CompletionTokens: 1}))
	writeFile(t, Path(l, "BUNDLEA", "T2"), line(t, Record{Time: ms(2), Thread: "T2", Workflow: "review", Step: 1, Source: SourceExtract, Model: "p/m", PromptTokens: 200, CompletionTokens: 20}))
	writeFile(t, Path(l, "BUNDLEB", "T3"), line(t, Record{Time: ms(3), Thread: "T3", Workflow: "deploy", Step: 1, Source: SourceRole, Model: "q/n", PromptTokens: 5, CompletionTokens: 5}))
	writeFile(t, filepath.Join(l.LogsDir("BUNDLEB"), "T3.info.jsonl"), `{"tag":"x","content":"not usage","timestamp":1}`+"\n")
	prices := registry.Prices{"p/m": {Prompt: 1e6, Completion: 0}}

	rep, err := Machine(l, Filter{Since: day, Until: day.Add(24 * time.Hour)}, prices)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Threads != 3 || rep.Total.Calls != 3 || rep.Total.PromptTokens != 305 || len(rep.Workflows) != 2 {
		t.Fatalf("report = %+v", rep)
	}
	deploy, review := rep.Workflows[0], rep.Workflows[1]
	if deploy.Workflow != "deploy" || deploy.Threads != 1 || deploy.CostUSD != nil || deploy.UnpricedCalls != 1 {
		t.Errorf("deploy = %+v", deploy)
	}
	if review.Workflow != "review" || review.Threads != 2 || review.Calls != 2 || *review.CostUSD != 300 {
		t.Errorf("review = %+v", review)
	}
	only, err := Machine(l, Filter{Workflow: "review"}, prices)
	if err != nil || len(only.Workflows) != 1 || only.Total.Calls != 3 || only.Threads != 2 {
		t.Errorf("review only: %+v %v", only, err)
	}
	late, err := Machine(l, Filter{Since: day.Add(24 * time.Hour)}, nil)
	if err != nil || late.Total.Calls != 1 || late.Threads != 1 {
		t.Errorf("since the next day: %+v %v", late, err)
	}
	none, err := Machine(storage.Layout{Root: t.TempDir()}, Filter{}, nil)
	if err != nil || len(none.Workflows) != 0 || none.Total.Calls != 0 {
		t.Errorf("empty root: %+v %v", none, err)
	}
	tot, err := ThreadTotals(l, "BUNDLEA", "T1", prices)
	if err != nil || tot.Calls != 2 || tot.PromptTokens != 101 {
		t.Errorf("ThreadTotals = %+v %v", tot, err)
	}
}

func TestLoadPrices(t *testing.T) {
	t.Parallel()
	l := storage.Layout{Root: t.TempDir()}
	if p, err := LoadPrices(l); err != nil || p != nil {
		t.Fatalf("no registry: %v %v", p, err)
	}
	writeFile(t, l.RegistryFile(), "workflows: {}\nconfig:\n  maxDepth: 1\n  providers: {p: {baseUrl: u, apiKey: k}}\n  models: {default: p/m}\n  prices: {p/m: {prompt: 1, completion: 2}}\n")
	if p, err := LoadPrices(l); err != nil || p["p/m"].Completion != 2 {
		t.Fatalf("prices = %v %v", p, err)
	}
	writeFile(t, l.RegistryFile(), "workflows: {}\nconfig:\n  maxDepth: 1\n  providers: {p: {baseUrl: u, apiKey: k}}\n  models: {default: p/m}\n  prices: {p/m: {prompt: -1, completion: 2}}\n")
	if _, err := LoadPrices(l); err == nil || !strings.Contains(err.Error(), "config.prices.p/m.prompt") {
		t.Fatalf("bad prices: %v", err)
	}
}
