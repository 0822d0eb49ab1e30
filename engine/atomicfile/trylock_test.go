package atomicfile

import (
	"errors"
	"path/filepath"
	"testing"
)

func TestTryLockAndHeld(t *testing.T) {
	t.Parallel()
	p := filepath.Join(t.TempDir(), "sub", "owner.lock")
	if Held(p) {
		t.Fatal("a missing lock file is reported held")
	}
	f, err := TryLock(p)
	if err != nil {
		t.Fatal(err)
	}
	if !Held(p) {
		t.Error("a held lock is reported free")
	}
	// flock locks belong to the open file, so a second open in this
	// process contends like another process would.
	if _, err := TryLock(p); !errors.Is(err, ErrLocked) {
		t.Errorf("second TryLock: got %v, want ErrLocked", err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if Held(p) {
		t.Error("a released lock is reported held")
	}
	g, err := TryLock(p)
	if err != nil {
		t.Fatalf("TryLock after release: %v", err)
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestTryLockBadPath(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if _, err := TryLock(dir); err == nil || errors.Is(err, ErrLocked) {
		t.Errorf("TryLock on a directory: got %v, want an open error", err)
	}
}
