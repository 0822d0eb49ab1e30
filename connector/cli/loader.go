package cli

import (
	"errors"

	"github.com/uncaged/workflow/engine/storage"
	"github.com/uncaged/workflow/engine/workflow"
)

// workflowLoader returns how the engine host loads a bundle by hash.
func (a *app) workflowLoader(l storage.Layout) func(string) (workflow.Workflow, error) {
	return func(hash string) (workflow.Workflow, error) {
		return nil, errors.New("the JavaScript runtime is not wired in yet")
	}
}
