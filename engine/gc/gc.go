// Package gc collects the CAS blobs no thread can reach. Roots are the head
// and start of every thread in every bundle's threads.json and history; the
// mark phase follows refs from them and the sweep deletes everything else —
// only once nothing a thread may need has been found untrustworthy
// (judge.go): then it refuses and deletes nothing.
package gc

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/uncaged/workflow/engine/cas"
	"github.com/uncaged/workflow/engine/storage"
)

// Result is what one collection did. Field names and JSON keys are the
// original's.
type Result struct {
	// ScannedThreads counts roots, two per thread (head and start), not
	// threads: the original's quirk, kept because scripts and tests read it.
	ScannedThreads int `json:"scannedThreads"`
	// ActiveRefs is the number of blobs found reachable.
	ActiveRefs     int      `json:"activeRefs"`
	DeletedEntries int      `json:"deletedEntries"`
	DeletedHashes  []string `json:"deletedHashes"`
	// SparedEntries counts the unreachable blobs Options.Grace kept
	// because they were younger than it; absent when none were, so the
	// original's shape is unchanged.
	SparedEntries int `json:"sparedEntries,omitempty"`
}

// String is the line `cas gc` prints.
func (r Result) String() string {
	return fmt.Sprintf("scanned %d threads, %d active refs, deleted %d entries", r.ScannedThreads, r.ActiveRefs, r.DeletedEntries)
}

// Phase names the stage a Progress report is about.
type Phase string

// Phases of a collection.
const (
	PhaseRoots Phase = "roots"
	PhaseMark  Phase = "mark"
	PhaseSweep Phase = "sweep"
)

// Options tunes a collection.
type Options struct {
	// Progress, when set, is called from one goroutine at a modest rate with
	// the phase and a running count (roots found, blobs marked, blobs
	// examined).
	Progress func(phase Phase, n int)
	// Grace spares unreachable blobs younger than this. A running engine
	// stores a step's content a moment before it links it into the chain;
	// callers set a grace period while an engine host runs so a collection
	// never takes such a blob. Zero collects everything unreachable, as
	// the original does.
	Grace time.Duration
}

// Collect runs one mark-and-sweep over the storage root. It sweeps only
// after the judgement every sweep makes (judge.go) found nothing wrong;
// otherwise it returns a *RefusedError (ErrRefused) and deletes nothing.
// Nothing reachable from a root is ever deleted.
//
// The blobs present are listed first, so a blob written during the
// collection is never swept. Refs come from the store's refs index where it
// has them and from the blob itself otherwise, which is what keeps a
// collection over a million blobs from opening every one of them.
func Collect(ctx context.Context, l storage.Layout, store *cas.Store, opts Options) (Result, error) {
	progress := opts.Progress
	if progress == nil {
		progress = func(Phase, int) {}
	}
	began := time.Now()
	present := make(map[string]bool)
	err := store.Each(func(h string) error {
		present[h] = true
		return nil
	})
	if err != nil {
		return Result{}, fmt.Errorf("failed to list cas entries: %w", err)
	}
	c, err := takeCensus(l, nil)
	if err != nil {
		return Result{}, err
	}
	roots := c.roots()
	progress(PhaseRoots, 2*len(c.lines))
	m, marked, count, err := judge(ctx, store, c, roots, present, func(n int) { progress(PhaseMark, n) })
	if err != nil {
		return Result{}, err
	}
	res := Result{ScannedThreads: 2*len(c.lines) + c.asideOnly(), ActiveRefs: count, DeletedHashes: []string{}}
	var garbage []string
	for h := range present {
		if !marked[h].marked {
			garbage = append(garbage, h)
		}
	}
	cutoff := began.Add(-opts.Grace)
	deleted, err := sweep(ctx, store, garbage, func(h string) (bool, error) {
		if opts.Grace <= 0 {
			return true, store.Delete(h)
		}
		// Not a stat and a Delete: a thread may store the blob again
		// between the two, and must find it there afterwards.
		return store.DeleteUnlessNewer(h, cutoff)
	}, func(n int) { progress(PhaseSweep, n) })
	res.DeletedHashes = append(res.DeletedHashes, deleted...)
	if err != nil {
		return res, err
	}
	if opts.Grace > 0 {
		// The sweep went through all the garbage; what it did not delete,
		// the grace period spared (or another process removed first).
		res.SparedEntries = len(garbage) - len(deleted)
	}
	progress(PhaseSweep, len(present))
	sort.Strings(res.DeletedHashes)
	res.DeletedEntries = len(res.DeletedHashes)
	// Keep the index to what survived, plus what this collection learned.
	survivors := make(map[string][]string, count)
	for h, st := range marked {
		if !st.marked {
			continue
		}
		if refs, ok := m.index[h]; ok {
			survivors[h] = refs
		} else if refs, ok := m.learned[h]; ok {
			survivors[h] = refs
		}
	}
	if err := store.RewriteRefsIndex(survivors, res.DeletedHashes); err != nil {
		return res, fmt.Errorf("rewrite refs index: %w", err)
	}
	return res, nil
}

// judge makes the judgement every sweep makes (judge.go) over a census:
// it walks from the roots and returns what it met, or a *RefusedError
// naming everything that stops a sweep. present is what the CAS held
// before the census (nil: not listed).
func judge(ctx context.Context, store *cas.Store, c *census, roots []root, present map[string]bool, onMarked func(int)) (*marker, map[string]state, int, error) {
	index, err := store.RefsIndex()
	if err != nil {
		// A cache that cannot be read: the blobs are read instead.
		index = map[string][]string{}
	}
	m := &marker{store: store, index: index, present: present, readRoots: true, learned: map[string][]string{}, rootRefs: map[string][]string{}}
	seen, count, err := m.reachable(ctx, roots, onMarked)
	if err != nil {
		return nil, nil, 0, err
	}
	if findings := append(slices.Clone(c.findings), m.findings...); len(findings) > 0 {
		return nil, nil, 0, &RefusedError{Findings: findings}
	}
	return m, seen, count, nil
}

// sweep deletes the garbage with a few goroutines, since each unlink waits
// on the filesystem; remove deletes one blob and says whether it did. It
// returns what it deleted, also when it stops on an error or cancellation.
func sweep(ctx context.Context, store *cas.Store, garbage []string, remove func(string) (bool, error), progress func(int)) ([]string, error) {
	var (
		mu       sync.Mutex
		deleted  []string
		firstErr error
		next     int
		wg       sync.WaitGroup
	)
	take := func() (string, bool) {
		mu.Lock()
		defer mu.Unlock()
		if firstErr != nil || next >= len(garbage) {
			return "", false
		}
		if next%4096 == 0 {
			if err := ctx.Err(); err != nil {
				firstErr = err
				return "", false
			}
			progress(next)
		}
		next++
		return garbage[next-1], true
	}
	for w := 0; w < runtime.GOMAXPROCS(0)*4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for h, ok := take(); ok; h, ok = take() {
				gone, err := remove(h)
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = fmt.Errorf("failed to delete cas %s: %w", h, err)
				} else if err == nil && gone {
					deleted = append(deleted, h)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return deleted, firstErr
}
