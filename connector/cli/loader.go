package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/uncaged/workflow/engine/jsrt"
	"github.com/uncaged/workflow/engine/storage"
	"github.com/uncaged/workflow/engine/workflow"
)

// bundleCache keeps loaded bundles by hash for the life of the process: an
// engine host loads a bundle once, however many threads run it.
type bundleCache struct {
	mu      sync.Mutex
	bundles map[string]*jsrt.Bundle
}

// workflowLoader returns how the engine host loads a bundle by hash.
func (a *app) workflowLoader(l storage.Layout) func(string) (workflow.Workflow, error) {
	cache := &bundleCache{bundles: map[string]*jsrt.Bundle{}}
	return func(hash string) (workflow.Workflow, error) {
		cache.mu.Lock()
		defer cache.mu.Unlock()
		if b, ok := cache.bundles[hash]; ok {
			return b, nil
		}
		path := l.BundleFile(hash)
		src, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("bundle file missing for hash %s", hash)
		}
		b, err := jsrt.Load(src, filepath.Base(path), jsrt.Options{})
		if err != nil {
			return nil, err
		}
		cache.bundles[hash] = b
		return b, nil
	}
}
