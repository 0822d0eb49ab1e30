package tools

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
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
	st, err := w.root.Stat(rel)
	if err != nil {
		return nil, fsErr(path, err)
	}
	if st.IsDir() {
		return nil, fmt.Errorf("%s is a directory", path)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	if st.Size() > MaxReadBytes {
		return nil, fmt.Errorf("%s is too large (%d bytes; the limit is %d)", path, st.Size(), MaxReadBytes)
	}
	data, err := w.root.ReadFile(rel)
	if err != nil {
		return nil, fsErr(path, err)
	}
	return data, nil
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
	if err := w.root.WriteFile(rel, []byte(content), 0o644); err != nil {
		return "", fsErr(path, err)
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
	f, err := w.root.OpenFile(rel, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return "", fsErr(path, err)
	}
	_, werr := f.WriteString(patched)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return "", fsErr(path, werr)
	}
	return "Successfully patched " + path, nil
}
