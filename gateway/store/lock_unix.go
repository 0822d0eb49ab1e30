//go:build unix

package store

import (
	"fmt"
	"os"
	"syscall"
)

// lockDataDir takes an exclusive lock on <path>.lock, held until release
// is called. One process owns a SQLite store: a second gateway on the same
// file would neither see this one's notifications nor be seen, so its
// revocations would silently not apply here. Failing at Open says so.
func lockDataDir(path string) (release func(), err error) {
	f, err := os.OpenFile(path+".lock", os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("store: lock %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close() // the lock's error is the one to report
		if err == syscall.EWOULDBLOCK {
			return nil, fmt.Errorf("store: %s is in use by another gateway process; a SQLite store has one owner (use PostgreSQL to share a database)", path)
		}
		return nil, fmt.Errorf("store: lock %s: %w", path, err)
	}
	// Closing the file releases the lock.
	return func() { _ = f.Close() }, nil
}
