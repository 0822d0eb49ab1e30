package atomicfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// CreateNew puts data at path unless something is already there, and
// reports whether it did; what is there is left as it is. Like Replace,
// the name is never seen with part of data, data is on disk when the name
// appears, and the directory is not synced (SyncDir or SyncDirShared
// makes the name durable). Missing parent directories are created.
//
// It is for files named by their contents (the CAS), which many threads
// store in one directory at once. Where the system can (Linux), data is
// written to an unnamed file in the directory and linked under path: one
// change to the directory per file. A temporary name created and then
// renamed, as Replace does, changes it twice, and every change takes the
// directory's lock — the threads' stores queued for it. Elsewhere, or on
// a file system without unnamed files, it falls back to Replace, which
// replaces whatever path held (for contents-named files, the same bytes).
func CreateNew(path string, data []byte, perm os.FileMode) (bool, error) {
	created, err := createUnnamed(path, data, perm)
	if errors.Is(err, errNoUnnamed) {
		return true, Replace(path, data, perm)
	}
	return created, err
}

// errNoUnnamed says that unnamed files cannot be made where asked.
var errNoUnnamed = errors.New("unnamed files are not supported here")

// writeSynced writes data to f, sets its mode and syncs it.
func writeSynced(f *os.File, data []byte, perm os.FileMode) error {
	if _, err := f.Write(data); err != nil {
		return fmt.Errorf("write %s: %w", f.Name(), err)
	}
	// The mode asked for, whatever the umask.
	if err := f.Chmod(perm); err != nil {
		return err
	}
	if err := Fsync(f); err != nil {
		return fmt.Errorf("sync %s: %w", f.Name(), err)
	}
	return nil
}

// inDir runs open on path's directory, creating it when it is missing:
// on first use only, which saves a stat on every other write.
func inDir(path string, open func(dir string) error) error {
	dir := filepath.Dir(path)
	err := open(dir)
	if errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		err = open(dir)
	}
	return err
}
