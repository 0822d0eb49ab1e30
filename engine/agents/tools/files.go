package tools

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

const (
	// MaxReadBytes bounds the size of a file read_file or patch_file loads.
	MaxReadBytes = 10 << 20
	// DefaultReadLimit is how many lines read_file returns when the call
	// gives no limit; a note at the end says how to read on.
	DefaultReadLimit = 2000
)

// ReadFile returns lines of path as "<n>|<line>", numbered from 1, starting
// at line offset (1-based; 0 means 1) and at most limit lines (0 means
// DefaultReadLimit). When lines remain, a last line says how to read them.
func (w *Workspace) ReadFile(path string, offset, limit int) (string, error) {
	if offset < 0 {
		return "", fmt.Errorf("offset must be a line number >= 1, got %d", offset)
	}
	if limit < 0 {
		return "", fmt.Errorf("limit must be >= 1, got %d", limit)
	}
	if offset == 0 {
		offset = 1
	}
	if limit == 0 {
		limit = DefaultReadLimit
	}
	data, err := w.load(path)
	if err != nil {
		return "", err
	}
	text := strings.TrimSuffix(string(data), "\n")
	if text == "" && offset == 1 {
		return "", nil
	}
	lines := strings.Split(text, "\n")
	if offset > len(lines) {
		return "", fmt.Errorf("offset %d is past the end of %s (%d lines)", offset, path, len(lines))
	}
	end := min(offset-1+limit, len(lines))
	var b strings.Builder
	for i := offset - 1; i < end; i++ {
		if i > offset-1 {
			b.WriteByte('\n')
		}
		b.WriteString(strconv.Itoa(i + 1))
		b.WriteByte('|')
		b.WriteString(lines[i])
	}
	if end < len(lines) {
		fmt.Fprintf(&b, "\n... (%d more lines; call read_file with offset %d to continue)", len(lines)-end, end+1)
	}
	return b.String(), nil
}

// load reads a regular file of at most MaxReadBytes.
func (w *Workspace) load(path string) ([]byte, error) {
	rel, err := w.Resolve(path)
	if err != nil {
		return nil, err
	}
	f, err := w.openRegular(rel, path, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }() // opened read-only
	st, err := f.Stat()
	if err != nil {
		return nil, fsErr(path, err)
	}
	if st.Size() > MaxReadBytes {
		return nil, fmt.Errorf("%s is too large (%d bytes; the limit is %d)", path, st.Size(), MaxReadBytes)
	}
	// Bounded even if the file grows after the size was checked.
	data, err := io.ReadAll(io.LimitReader(f, MaxReadBytes+1))
	if err != nil {
		return nil, fsErr(path, err)
	}
	if len(data) > MaxReadBytes {
		return nil, fmt.Errorf("%s is too large (the limit is %d bytes)", path, MaxReadBytes)
	}
	return data, nil
}

// openRegular opens rel (path as the model wrote it) and refuses anything
// but a regular file. The open does not block and the check is on the open
// file: a FIFO the model made with shell_exec (or swapped in for a file
// after a check) would otherwise hang the tool call, and the role with it,
// until a writer or reader came — cancelling the run cannot interrupt an
// open.
func (w *Workspace) openRegular(rel, path string, flag int, perm os.FileMode) (*os.File, error) {
	if st, err := w.root.Stat(rel); err == nil && !st.Mode().IsRegular() {
		if st.IsDir() {
			return nil, fmt.Errorf("%s is a directory", path)
		}
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	f, err := w.root.OpenFile(rel, flag|syscall.O_NONBLOCK, perm)
	if errors.Is(err, syscall.ENXIO) {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	if err != nil {
		return nil, fsErr(path, err)
	}
	st, err := f.Stat()
	if err == nil && !st.Mode().IsRegular() {
		err = fmt.Errorf("%s is not a regular file", path)
		if st.IsDir() {
			err = fmt.Errorf("%s is a directory", path)
		}
	} else if err != nil {
		err = fsErr(path, err)
	}
	if err != nil {
		_ = f.Close() // nothing was written yet; err is what matters
		return nil, err
	}
	return f, nil
}

// overwrite replaces the contents of the regular file f with content.
func overwrite(f *os.File, path, content string) error {
	err := f.Truncate(0)
	if err == nil {
		_, err = f.WriteString(content)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fsErr(path, err)
	}
	return nil
}

// WriteFile creates or replaces path with content, creating missing parent
// directories. An existing file keeps its permissions.
func (w *Workspace) WriteFile(path, content string) (string, error) {
	rel, err := w.Resolve(path)
	if err != nil {
		return "", err
	}
	if rel == "." {
		return "", fmt.Errorf("%s is a directory", path)
	}
	if dir := filepath.Dir(rel); dir != "." {
		if err := w.root.MkdirAll(dir, 0o755); err != nil {
			return "", fsErr(path, err)
		}
	}
	f, err := w.openRegular(rel, path, os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		return "", err
	}
	if err := overwrite(f, path, content); err != nil {
		return "", err
	}
	return fmt.Sprintf("Successfully wrote %d bytes to %s", len(content), path), nil
}

// PatchFile replaces the one occurrence of oldString in path with
// newString. Zero or several occurrences change nothing and say so.
func (w *Workspace) PatchFile(path, oldString, newString string) (string, error) {
	if oldString == "" {
		return "", errors.New("old_string must not be empty")
	}
	data, err := w.load(path)
	if err != nil {
		return "", err
	}
	switch n := strings.Count(string(data), oldString); n {
	case 0:
		return "", fmt.Errorf("old_string not found in %s", path)
	case 1:
	default:
		return "", fmt.Errorf("old_string is not unique in %s (%d occurrences); include more surrounding lines to pick one", path, n)
	}
	patched := strings.Replace(string(data), oldString, newString, 1)
	rel, err := w.Resolve(path)
	if err != nil {
		return "", err
	}
	f, err := w.openRegular(rel, path, os.O_WRONLY, 0)
	if err != nil {
		return "", err
	}
	if err := overwrite(f, path, patched); err != nil {
		return "", err
	}
	return "Successfully patched " + path, nil
}
