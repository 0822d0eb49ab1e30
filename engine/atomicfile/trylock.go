package atomicfile

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// ErrLocked is returned by TryLock when another open file holds the lock.
var ErrLocked = errors.New("the lock is held by another process")

// TryLock takes an exclusive advisory lock on the file lockPath (created,
// with its directory, when missing) without waiting: a process that owns
// something for as long as it runs (the engine host, a connect) holds it.
// The kernel drops the lock with the process, so Held tells a live owner
// from a stale file without trusting a pid that may have been reused.
// Closing the returned file releases the lock.
func TryLock(lockPath string) (*os.File, error) {
	if err := os.MkdirAll(filepath.Dir(lockPath), 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(lockPath, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		_ = f.Close() // nothing was written to it
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, ErrLocked
		}
		return nil, fmt.Errorf("lock %s: %w", lockPath, err)
	}
	return f, nil
}

// Held reports whether a live process holds the TryLock lock on lockPath.
// A missing file is nobody's lock.
func Held(lockPath string) bool {
	f, err := os.OpenFile(lockPath, os.O_RDWR, 0)
	if err != nil {
		return false
	}
	// Only a probe: nothing is written, and the deferred Close drops the
	// lock taken below even if the explicit unlock failed.
	defer func() { _ = f.Close() }()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		return errors.Is(err, unix.EWOULDBLOCK)
	}
	_ = unix.Flock(int(f.Fd()), unix.LOCK_UN)
	return false
}
