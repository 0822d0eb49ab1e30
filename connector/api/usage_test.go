package api

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/uncaged/workflow/engine/usage"
)

// appendUsage writes records into a thread's usage file as the executor
// would, plus a torn last line.
func appendUsage(t *testing.T, path string, recs ...usage.Record) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, r := range recs {
		line, _ := json.Marshal(r)
		b.Write(line)
		b.WriteByte('\n')
	}
	b.WriteString(`{"ts":1,"step":1,"source":"role","mod`)
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestThreadDetailAndMachineUsage(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	hash := f.register("linear", "linear.esm.js")
	f.priceModel()
	f.startHost()
	id := f.run("linear", "build")
	f.waitStatus(id, "completed")
	now := time.Now().UnixMilli()
	rec := func(step int, source string, prompt, completion int64) usage.Record {
		return usage.Record{Time: now, Thread: id, Workflow: "linear", Step: step, Source: source, Model: "p/m", PromptTokens: prompt, CompletionTokens: completion}
	}
	appendUsage(t, usage.Path(f.l, hash, id), rec(1, usage.SourceRole, 1000, 100), rec(1, usage.SourceExtract, 10, 1),
		rec(3, usage.SourceRole, 5, 5), rec(4, usage.SourceSummarizer, 100, 0))

	var d struct {
		Records []struct {
			Type  string        `json:"type"`
			Usage *usage.Totals `json:"usage"`
		} `json:"records"`
		Usage usage.Totals `json:"usage"`
	}
	f.want(http.MethodGet, "/api/threads/"+id, "", http.StatusOK, &d)
	if d.Usage.Calls != 4 || d.Usage.PromptTokens != 1115 || d.Usage.CompletionTokens != 106 || d.Usage.CostUSD == nil {
		t.Fatalf("thread usage %+v", d.Usage)
	}
	if len(d.Records) != 5 || d.Records[0].Usage != nil || d.Records[1].Usage == nil || d.Records[1].Usage.Calls != 2 ||
		d.Records[2].Usage != nil || d.Records[3].Usage == nil || d.Records[3].Usage.PromptTokens != 5 ||
		d.Records[4].Type != RecordWorkflowResult || d.Records[4].Usage == nil || d.Records[4].Usage.PromptTokens != 100 {
		t.Fatalf("records %+v", d.Records)
	}

	var rep UsageReport
	f.want(http.MethodGet, "/api/usage", "", http.StatusOK, &rep)
	if rep.Since != nil || rep.Workflow != nil || rep.Threads != 1 || len(rep.Workflows) != 1 || rep.Workflows[0].Workflow != "linear" ||
		rep.Workflows[0].Calls != 4 || rep.Total.TotalTokens != 1221 || rep.Total.CostUSD == nil || *rep.Total.CostUSD != (1115+106*2)/1e6 {
		t.Fatalf("report %+v", rep)
	}
	f.want(http.MethodGet, "/api/usage?workflow=other&since=2020-01-01T00:00:00Z", "", http.StatusOK, &rep)
	if rep.Total.Calls != 0 || len(rep.Workflows) != 0 || rep.Workflow == nil || *rep.Workflow != "other" || rep.Since == nil {
		t.Fatalf("another workflow: %+v", rep)
	}
	f.want(http.MethodGet, "/api/usage?until=1000", "", http.StatusOK, &rep)
	if rep.Total.Calls != 0 {
		t.Fatalf("until 1970: %+v", rep)
	}

	f.wantError(http.MethodGet, "/api/usage?since=yesterday", "", http.StatusBadRequest, "since must be an RFC 3339 time or Unix milliseconds")
	f.wantError(http.MethodGet, "/api/usage?until=-5", "", http.StatusBadRequest, "until must be an RFC 3339 time or Unix milliseconds")
	f.wantError(http.MethodGet, "/api/usage?since=2000&until=1000", "", http.StatusBadRequest, "since must be before until")
	f.wantError(http.MethodGet, "/api/usage?workflow=Bad%20Name", "", http.StatusBadRequest, "invalid workflow name")
}
