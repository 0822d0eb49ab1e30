package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"github.com/uncaged/workflow/engine/jsrt"
	"github.com/uncaged/workflow/engine/storage"
	"github.com/uncaged/workflow/engine/workflow"
	"github.com/uncaged/workflow/engine/yamlwf"
)

// bundleCache keeps loaded workflows by hash for the life of the process: an
// engine host loads a workflow once, however many threads run it.
type bundleCache struct {
	mu      sync.Mutex
	bundles map[string]workflow.Workflow
}

// workflowLoader returns how the engine host loads a workflow by hash: a
// YAML workflow when bundles/<hash>.workflow.yaml exists, else the
// JavaScript bundle bundles/<hash>.esm.js.
func (a *app) workflowLoader(l storage.Layout) func(string) (workflow.Workflow, error) {
	cache := &bundleCache{bundles: map[string]workflow.Workflow{}}
	return func(hash string) (workflow.Workflow, error) {
		cache.mu.Lock()
		defer cache.mu.Unlock()
		if b, ok := cache.bundles[hash]; ok {
			return b, nil
		}
		var wf workflow.Workflow
		src, err := os.ReadFile(l.YAMLWorkflowFile(hash))
		switch {
		case err == nil:
			y, err := yamlwf.Load(src, yamlwf.Options{})
			if err != nil {
				return nil, fmt.Errorf("YAML workflow %s: %w", hash, err)
			}
			wf = y
		case errors.Is(err, fs.ErrNotExist):
			path := l.BundleFile(hash)
			src, err := os.ReadFile(path)
			if err != nil {
				return nil, fmt.Errorf("bundle file missing for hash %s", hash)
			}
			b, err := jsrt.Load(src, filepath.Base(path), jsrt.Options{})
			if err != nil {
				return nil, err
			}
			wf = b
		default:
			return nil, err
		}
		cache.bundles[hash] = wf
		return wf, nil
	}
}
