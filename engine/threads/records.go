package threads

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/uncaged/workflow/engine/node"
	"github.com/uncaged/workflow/engine/storage"
)

// Source says which index a thread record came from.
type Source string

// Sources of a record.
const (
	SourceActive  Source = "active"
	SourceHistory Source = "history"
)

// ErrNotFound is returned when no index knows a thread.
var ErrNotFound = errors.New("thread not found")

// Record is what the indexes know about one thread.
type Record struct {
	ThreadID   string `json:"threadId"`
	BundleHash string `json:"bundleHash"`
	Head       string `json:"head"`
	Start      string `json:"start"`
	Source     Source `json:"source"`
	// UpdatedAt is updatedAt for an active thread and completedAt for a
	// finished one (ms since the epoch).
	UpdatedAt int64 `json:"updatedAt"`
	// Path is the threads.json or history file the record was read from,
	// and Line the 1-based line of a history line (0 for an index entry):
	// where a head that cannot back a status is named (ReadStatus). Both
	// are empty on a record that was made rather than read.
	Path string `json:"-"`
	Line int    `json:"-"`
}

// BundleHashes lists the bundle directories under bundles/, sorted. Every
// directory counts, whatever its name, so nothing a foreign writer made is
// overlooked by GC; so does a symbolic link to one, read through as the
// directory it points to. So do a link that leads nowhere (to nothing, a
// loop) and anything else without a dot in its name (bundle files all
// have one: <hash>.esm.js, <hash>.yaml, ...): every reader of the bundle
// then reports it as damaged rather than skipping what it may have held.
// Every lister of threads — listings, GC, doctor — starts here, so they
// agree on which bundles exist.
//
// A bundles/ that is there but cannot be listed is an error; so is one
// that is a link to nothing.
func BundleHashes(l storage.Layout) ([]string, error) {
	dir := l.BundlesDir()
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		if p := dirProblem(dir); p != "" {
			return nil, fmt.Errorf("the bundles directory %s %s", dir, p)
		}
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		switch {
		case e.IsDir(), !strings.Contains(e.Name(), "."):
			out = append(out, e.Name())
		case e.Type()&fs.ModeSymlink != 0:
			if st, err := os.Stat(filepath.Join(dir, e.Name())); err != nil || st.IsDir() {
				out = append(out, e.Name())
			}
		}
	}
	sort.Strings(out)
	return out, nil
}

// Resolve finds a thread by id: first in every active index, then in every
// history, as the original does. Damaged files are searched as far as they
// can be read; when the thread is not found and some file was damaged, the
// error says so (it matches both ErrNotFound and ErrDamaged), since that
// file may be what names the thread.
func Resolve(l storage.Layout, id string) (Record, error) {
	bundles, err := BundleHashes(l)
	if err != nil {
		return Record{}, err
	}
	var damaged []*DamageError
	for _, h := range bundles {
		idx, d, err := ReadIndexTolerant(l.BundleDir(h))
		if err != nil {
			return Record{}, err
		}
		if d != nil {
			damaged = append(damaged, d)
		}
		if e, ok := idx[id]; ok {
			return Record{ThreadID: id, BundleHash: h, Head: e.Head, Start: e.Start, Source: SourceActive, UpdatedAt: e.UpdatedAt, Path: IndexFile(l.BundleDir(h))}, nil
		}
	}
	errStop := errors.New("stop")
	for _, h := range bundles {
		var found *Record
		err := eachHistory(l.BundleDir(h), func(e HistoryEntry, path string, line int) error {
			if e.ThreadID == id {
				found = &Record{ThreadID: id, BundleHash: h, Head: e.Head, Start: e.Start, Source: SourceHistory, UpdatedAt: e.CompletedAt, Path: path, Line: line}
				return errStop
			}
			return nil
		}, func(d *DamageError) error {
			damaged = append(damaged, d)
			return nil
		}, nil)
		if found != nil {
			return *found, nil
		}
		if err != nil {
			return Record{}, err
		}
	}
	if len(damaged) > 0 {
		return Record{}, fmt.Errorf("%w: %s; a damaged file may name it:\n%w", ErrNotFound, id, joinDamage(damaged))
	}
	return Record{}, fmt.Errorf("%w: %s", ErrNotFound, id)
}

// List returns every thread of the storage root, sorted by bundle hash then
// thread id. A thread caught between its history append and its index
// removal is listed once, as finished. Bundles are read in parallel. Any
// damaged index or history file makes it fail (ErrDamaged): its callers
// need every thread; ListTolerant is for those who show what they can.
func List(l storage.Layout) ([]Record, error) {
	recs, damaged, err := ListTolerant(l)
	if err != nil {
		return nil, err
	}
	if err := joinDamage(damaged); err != nil {
		return nil, err
	}
	return recs, nil
}

// ListTolerant is List that reads past damage: the threads it could read,
// and every damaged place it found (in bundle order).
func ListTolerant(l storage.Layout) ([]Record, []*DamageError, error) {
	bundles, err := BundleHashes(l)
	if err != nil {
		return nil, nil, err
	}
	perBundle := make([][]Record, len(bundles))
	damagedPer := make([][]*DamageError, len(bundles))
	errs := make([]error, len(bundles))
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	for i, h := range bundles {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			perBundle[i], damagedPer[i], errs[i] = listBundle(l, h)
		}()
	}
	wg.Wait()
	total := 0
	var damaged []*DamageError
	for i := range perBundle {
		if errs[i] != nil {
			return nil, nil, errs[i]
		}
		total += len(perBundle[i])
		damaged = append(damaged, damagedPer[i]...)
	}
	out := make([]Record, 0, total)
	for _, recs := range perBundle {
		out = append(out, recs...)
	}
	return out, damaged, nil
}

// ListBundle returns the threads of one bundle, sorted by thread id, or an
// ErrDamaged error when one of its files is damaged.
func ListBundle(l storage.Layout, bundleHash string) ([]Record, error) {
	recs, damaged, err := listBundle(l, bundleHash)
	if err != nil {
		return nil, err
	}
	if err := joinDamage(damaged); err != nil {
		return nil, err
	}
	return recs, nil
}

// ListBundleTolerant is ListBundle that reads past damage, as ListTolerant.
func ListBundleTolerant(l storage.Layout, bundleHash string) ([]Record, []*DamageError, error) {
	return listBundle(l, bundleHash)
}

func listBundle(l storage.Layout, h string) ([]Record, []*DamageError, error) {
	var damaged []*DamageError
	var recs []Record
	active := map[string]Record{}
	err := ScanBundle(l, h, BundleVisitor{
		Line: func(ln Line) error {
			if ln.Source == SourceActive {
				active[ln.ThreadID] = ln.Record
				return nil
			}
			// A thread in both indexes is listed once, as finished.
			delete(active, ln.ThreadID)
			recs = append(recs, ln.Record)
			return nil
		},
		Damaged: func(d *DamageError) { damaged = append(damaged, d) },
	})
	if err != nil {
		return nil, nil, err
	}
	for _, r := range active {
		recs = append(recs, r)
	}
	return sortedUnique(recs), damaged, nil
}

// sortedUnique orders records by thread id, keeping the first record of an
// id. It sorts small (id, position) keys instead of moving whole records,
// which matters at a hundred thousand threads.
func sortedUnique(recs []Record) []Record {
	type key struct {
		id  string
		pos int32
	}
	keys := make([]key, len(recs))
	for i := range recs {
		keys[i] = key{recs[i].ThreadID, int32(i)}
	}
	slices.SortFunc(keys, func(a, b key) int {
		if c := strings.Compare(a.id, b.id); c != 0 {
			return c
		}
		return int(a.pos - b.pos)
	})
	out := make([]Record, 0, len(recs))
	for i, k := range keys {
		if i > 0 && keys[i-1].id == k.id {
			continue
		}
		out = append(out, recs[k.pos])
	}
	return out
}

// Latest returns the most recently updated thread: the largest updatedAt or
// completedAt, ties going to the larger "bundleHash/threadId".
func Latest(l storage.Layout) (Record, error) {
	recs, err := List(l)
	if err != nil {
		return Record{}, err
	}
	if len(recs) == 0 {
		return Record{}, fmt.Errorf("%w: no threads found", ErrNotFound)
	}
	best := recs[0]
	for _, r := range recs[1:] {
		if r.UpdatedAt > best.UpdatedAt || (r.UpdatedAt == best.UpdatedAt && r.BundleHash+"/"+r.ThreadID > best.BundleHash+"/"+best.ThreadID) {
			best = r
		}
	}
	return best, nil
}

// Status is a thread's state as people see it.
type Status string

// Thread statuses.
const (
	StatusRunning Status = "running"
	// StatusPausing is a thread asked to pause while a role runs: it goes
	// on until that role's step is written, and is paused only then.
	StatusPausing Status = "pausing"
	StatusPaused  Status = "paused"
	// StatusWaiting is a thread at a role a person plays (agent type
	// human), waiting for that person's answer (package questions).
	StatusWaiting     Status = "waiting"
	StatusCompleted   Status = "completed"
	StatusFailed      Status = "failed"
	StatusKilled      Status = "killed"
	StatusInterrupted Status = "interrupted"
	// StatusDamaged stands where a status would for a thread whose line
	// names a head or start that cannot back one (ReadStatus): it is no
	// status of the thread, but what is known instead of one.
	StatusDamaged Status = "damaged"
)

// ReturnCodeKilled is the return code of a killed or aborted thread.
const ReturnCodeKilled = 130

// Liveness is what the engine host says about an unfinished thread.
type Liveness int

// Liveness values.
const (
	// NotExecuting: no host is running the thread (it was interrupted).
	NotExecuting Liveness = iota
	// Executing: a host is running it now.
	Executing
	// HeldPaused: a host holds it paused between steps.
	HeldPaused
	// Pausing: a host runs it and was asked to pause; the role in flight
	// finishes its step first.
	Pausing
	// ExecutingElsewhere: the original engine's worker runs it (its
	// running marker and a live worker say so).
	ExecutingElsewhere
	// AwaitingAnswer: it waits at a human role for a person's answer,
	// whether a host holds it or its wait outlived the host that asked.
	AwaitingAnswer
)

// DeriveStatus decides a thread's status. end is its head when the head is
// an __end__ state (nil otherwise). An __end__ decides by return code; a
// history row without one is completed; an active thread is whatever its host
// (or the original engine's worker) says, and interrupted when none runs it.
func DeriveStatus(source Source, end *node.State, live Liveness) Status {
	if end != nil {
		switch end.ReturnCode() {
		case 0:
			return StatusCompleted
		case ReturnCodeKilled:
			return StatusKilled
		default:
			return StatusFailed
		}
	}
	if source == SourceHistory {
		return StatusCompleted
	}
	switch live {
	case Executing, ExecutingElsewhere:
		return StatusRunning
	case Pausing:
		return StatusPausing
	case HeldPaused:
		return StatusPaused
	case AwaitingAnswer:
		return StatusWaiting
	}
	return StatusInterrupted
}
