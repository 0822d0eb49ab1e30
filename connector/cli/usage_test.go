package cli

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/uncaged/workflow/connector/api"
	"github.com/uncaged/workflow/engine/registry"
	"github.com/uncaged/workflow/engine/storage"
	"github.com/uncaged/workflow/engine/usage"
)

// writeUsage appends records to a thread's usage file, then text as is
// (a torn line, damage).
func writeUsage(t *testing.T, root, bundle, thread string, text string, recs ...usage.Record) {
	t.Helper()
	path := usage.Path(storage.Layout{Root: root}, bundle, thread)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, r := range recs {
		line, _ := json.Marshal(r)
		b.Write(line)
		b.WriteByte('\n')
	}
	b.WriteString(text)
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// priceFixture adds config.prices to the fixture's workflow.yaml.
func priceFixture(t *testing.T, c *cli) {
	t.Helper()
	reg := filepath.Join(c.root, "workflow.yaml")
	b, err := os.ReadFile(reg)
	if err != nil {
		t.Fatal(err)
	}
	priced := strings.Replace(string(b), `"workflows":`, "  \"prices\":\n    \"dashscope/qwen-plus\": {\"prompt\": 2, \"completion\": 10}\n\"workflows\":", 1)
	if err := os.WriteFile(reg, []byte(priced), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestThreadShowCarriesUsagePerStepAndThread(t *testing.T) {
	t.Parallel()
	c := fixtureCLI(t)
	priceFixture(t, c)
	const id, bundle = "06EZHZP3N4J2B8V6Q0T9W1X5Y4", "HEXEJQQQ6EVYJ"
	at := time.Date(2026, 5, 5, 10, 0, 0, 0, time.UTC).UnixMilli()
	writeUsage(t, c.root, bundle, id, `{"ts":1,"thread":"`+id+`","step":1,"source":"role","model":"dashscope/qwen-plus","promptTok`,
		usage.Record{Time: at, Thread: id, Workflow: "demo-flow", Step: 1, Role: "planner", Source: usage.SourceRole, Model: "dashscope/qwen-plus", PromptTokens: 1000, CompletionTokens: 100},
		usage.Record{Time: at, Thread: id, Workflow: "demo-flow", Step: 1, Source: usage.SourceSupervisor, Model: "other/judge", Unknown: true},
		usage.Record{Time: at, Thread: id, Workflow: "demo-flow", Step: 2, Source: usage.SourceSummarizer, Model: "dashscope/qwen-plus", PromptTokens: 500, CompletionTokens: 50},
	)
	var v threadView
	if err := json.Unmarshal([]byte(c.ok("thread", "show", id)), &v); err != nil {
		t.Fatal(err)
	}
	if v.Usage.Calls != 3 || v.Usage.PromptTokens != 1500 || v.Usage.CompletionTokens != 150 || v.Usage.UnknownCalls != 1 || v.Usage.UnpricedCalls != 1 ||
		v.Usage.CostUSD == nil || math.Abs(*v.Usage.CostUSD-(1500*2+150*10)/1e6) > 1e-12 || strings.Join(v.Usage.Models, ",") != "dashscope/qwen-plus,other/judge" {
		t.Fatalf("thread usage = %+v", v.Usage)
	}
	if len(v.Steps) != 1 || v.Steps[0].Usage == nil || v.Steps[0].Usage.Calls != 2 || v.Steps[0].Usage.PromptTokens != 1000 {
		t.Fatalf("step usage = %+v", v.Steps)
	}
	if v.Result == nil || v.Result.Usage == nil || v.Result.Usage.Calls != 1 || v.Result.Usage.PromptTokens != 500 {
		t.Fatalf("end usage = %+v", v.Result)
	}
	// --json prints the same; a thread without records has zero totals and
	// no step usage.
	if a, b := c.ok("thread", "show", id), c.ok("thread", "show", id, "--json"); a != b {
		t.Errorf("--json differs:\n%s\n%s", a, b)
	}
	raw := c.ok("thread", "show", "06E0000000000000000000000C")
	if !strings.Contains(raw, `"usage": {`+"\n"+`    "calls": 0,`) || strings.Count(raw, `"usage"`) != 1 {
		t.Errorf("a thread without calls:\n%s", raw)
	}
	// thread usage <id>: the same numbers as a table, a row per step.
	table := c.ok("thread", "usage", id)
	want := []string{
		"STEP ROLE CALLS PROMPT COMPLETION COST",
		"1 planner 2 1000 100 $0.003+",
		"2 - 1 500 50 $0.0015",
		"TOTAL 3 1500 150 $0.0045+",
	}
	if got := strings.Split(strings.TrimSpace(table), "\n"); len(got) != len(want) {
		t.Fatalf("thread usage %s:\n%s", id, table)
	} else {
		for i := range want {
			if strings.Join(strings.Fields(got[i]), " ") != want[i] {
				t.Fatalf("line %d = %q, want %q\n%s", i, got[i], want[i], table)
			}
		}
	}
	var perStep struct {
		ThreadID string
		Steps    []struct {
			Step         int
			Role         string
			PromptTokens int64
		}
		Total struct{ Calls int }
	}
	if err := json.Unmarshal([]byte(c.ok("thread", "usage", id, "--json")), &perStep); err != nil || perStep.ThreadID != id ||
		len(perStep.Steps) != 2 || perStep.Steps[0].Role != "planner" || perStep.Steps[1].PromptTokens != 500 || perStep.Total.Calls != 3 {
		t.Fatalf("thread usage %s --json = %+v (%v)", id, perStep, err)
	}
	c.fails("--since, --until and --workflow count a machine's threads", "thread", "usage", id, "--since", "1d")
	c.fails("usage takes at most one thread id", "thread", "usage", id, id)
	c.fails("thread not found: NOPE", "thread", "usage", "NOPE")
	c.ok("thread", "rm", id)
	if _, err := os.Stat(usage.Path(storage.Layout{Root: c.root}, bundle, id)); !os.IsNotExist(err) {
		t.Errorf("thread rm left the usage file: %v", err)
	}
}

func TestThreadUsageTotalsPerWorkflowOverARange(t *testing.T) {
	t.Parallel()
	c := fixtureCLI(t)
	priceFixture(t, c)
	day := time.Date(2026, 5, 5, 0, 0, 0, 0, time.Local)
	ms := func(h int) int64 { return day.Add(time.Duration(h) * time.Hour).UnixMilli() }
	writeUsage(t, c.root, "HEXEJQQQ6EVYJ", "T1", "",
		usage.Record{Time: ms(1), Thread: "T1", Workflow: "demo-flow", Step: 1, Source: usage.SourceRole, Model: "dashscope/qwen-plus", PromptTokens: 1_000_000, CompletionTokens: 100_000},
		usage.Record{Time: ms(50), Thread: "T1", Workflow: "demo-flow", Step: 2, Source: usage.SourceRole, Model: "dashscope/qwen-plus", PromptTokens: 7, CompletionTokens: 7})
	writeUsage(t, c.root, "2BMJPQ6YAK3WG", "T2", "",
		usage.Record{Time: ms(2), Thread: "T2", Workflow: "review", Step: 1, Source: usage.SourceRole, Model: "other/m", PromptTokens: 10, CompletionTokens: 1})

	out := c.ok("thread", "usage", "--since", "2026-05-05", "--until", "2026-05-06")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	want := [][]string{
		{"WORKFLOW", "THREADS", "CALLS", "PROMPT", "COMPLETION", "COST"},
		{"demo-flow", "1", "1", "1000000", "100000", "$3.00"},
		{"review", "1", "1", "10", "1", "-"},
		{"TOTAL", "2", "2", "1000010", "100001", "$3.00+"},
	}
	if len(lines) != len(want) {
		t.Fatalf("table:\n%s", out)
	}
	for i, w := range want {
		if strings.Join(strings.Fields(lines[i]), " ") != strings.Join(w, " ") {
			t.Fatalf("line %d = %q, want %q\n%s", i, lines[i], w, out)
		}
	}
	if wide := c.ok("thread", "usage", "-o", "wide"); !strings.Contains(wide, "MODELS") || !strings.Contains(wide, "other/m") {
		t.Errorf("wide:\n%s", wide)
	}
	var v api.UsageReport
	if err := json.Unmarshal([]byte(c.ok("thread", "usage", "--workflow", "demo-flow", "-o", "json")), &v); err != nil {
		t.Fatal(err)
	}
	if v.Since != nil || v.Until != nil || v.Workflow == nil || len(v.Workflows) != 1 || v.Total.Calls != 2 || v.Total.PromptTokens != 1_000_007 {
		t.Fatalf("json = %+v", v)
	}
	if out := c.ok("thread", "usage", "--since", "1h"); out != "(no model calls recorded)\n" {
		t.Errorf("nothing in the last hour: %q", out)
	}
}

func TestThreadUsageRejectsBadFlags(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	for _, args := range [][]string{
		{"--since", "yesterday"}, {"--until", "-3d"}, {"--since", "0h"}, {"--since", "2026-13-01"},
	} {
		c.fails("want a date (2026-03-01), an RFC 3339 time, or an age such as 36h or 7d", append([]string{"thread", "usage"}, args...)...)
	}
	c.fails("--since must be before --until", "thread", "usage", "--since", "2026-05-06", "--until", "2026-05-05")
	c.fails("-o", "thread", "usage", "-o", "yaml")
	c.fails("invalid", "thread", "usage", "--workflow", "../x")
	c.fails("thread not found: extra", "thread", "usage", "extra")
}

func TestParseTimeFlag(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 5, 5, 12, 0, 0, 0, time.UTC)
	cases := map[string]time.Time{
		"":                     {},
		"7d":                   now.Add(-7 * 24 * time.Hour),
		"36h":                  now.Add(-36 * time.Hour),
		"2026-05-01T08:00:00Z": time.Date(2026, 5, 1, 8, 0, 0, 0, time.UTC),
		"2026-05-01":           time.Date(2026, 5, 1, 0, 0, 0, 0, time.Local),
	}
	for in, want := range cases {
		got, err := parseTimeFlag("--since", in, now)
		if err != nil || !got.Equal(want) {
			t.Errorf("%q = %v %v, want %v", in, got, err, want)
		}
	}
}

// setup rewrites the config section: the prices a person wrote survive it.
func TestSetupKeepsPrices(t *testing.T) {
	t.Parallel()
	c := fixtureCLI(t)
	priceFixture(t, c)
	c.ok("setup", "--provider", "openai", "--base-url", "https://api.openai.com/v1", "--api-key", "sk-test", "--default-model", "openai/gpt-4o")
	prices, err := usage.LoadPrices(storage.Layout{Root: c.root})
	if err != nil || prices["dashscope/qwen-plus"] != (registry.Price{Prompt: 2, Completion: 10}) {
		t.Fatalf("prices after setup = %+v, %v", prices, err)
	}
}
