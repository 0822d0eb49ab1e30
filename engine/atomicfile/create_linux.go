package atomicfile

import (
	"errors"
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// createUnnamed is CreateNew with an unnamed file (O_TMPFILE), linked
// under path through /proc/self/fd (linkat by descriptor alone needs a
// privilege). errNoUnnamed when the file system or /proc cannot.
func createUnnamed(path string, data []byte, perm os.FileMode) (bool, error) {
	var f *os.File
	err := inDir(path, func(dir string) error {
		fd, err := unix.Open(dir, unix.O_TMPFILE|unix.O_WRONLY|unix.O_CLOEXEC, uint32(perm.Perm()))
		if err != nil {
			return &os.PathError{Op: "open unnamed file in", Path: dir, Err: err}
		}
		f = os.NewFile(uintptr(fd), path+" (unnamed)")
		return nil
	})
	if err != nil {
		// Kernels and file systems without O_TMPFILE answer one of these.
		if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EISDIR) || errors.Is(err, unix.EINVAL) {
			return false, errNoUnnamed
		}
		return false, err
	}
	defer func() { _ = f.Close() }() // the file is linked or dropped by then; closing frees nothing else
	if err := writeSynced(f, data, perm); err != nil {
		return false, err
	}
	proc := "/proc/self/fd/" + strconv.Itoa(int(f.Fd()))
	err = unix.Linkat(unix.AT_FDCWD, proc, unix.AT_FDCWD, path, unix.AT_SYMLINK_FOLLOW)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, unix.EEXIST):
		return false, nil
	case errors.Is(err, unix.ENOENT):
		if _, serr := os.Stat(proc); serr != nil {
			// No /proc to link through: this file is dropped unlinked.
			return false, errNoUnnamed
		}
	}
	return false, fmt.Errorf("link %s: %w", path, err)
}
