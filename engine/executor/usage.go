package executor

import (
	"fmt"

	"github.com/uncaged/workflow/engine/agents"
	"github.com/uncaged/workflow/engine/agents/llm"
	"github.com/uncaged/workflow/engine/registry"
	"github.com/uncaged/workflow/engine/usage"
)

// recordCall appends one model call to the thread's usage file (package
// usage). Like the debug log it never stops the thread: a record that
// cannot be written is lost, and the debug log says so.
func (r *run) recordCall(source, role string, step int, model registry.Model, u llm.Usage) {
	ref := model.Ref
	if ref == "" {
		ref = model.Model
	}
	rec := usage.Record{
		Time: r.e.now().UnixMilli(), Thread: r.t.ID, Workflow: r.t.WorkflowName, Step: step, Role: role,
		Source: source, Model: ref, PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens, Unknown: !u.Reported,
	}
	if err := NewDebugLog(usage.Path(r.e.Layout, r.t.BundleHash, r.t.ID), r.e.now).Append(rec); err != nil {
		r.log.Write(TagError, fmt.Sprintf("thread %s: the usage of a %s model call was not recorded: %v", r.t.ID, source, err))
	}
}

// RecordModelCall implements agents.UsageRecorder: a call an llm or react
// agent made for role, which belongs to the step being worked on.
func (r *run) RecordModelCall(role string, model registry.Model, u llm.Usage) {
	r.recordCall(usage.SourceRole, role, r.nextStep(), model, u)
}

// client is a model client logging to the thread's debug log whose calls
// are recorded under source, at the step step gives when each returns.
func (r *run) client(model registry.Model, source string, step func() int) *llm.Client {
	return llm.New(model, llm.Options{Log: r.log.Write, OnUsage: func(u llm.Usage) {
		r.recordCall(source, "", step(), model, u)
	}})
}

// lastStep is the place of the last role step written (0: none yet).
func (r *run) lastStep() int { return int(r.over.stepCount.Load()) }

// nextStep is the place of the step being worked on: the next role step,
// or the __end__ once the workflow is done.
func (r *run) nextStep() int { return r.lastStep() + 1 }

var _ agents.UsageRecorder = (*run)(nil)

// extractClient is the extractor's client: its calls count towards the
// step being worked on (the extraction is part of making it).
func (r *run) extractClient(model registry.Model) *llm.Client {
	return r.client(model, usage.SourceExtract, r.nextStep)
}
