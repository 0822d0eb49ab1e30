package agents

import (
	"context"
	"errors"
)

// newModelAgent returns the llm or react agent for spec.
// TODO(helper-models): replaced by the real implementation.
func newModelAgent(spec Spec) (Agent, error) { return stubAgent{spec.Kind}, nil }

type stubAgent struct{ kind string }

func (s stubAgent) Run(context.Context, Call) (Result, error) {
	return Result{}, errors.New("agents: " + s.kind + " agents are not implemented yet")
}
