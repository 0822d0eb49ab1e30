package host

import (
	"path/filepath"
	"sync"

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

// A Sighting is the host's word on which threads run, taken before the
// thread records it judges were read. The rule it keeps: a status is one
// the thread had while its records were read. The host is asked first, so
// a status is never ahead of the records — a pause that took effect after
// the read would name a step the records lack, and the host lets go of a
// thread only after its last record is written. A thread the first answer
// lacks but whose records say it is active may have begun in between (the
// host lists a new thread before writing its records): the host is asked
// once more, and such a thread reads as running, the status it had when
// its records were read.
//
// A Sighting is safe for concurrent use.
type Sighting struct {
	ask    func() (map[string]RunningThread, error)
	before map[string]RunningThread
	err    error

	mu       sync.Mutex // held while the host is asked again
	asked    bool
	after    map[string]RunningThread
	afterErr error
}

// Sight asks the host which threads run (ask: keyed by thread id; nil
// when no host can run threads), before the records to judge are read.
func Sight(ask func() (map[string]RunningThread, error)) *Sighting {
	s := &Sighting{ask: ask}
	s.before, s.err = s.query()
	return s
}

func (s *Sighting) query() (map[string]RunningThread, error) {
	if s.ask == nil {
		return nil, nil
	}
	return s.ask()
}

// Err reports an answer the host did not give: the threads it may run
// read as not running.
func (s *Sighting) Err() error {
	if s.err != nil {
		return s.err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.afterErr
}

// askedAgain is the host's second answer, asked for the first time it is
// needed.
func (s *Sighting) askedAgain() map[string]RunningThread {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.asked {
		s.asked = true
		s.after, s.afterErr = s.query()
	}
	return s.after
}

// Running is the host's answer, by thread id.
func (s *Sighting) Running() map[string]RunningThread { return s.before }

// running is the host's word on rec, as a map Liveness reads.
func (s *Sighting) running(rec threads.Record) map[string]RunningThread {
	if _, ok := s.before[rec.ThreadID]; ok || rec.Source != threads.SourceActive {
		return s.before
	}
	r, ok := s.askedAgain()[rec.ThreadID]
	if !ok {
		return s.before
	}
	// Begun, or resumed, between the two answers: whatever the host says
	// it does with the thread now may be past its records.
	r.Status = threads.StatusRunning
	return map[string]RunningThread{rec.ThreadID: r}
}

// Liveness is Liveness for rec, read after s was taken.
func (s *Sighting) Liveness(l storage.Layout, rec threads.Record) threads.Liveness {
	return Liveness(l, s.running(rec), rec)
}

// Status derives the status of rec, read after s was taken, from its
// head, from what the host says, and from the original engine's running
// marker and worker: or threads.StatusDamaged, with the damage, for a head
// or start that cannot back one (threads.ReadStatus). store is the root's
// CAS (Layout.CASDir), whose root holds the original's files.
func (s *Sighting) Status(store *cas.Store, rec threads.Record) (threads.Status, *threads.DamageError) {
	l := storage.Layout{Root: filepath.Dir(store.Dir())}
	return threads.ReadStatus(store, rec, s.Liveness(l, rec))
}
