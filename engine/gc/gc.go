// Package gc collects the CAS blobs no thread can reach. Roots are the head
// and start of every thread in every bundle's threads.json and history; the
// mark phase follows refs from them and the sweep deletes everything else.
package gc

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sort"
	"sync"
	"time"

	"github.com/uncaged/workflow/engine/cas"
	"github.com/uncaged/workflow/engine/ids"
	"github.com/uncaged/workflow/engine/node"
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

// Collect runs one mark-and-sweep over the storage root. Nothing reachable
// from a root is ever deleted; a root or ref whose blob is missing is skipped.
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
	roots, err := Roots(l)
	if err != nil {
		return Result{}, err
	}
	progress(PhaseRoots, len(roots))
	index, err := store.RefsIndex()
	if err != nil {
		return Result{}, err
	}
	m := &marker{store: store, index: index, present: present, learned: map[string][]string{}}
	marked, count, err := m.reachable(ctx, roots, func(n int) { progress(PhaseMark, n) })
	if err != nil {
		return Result{}, err
	}
	res := Result{ScannedThreads: len(roots), ActiveRefs: count, DeletedHashes: []string{}}
	var garbage []string
	for h := range present {
		if !marked[h] {
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
	for h, ok := range marked {
		if !ok {
			continue
		}
		if refs, ok := index[h]; ok {
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

// Reachable returns every stored hash reachable from roots (the keys whose
// value is true; false marks a hash that was referenced but has no blob) and
// their count. It reads every blob it visits; Collect uses the refs index.
func Reachable(ctx context.Context, store *cas.Store, roots []string, onMarked func(int)) (map[string]bool, int, error) {
	m := &marker{store: store, learned: map[string][]string{}}
	return m.reachable(ctx, roots, onMarked)
}

// marker walks refs from roots.
type marker struct {
	store   *cas.Store
	index   map[string][]string // refs known without reading the blob
	present map[string]bool     // blobs listed before marking (nil: unknown)
	learned map[string][]string // refs read from blobs the index lacked
}

func (m *marker) reachable(ctx context.Context, roots []string, onMarked func(int)) (map[string]bool, int, error) {
	// seen maps every hash ever queued to whether its blob exists; one map
	// serves as both the visited set and the mark set.
	seen := make(map[string]bool, len(roots))
	var frontier []string
	// enqueue keeps hashes in canonical form, so the sweep (which sees file
	// names) recognises them; a ref that is no hash names no blob.
	enqueue := func(list []string, r string) []string {
		h := r
		if !ids.IsHash(h) {
			var err error
			if h, err = ids.ParseHash(r); err != nil {
				return list
			}
		}
		if _, ok := seen[h]; ok {
			return list
		}
		seen[h] = false
		return append(list, h)
	}
	for _, r := range roots {
		frontier = enqueue(frontier, r)
	}
	workers := runtime.GOMAXPROCS(0) * 4
	marked := 0
	for len(frontier) > 0 {
		if err := ctx.Err(); err != nil {
			return nil, 0, err
		}
		// Hashes the index knows only need to exist; the rest are read.
		var toRead []string
		var next []string
		for _, h := range frontier {
			refs, known := m.index[h]
			if !known {
				toRead = append(toRead, h)
				continue
			}
			if !m.present[h] && !m.exists(h) {
				continue
			}
			seen[h] = true
			marked++
			for _, r := range refs {
				next = enqueue(next, r)
			}
		}
		refs, present, err := readLevel(m.store, toRead, workers)
		if err != nil {
			return nil, 0, err
		}
		for i, h := range toRead {
			if !present[i] {
				continue
			}
			seen[h] = true
			marked++
			if allHashes(refs[i]) {
				m.learned[h] = refs[i]
			}
			for _, r := range refs[i] {
				next = enqueue(next, r)
			}
		}
		if onMarked != nil {
			onMarked(marked)
		}
		frontier = next
	}
	return seen, marked, nil
}

func (m *marker) exists(h string) bool {
	ok, err := m.store.Exists(h)
	return err == nil && ok
}

func allHashes(refs []string) bool {
	for _, r := range refs {
		if !ids.IsHash(r) {
			return false
		}
	}
	return true
}

// readLevel reads the refs of every hash in level concurrently.
func readLevel(store *cas.Store, level []string, workers int) ([][]string, []bool, error) {
	refs := make([][]string, len(level))
	present := make([]bool, len(level))
	if workers > len(level) {
		workers = len(level)
	}
	var (
		wg       sync.WaitGroup
		next     int
		mu       sync.Mutex
		firstErr error
	)
	take := func() int {
		mu.Lock()
		defer mu.Unlock()
		if firstErr != nil || next >= len(level) {
			return -1
		}
		next++
		return next - 1
	}
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var buf []byte
			for i := take(); i >= 0; i = take() {
				b, err := store.ReadInto(level[i], buf)
				buf = b
				if errors.Is(err, cas.ErrNotFound) {
					continue
				}
				if err != nil {
					// An unreadable blob must stop the collection before it
					// sweeps: what it points to is unknown.
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					return
				}
				present[i] = true
				refs[i] = node.RefsOf(b)
			}
		}()
	}
	wg.Wait()
	return refs, present, firstErr
}
