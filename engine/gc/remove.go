package gc

import (
	"context"
	"errors"
	"io/fs"
	"os"

	"github.com/uncaged/workflow/engine/cas"
	"github.com/uncaged/workflow/engine/storage"
	"github.com/uncaged/workflow/engine/threads"
	"github.com/uncaged/workflow/engine/usage"
)

// RemoveOptions tunes RemoveThread.
type RemoveOptions struct {
	// Collect tunes the collection that follows the removal.
	Collect Options
	// RemoveLines, when set, removes the thread's index and history
	// lines in place of threads.RemoveLines: the engine host's
	// host.RemoveLines, which refuses while the thread runs or is paused
	// (or stops it first) and keeps it from starting again until its
	// lines are gone.
	RemoveLines func(rec threads.Record) error
	// Warn is told about the thread's debug and usage logs that could not
	// be removed (nil: ignored).
	Warn func(error)
}

// ErrNotRemoved is matched by every RemoveThread error returned before
// the thread's lines changed: the thread is still there, whole.
var ErrNotRemoved = errors.New("the thread was not removed")

// notRemovedError is an error that left the thread in place.
type notRemovedError struct{ err error }

func (e notRemovedError) Error() string        { return e.err.Error() }
func (e notRemovedError) Unwrap() error        { return e.err }
func (e notRemovedError) Is(target error) bool { return target == ErrNotRemoved }

// RemoveThread removes a thread — its lines in threads.json and history,
// its debug and usage logs and the original's running marker — and then
// collects what only it reached.
//
// Before it changes anything it makes the judgement the collection will
// make (judge.go), leaving the thread out: damage anywhere else refuses the
// removal (ErrRefused and ErrNotRemoved), so a refusal changes nothing. The
// thread's own damage does not: removing a thread whose nodes are gone is
// how a person gets rid of it. A collection that refuses afterwards (the
// root changed meanwhile) leaves the thread removed and its nodes in place.
func RemoveThread(ctx context.Context, l storage.Layout, store *cas.Store, rec threads.Record, opts RemoveOptions) (Result, error) {
	notRemoved := func(err error) error { return notRemovedError{err} }
	c, err := takeCensus(l, &rec)
	if err != nil {
		return Result{}, notRemoved(err)
	}
	if _, _, _, err := judge(ctx, store, c, c.roots(), nil, nil); err != nil {
		return Result{}, notRemoved(err)
	}
	// Both indexes, whatever the record said: the thread may have moved
	// to history since it was resolved.
	if opts.RemoveLines != nil {
		err = opts.RemoveLines(rec)
	} else {
		_, err = threads.RemoveLines(l.BundleDir(rec.BundleHash), rec.ThreadID)
	}
	if err != nil {
		return Result{}, notRemoved(err)
	}
	// The lines go first: a log found without them makes a collection
	// refuse (a lost line), never the other way round.
	for _, p := range []string{l.InfoLog(rec.BundleHash, rec.ThreadID), usage.Path(l, rec.BundleHash, rec.ThreadID), l.RunningMarker(rec.BundleHash, rec.ThreadID), l.QuestionFile(rec.BundleHash, rec.ThreadID)} {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) && opts.Warn != nil {
			opts.Warn(err)
		}
	}
	return Collect(ctx, l, store, opts.Collect)
}
