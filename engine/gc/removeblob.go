package gc

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/uncaged/workflow/engine/cas"
	"github.com/uncaged/workflow/engine/storage"
)

// ErrNeeded is matched by RemoveBlob's refusal of a blob some thread
// still reaches.
var ErrNeeded = errors.New("a thread still needs this cas entry")

// RemoveBlob deletes one blob, only when nothing any index names can
// reach it: the same judgement as a collection (judge.go) is made first,
// and a blob a thread's chain reaches is refused (ErrNeeded), as is any
// blob when the root is damaged (ErrRefused: what is needed cannot be
// told). With opts.Grace set (an engine host runs), a blob younger than
// the grace is spared too, since a running step stores its content a
// moment before it links it. It reports whether the blob was deleted
// (false and nil: it was not there, or the grace spared it).
func RemoveBlob(ctx context.Context, l storage.Layout, store *cas.Store, h string, opts Options) (bool, error) {
	began := time.Now()
	c, err := takeCensus(l, nil)
	if err != nil {
		return false, err
	}
	_, marked, _, err := judge(ctx, store, c, c.roots(), nil, nil)
	if err != nil {
		return false, err
	}
	if marked[h].marked {
		return false, fmt.Errorf("cas entry %s was not removed: %w (remove the thread with `thread rm`; `cas gc` then takes what only it reached)", h, ErrNeeded)
	}
	if opts.Grace > 0 {
		return store.DeleteUnlessNewer(h, began.Add(-opts.Grace))
	}
	if err := store.Delete(h); err != nil {
		return false, err
	}
	return true, nil
}
