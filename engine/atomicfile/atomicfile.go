// Package atomicfile writes files so that readers see either the old or the
// new contents, never a torn mix, and serialises read-modify-write cycles
// across processes with advisory file locks.
package atomicfile

import (
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// Write replaces path with data: a temporary file in the same directory is
// written, synced and renamed over path, then the directory is synced so the
// rename survives a crash. Missing parent directories are created.
func Write(path string, data []byte, perm os.FileMode) error {
	if err := Replace(path, data, perm); err != nil {
		return err
	}
	return SyncDir(filepath.Dir(path))
}

// Replace is Write without the directory sync: once it returns, readers
// see data whole at path, and path's bytes are on disk, but after a power
// cut path may still be missing or hold its old contents until its
// directory is synced. A writer that puts several files in one directory
// (the CAS, within one step) calls SyncDir once for all of them, before
// anything durable names them.
func Replace(path string, data []byte, perm os.FileMode) error {
	return replace(path, data, perm, nil)
}

// WriteWhen is Write whose rename waits for ready: the new contents are
// written and synced first, so the sync overlaps with whatever ready
// waits for (the files that path will name, being synced meanwhile), and
// a ready that fails leaves path as it was.
func WriteWhen(path string, data []byte, perm os.FileMode, ready func() error) error {
	if err := replace(path, data, perm, ready); err != nil {
		return err
	}
	return SyncDir(filepath.Dir(path))
}

// ReplaceWhen is WriteWhen without the directory sync, for a writer that
// makes the rename durable itself, after letting go of its lock
// (SyncDirShared): the writer that follows can rename its own file
// meanwhile, and one directory fsync serves both.
func ReplaceWhen(path string, data []byte, perm os.FileMode, ready func() error) error {
	return replace(path, data, perm, ready)
}

func replace(path string, data []byte, perm os.FileMode, ready func() error) error {
	var tmp *os.File
	err := inDir(path, func(dir string) (err error) {
		tmp, err = os.CreateTemp(dir, filepath.Base(path)+".tmp.*")
		return err
	})
	if err != nil {
		return err
	}
	tmpName := tmp.Name()
	committed := false
	defer func() {
		if !committed {
			_ = tmp.Close()
			_ = os.Remove(tmpName)
		}
	}()
	if err := writeSynced(tmp, data, perm); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if ready != nil {
		if err := ready(); err != nil {
			return err
		}
	}
	if err := os.Rename(tmpName, path); err != nil {
		return err
	}
	committed = true
	return nil
}

// syncs counts the fsyncs of this process made through this package.
var syncs atomic.Uint64

// Syncs is how many fsyncs (of files and directories) this process has
// made through this package, for benchmarks that report them per step.
func Syncs() uint64 { return syncs.Load() }

// Fsync flushes f's data and metadata to disk, counted in Syncs.
func Fsync(f *os.File) error {
	syncs.Add(1)
	return f.Sync()
}

// SyncDir flushes a directory's entries (new names, renames) to disk.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer func() { _ = d.Close() }() // Sync, checked, is what flushes
	if err := Fsync(d); err != nil {
		return fmt.Errorf("sync dir %s: %w", dir, err)
	}
	return nil
}

// Lock is an exclusive advisory lock held on "<path>.lock". It serialises
// writers of path across goroutines and processes; readers need no lock
// because writes are atomic renames.
type Lock struct {
	f *os.File
}

// Acquire blocks until it holds the lock for path. The lock file is created
// next to path (and its directory with it) and is never removed: removing it
// would let two processes lock different inodes.
func Acquire(path string) (*Lock, error) {
	lockPath := path + ".lock"
	if err := os.MkdirAll(filepath.Dir(lockPath), 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(lockPath, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		_ = f.Close() // the lock file holds no data
		return nil, fmt.Errorf("lock %s: %w", lockPath, err)
	}
	return &Lock{f: f}, nil
}

// Release drops the lock. It is safe to call more than once.
func (l *Lock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := unix.Flock(int(l.f.Fd()), unix.LOCK_UN)
	if cerr := l.f.Close(); err == nil {
		err = cerr
	}
	l.f = nil
	return err
}

// Update runs fn while holding the lock for path. fn reads the current state
// and performs its own atomic writes.
func Update(path string, fn func() error) error {
	l, err := Acquire(path)
	if err != nil {
		return err
	}
	// fn's writes are atomic renames, done or not by the time it returns;
	// the lock file holds no data, and closing it drops the lock even if
	// the unlock failed, so Release has nothing to add to fn's result.
	defer func() { _ = l.Release() }()
	return fn()
}
