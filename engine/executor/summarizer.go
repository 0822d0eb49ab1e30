package executor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/uncaged/workflow/engine/agents/llm"
	"github.com/uncaged/workflow/engine/registry"
	"github.com/uncaged/workflow/engine/usage"
)

// TagSummarizer tags the summarizer's debug-log lines.
const TagSummarizer = "S5DT2WQH"

const (
	summarizerRecentSteps = 20
	summarizerMaxRounds   = 4
	summarizerSchema      = `{"title":"workflow_summary",` +
		`"description":"A short summary of what the workflow run did and how it ended.",` +
		`"type":"object","properties":{"summary":{"type":"string","minLength":1}},"required":["summary"]}`
)

// summarize returns the summary the thread ends with: the summarizer
// model's when it is on and succeeds, else the workflow's own.
func (r *run) summarize(ctx context.Context, workflowSummary string) string {
	_, scene := OversightScenes(r.over.cfg)
	model, on, err := r.oversightModel(scene)
	if !on {
		return workflowSummary
	}
	summary := ""
	if err == nil {
		summary, err = r.askSummarizer(ctx, model, workflowSummary)
	}
	if err != nil {
		if ctx.Err() == nil {
			r.log.Write(TagSummarizer, "summarizer failed, keeping the workflow's summary: "+err.Error())
		}
		return workflowSummary
	}
	r.log.Write(TagSummarizer, "summarizer: "+summary)
	return summary
}

func (r *run) askSummarizer(ctx context.Context, model registry.Model, workflowSummary string) (string, error) {
	const tool = "workflow_summary"
	ctx, cancel := context.WithTimeout(ctx, oversightTimeout)
	defer cancel()
	// Its calls count towards the __end__ step, the one after the last role.
	raw, err := llm.React(ctx, r.client(model, usage.SourceSummarizer, r.nextStep), llm.Request{
		System: "You summarize a finished multi-step workflow run for the person who started it. " +
			"Each step's output is a content node in content-addressed storage; use cas_get with a step's contentHash when you need its details. " +
			"Say what was done and how it ended, in a few sentences. Call the " + tool + ` tool with JSON arguments matching the schema, or reply with only a JSON object such as {"summary":"..."}.`,
		User:      r.summarizerInput(workflowSummary),
		Tools:     []llm.Tool{llm.CasGetTool(r.e.CAS)},
		Output:    llm.Output{Schema: json.RawMessage(summarizerSchema)},
		MaxRounds: summarizerMaxRounds,
		Log:       r.log.Write,
	})
	if err != nil {
		return "", err
	}
	var s struct {
		Summary string `json:"summary"`
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", fmt.Errorf("summary: %w", err)
	}
	if strings.TrimSpace(s.Summary) == "" {
		return "", errors.New("summary: empty")
	}
	return strings.TrimSpace(s.Summary), nil
}

// summarizerInput is the task, the workflow's own summary and the last
// steps by content hash.
func (r *run) summarizerInput(workflowSummary string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Original task:\n%s\n\nThe workflow ended with: %s\n\nSteps (oldest first):\n", r.t.Prompt, workflowSummary)
	steps := lastSteps(r.over.steps, summarizerRecentSteps)
	if len(steps) == 0 {
		b.WriteString("(none)")
	}
	first := len(r.over.steps) - len(steps) + 1
	for i, s := range steps {
		if i > 0 {
			b.WriteByte('\n')
		}
		fmt.Fprintf(&b, "%d. [%s] contentHash: %s", first+i, s.Role, s.ContentHash)
	}
	return b.String()
}
