package cas

import (
	"fmt"
	"os"
	"testing"

	"github.com/uncaged/workflow/engine/atomicfile"
)

// TestBatchedPutsShareOneDirectorySync: each blob put through a batched
// view is synced before its rename (one fsync each), and Sync syncs the
// directory once for all of them; a plain store syncs the directory on
// every put. Not parallel: the fsync count is the process's.
func TestBatchedPutsShareOneDirectorySync(t *testing.T) {
	s := Open(t.TempDir())
	b := s.Batched()
	before := atomicfile.Syncs()
	var hashes []string
	for i := range 3 {
		h, err := b.Put(fmt.Sprintf("blob %d", i))
		if err != nil {
			t.Fatal(err)
		}
		hashes = append(hashes, h)
	}
	if got := atomicfile.Syncs() - before; got != 3 {
		t.Errorf("3 batched puts made %d fsyncs, want 3 (one per blob)", got)
	}
	// Readable at once, through the view and through the store.
	for _, h := range hashes {
		if _, err := s.Get(h); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Sync(); err != nil {
		t.Fatal(err)
	}
	if got := atomicfile.Syncs() - before; got != 4 {
		t.Errorf("after Sync: %d fsyncs, want 4", got)
	}
	if err := b.Sync(); err != nil {
		t.Fatal(err)
	}
	if got := atomicfile.Syncs() - before; got != 4 {
		t.Errorf("a Sync with nothing put since synced again: %d fsyncs", got)
	}
	// A blob already there may be another view's, not yet synced: a put
	// of it still leaves a directory sync owed.
	if _, err := b.Put("blob 0"); err != nil {
		t.Fatal(err)
	}
	if err := b.Sync(); err != nil {
		t.Fatal(err)
	}
	if got := atomicfile.Syncs() - before; got != 5 {
		t.Errorf("re-put then Sync: %d fsyncs, want 5", got)
	}
	// A plain store's put is durable when it returns: file and directory.
	mark := atomicfile.Syncs()
	if _, err := s.Put("plain"); err != nil {
		t.Fatal(err)
	}
	if got := atomicfile.Syncs() - mark; got != 2 {
		t.Errorf("a plain put made %d fsyncs, want 2", got)
	}
	if err := s.Sync(); err != nil || atomicfile.Syncs()-mark != 2 {
		t.Errorf("Sync on a plain store = %v, %d fsyncs", err, atomicfile.Syncs()-mark)
	}
}

// TestBatchedSyncReportsAMissingDirectory: a Sync that cannot sync the
// directory fails, so the executor never names a node whose name may not
// be durable.
func TestBatchedSyncReportsAMissingDirectory(t *testing.T) {
	dir := t.TempDir()
	b := Open(dir).Batched()
	if _, err := b.Put("x"); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := b.Sync(); err == nil {
		t.Fatal("Sync of a removed directory succeeded")
	}
}
