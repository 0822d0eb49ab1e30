package threads

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// readIndexFile reads a threads.json or history file. missing is true only
// when nothing at all is at path; anything else that cannot be read
// completely — a symbolic link to nothing, a directory or other non-file
// under the name, no permission, a read error — is a problem, said in
// words: an index reader that took such a file for an empty one would hide
// every thread it names.
//
// The file is opened without blocking, so a FIFO under the name is
// reported instead of waiting for a writer forever.
func readIndexFile(path string) (b []byte, missing bool, problem string) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	for tries := 1; err != nil; tries++ {
		problem = openProblem(path, err, &missing)
		if problem != appeared || tries == 3 {
			return nil, missing, problem
		}
		// Created between the open and the look that followed it (a
		// bundle's first threads.json): read what is there now.
		f, err = os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	}
	defer func() { _ = f.Close() }() // read only
	st, err := f.Stat()
	if err != nil {
		return nil, false, "cannot be read: " + err.Error()
	}
	if st.IsDir() {
		return nil, false, "is a directory where a file is expected"
	}
	if !st.Mode().IsRegular() {
		return nil, false, fmt.Sprintf("is not a regular file (%v)", st.Mode().Type())
	}
	// Sized to the file, with room to find its end: an index of 10,000
	// threads is read at every group of steps.
	buf := bytes.NewBuffer(make([]byte, 0, st.Size()+bytes.MinRead))
	if _, err := buf.ReadFrom(f); err != nil {
		return nil, false, "cannot be read: " + err.Error()
	}
	return buf.Bytes(), false, ""
}

// appeared is the problem of a name that was not there when it was
// opened and is there now: created (or replaced by a link) meanwhile.
const appeared = "vanished while it was being read"

// openProblem describes why path could not be opened; it sets *missing
// when nothing is there, not even a link.
func openProblem(path string, err error, missing *bool) string {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if target, lerr := os.Readlink(path); lerr == nil {
			return fmt.Sprintf("is a symbolic link to %s, which does not exist", target)
		}
		if _, lerr := os.Lstat(path); lerr == nil {
			return appeared
		}
		*missing = true
		return ""
	case errors.Is(err, syscall.ENOTDIR):
		return "cannot be reached: a directory on its path is not a directory"
	case errors.Is(err, syscall.ELOOP):
		return "is a loop of symbolic links"
	}
	return "cannot be read: " + err.Error()
}

// dirProblem says what keeps dir from being read as a directory of a
// storage root, or "" when it is one (following symbolic links) or when
// nothing is there. A link to nothing is a problem: what it pointed to
// may hold threads.
func dirProblem(dir string) string {
	st, err := os.Stat(dir)
	for tries := 1; err != nil; tries++ {
		missing := false
		p := openProblem(dir, err, &missing)
		if p == appeared && tries < 3 {
			// Made by the first writer meanwhile: look again.
			st, err = os.Stat(dir)
			continue
		}
		if !missing {
			return p
		}
		return ""
	}
	if st.Mode().IsRegular() {
		return "is a file where a directory is expected"
	}
	if !st.IsDir() {
		return fmt.Sprintf("is not a directory (%v)", st.Mode().Type())
	}
	return ""
}

// unreadable is the damage of a file or directory that cannot be read at
// all: no line of it can be trusted, nor rebuilt from its content.
func unreadable(path, problem string) *DamageError {
	return &DamageError{Path: path, Reason: problem + "; put back what belongs there (or remove it if it never held threads)", Unreadable: true}
}

// ReadKeptAside reads a damaged file a repair set aside, refusing anything
// but a regular file (a FIFO under its name would block the reader).
func ReadKeptAside(path string) ([]byte, error) {
	b, missing, problem := readIndexFile(path)
	if missing {
		return nil, fs.ErrNotExist
	}
	if problem != "" {
		return nil, errors.New(problem)
	}
	return b, nil
}
