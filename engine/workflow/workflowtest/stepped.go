// Package workflowtest holds workflows written in Go for tests: threads a
// test moves on itself, step by step, with no bundle, model or timer.
// Only tests import it.
package workflowtest

import (
	"context"
	"fmt"

	"github.com/uncaged/workflow/engine/canonyaml"
	"github.com/uncaged/workflow/engine/workflow"
)

// Stepped is a workflow whose every step, and its end, waits for a token
// on Next: Roles speak in turn (step n's content in the CAS is
// "step n: <role>"), and the token after the last role completes the
// thread, with the summary "every role spoke". A thread
// resumed with steps already taken goes on from the next role.
type Stepped struct {
	Roles []string
	Next  chan struct{}
}

// Descriptor implements workflow.Workflow.
func (s Stepped) Descriptor() workflow.Descriptor { return workflow.Descriptor{} }

// Start implements workflow.Workflow.
func (s Stepped) Start(_ context.Context, tc workflow.ThreadContext, h workflow.Host) (workflow.Run, error) {
	return &steppedRun{f: s, h: h, i: len(tc.Steps)}, nil
}

type steppedRun struct {
	f Stepped
	h workflow.Host
	i int
}

func (r *steppedRun) Next(ctx context.Context) (*workflow.Output, *workflow.Completion, error) {
	select {
	case <-r.f.Next:
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
	if r.i >= len(r.f.Roles) {
		return nil, &workflow.Completion{Summary: "every role spoke"}, nil
	}
	h, err := r.h.CAS().Put(fmt.Sprintf("step %d: %s", r.i+1, r.f.Roles[r.i]))
	if err != nil {
		return nil, nil, err
	}
	r.i++
	return &workflow.Output{Role: r.f.Roles[r.i-1], ContentHash: h, Meta: canonyaml.Map{}, Refs: []string{h}}, nil, nil
}

func (r *steppedRun) Close() error { return nil }
