package atomicfile

import (
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/uncaged/workflow/shared/testkit"
)

// TestSyncDirSharedServesLateCallersWithALaterFsync: callers that arrive
// while an fsync of the directory runs are not served by it (their
// renames may have come after it began) but share the next one: any
// number of them cost one more fsync, and none returns before that fsync
// began. Not parallel: the hook and the fsync count are the process's.
func TestSyncDirSharedServesLateCallersWithALaterFsync(t *testing.T) {
	for _, late := range []int{1, 2, 7, 31} {
		dir := t.TempDir()
		var rounds atomic.Int32
		first := make(chan struct{})
		release := make(chan struct{})
		testHookRound = func(d string) {
			if d != filepath.Clean(dir) {
				return
			}
			if rounds.Add(1) == 1 {
				close(first)
				<-release
			}
		}
		before := Syncs()
		firstDone := make(chan error, 1)
		go func() { firstDone <- SyncDirShared(dir) }()
		<-first
		// The first fsync is under way, held: these callers come after it
		// began.
		var wg sync.WaitGroup
		var early atomic.Int32
		for range late {
			wg.Go(func() {
				if err := SyncDirShared(dir); err != nil {
					t.Error(err)
				}
				if rounds.Load() < 2 {
					early.Add(1)
				}
			})
		}
		waitForWaiters(t, dir, late)
		close(release)
		if err := <-firstDone; err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		testHookRound = nil
		if early.Load() != 0 {
			t.Errorf("%d late callers returned on the fsync that began before them", early.Load())
		}
		if got := Syncs() - before; got != 2 {
			t.Errorf("%d late callers: %d fsyncs, want 2", late, got)
		}
	}
}

// waitForWaiters waits until n callers wait for the next round of dir.
func waitForWaiters(t *testing.T, dir string, n int) {
	t.Helper()
	s := dirSyncerFor(filepath.Clean(dir))
	testkit.WaitUntil(t, "the late callers to wait for the next fsync", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.next != nil && s.next.callers == n
	})
}

// TestSyncDirSharedReportsFailure to every caller it serves.
func TestSyncDirSharedReportsFailure(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "gone")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if err := SyncDirShared(dir); err == nil {
				t.Error("a sync of a missing directory succeeded")
			}
		})
	}
	wg.Wait()
}
