package host

import (
	"path/filepath"

	"github.com/uncaged/workflow/engine/cas"
	"github.com/uncaged/workflow/engine/storage"
	"github.com/uncaged/workflow/engine/threads"
)

// Liveness says who runs thread rec of root l: the host, whose list of
// running threads (by id; empty when no host runs) says whether it runs
// the thread, holds it paused, is pausing it or waits with it for a
// person; else the original engine's worker (RunningElsewhere); else, when
// its question record says so, it waits for a person with no host holding
// it; else nobody.
func Liveness(l storage.Layout, running map[string]RunningThread, rec threads.Record) threads.Liveness {
	r, ok := running[rec.ThreadID]
	if !ok {
		if live := elsewhere(l, rec); live != threads.NotExecuting {
			return live
		}
		// A wait for a person outlives the host that asked: the
		// question's record says the thread is waiting, not interrupted.
		if rec.Source == threads.SourceActive && WaitsAt(l, rec.BundleHash, rec.ThreadID, rec.Head) {
			return threads.AwaitingAnswer
		}
		return threads.NotExecuting
	}
	switch r.Status {
	case threads.StatusPaused:
		return threads.HeldPaused
	case threads.StatusPausing:
		return threads.Pausing
	case threads.StatusWaiting:
		return threads.AwaitingAnswer
	}
	return threads.Executing
}

// ThreadStatus derives a thread's status from its head, from what the
// host (running, keyed by thread id; empty when no host runs) says, and
// from the original engine's running marker and worker: or
// threads.StatusDamaged, with the damage, for a head or start that cannot
// back one (threads.ReadStatus). store is the root's CAS (Layout.CASDir),
// whose root holds the original's files.
func ThreadStatus(store *cas.Store, rec threads.Record, running map[string]RunningThread) (threads.Status, *threads.DamageError) {
	l := storage.Layout{Root: filepath.Dir(store.Dir())}
	return threads.ReadStatus(store, rec, Liveness(l, running, rec))
}
