package atomicfile

import (
	"path/filepath"
	"sync"
)

// SyncDirShared is SyncDir for callers that may be many at once on one
// directory (the threads of a workflow, each naming its step's files in
// the same CAS directory and bundle directory): it returns once an fsync
// of dir that began after the call has succeeded, and callers that arrive
// while one fsync runs share the next one. A directory fsync makes every
// name in it durable, whoever made it, so one fsync serves every caller
// whose renames were done before it began — K callers wait for two fsyncs
// at most, instead of K in turn.
func SyncDirShared(dir string) error {
	return dirSyncerFor(filepath.Clean(dir)).sync()
}

// dirSyncer runs the fsyncs of one directory, one at a time.
type dirSyncer struct {
	dir     string
	mu      sync.Mutex
	running bool
	// next is the round that has not begun: every caller arriving now
	// is served by it.
	next *syncRound
}

// syncRound is one fsync of a directory and the callers it serves.
type syncRound struct {
	// lead gets one value when the round may begin: the caller that
	// takes it runs the fsync.
	lead chan struct{}
	done chan struct{}
	err  error
	// callers counts those the round serves (guarded by dirSyncer.mu).
	callers int
}

var dirSyncers sync.Map // directory → *dirSyncer

// testHookRound, set by tests, runs as a round begins, before its fsync.
var testHookRound func(dir string)

func dirSyncerFor(dir string) *dirSyncer {
	if s, ok := dirSyncers.Load(dir); ok {
		return s.(*dirSyncer)
	}
	s, _ := dirSyncers.LoadOrStore(dir, &dirSyncer{dir: dir})
	return s.(*dirSyncer)
}

func (s *dirSyncer) sync() error {
	s.mu.Lock()
	if s.next == nil {
		s.next = &syncRound{lead: make(chan struct{}, 1), done: make(chan struct{})}
	}
	r := s.next
	r.callers++
	if s.running {
		s.mu.Unlock()
		select {
		case <-r.done:
			return r.err
		case <-r.lead:
		}
		s.mu.Lock()
	}
	// This caller runs round r; from now on, arrivals wait for the next.
	s.running = true
	s.next = nil
	s.mu.Unlock()
	if testHookRound != nil {
		testHookRound(s.dir)
	}
	r.err = SyncDir(s.dir)
	s.mu.Lock()
	if s.next != nil {
		s.next.lead <- struct{}{}
	} else {
		s.running = false
	}
	s.mu.Unlock()
	close(r.done)
	return r.err
}
