package host

import (
	"github.com/uncaged/workflow/engine/cas"
	"github.com/uncaged/workflow/engine/threads"
)

// Liveness says what the host's list of running threads means for id.
func Liveness(running map[string]RunningThread, id string) threads.Liveness {
	r, ok := running[id]
	switch {
	case !ok:
		return threads.NotExecuting
	case r.Status == threads.StatusPaused:
		return threads.HeldPaused
	}
	return threads.Executing
}

// ThreadStatus derives a thread's status from its head and from what the
// host (running, keyed by thread id; empty when no host runs) says: or
// threads.StatusDamaged, with the damage, for a head or start that cannot
// back one (threads.ReadStatus).
func ThreadStatus(store *cas.Store, rec threads.Record, running map[string]RunningThread) (threads.Status, *threads.DamageError) {
	return threads.ReadStatus(store, rec, Liveness(running, rec.ThreadID))
}
