// Package threads keeps the thread index of a storage root: per bundle, the
// active threads in bundles/<hash>/threads.json and the finished ones in
// bundles/<hash>/history/YYYY-MM-DD.jsonl, in the original's formats. Every
// read-modify-write holds a file lock, so writers in different processes
// never lose each other's updates.
package threads

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"

	"github.com/uncaged/workflow/engine/atomicfile"
)

// Entry is one active thread in threads.json.
type Entry struct {
	Head      string `json:"head"`
	Start     string `json:"start"`
	UpdatedAt int64  `json:"updatedAt"`
}

// Index maps thread id to its entry.
type Index map[string]Entry

// IndexFile is threads.json inside a bundle directory.
func IndexFile(bundleDir string) string { return filepath.Join(bundleDir, "threads.json") }

// looseEntry decodes an entry without failing the whole file on a bad one.
type looseEntry struct {
	Head      any `json:"head"`
	Start     any `json:"start"`
	UpdatedAt any `json:"updatedAt"`
}

// ReadIndex reads threads.json. Like the original it forgives: a missing,
// empty, invalid or non-object file reads as empty, and entries without a
// string head, a string start and a numeric updatedAt are dropped. Only I/O
// errors are returned.
func ReadIndex(bundleDir string) (Index, error) {
	b, err := os.ReadFile(IndexFile(bundleDir))
	if errors.Is(err, fs.ErrNotExist) {
		return Index{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("failed to read threads.json under %s: %w", bundleDir, err)
	}
	return parseIndex(b), nil
}

func parseIndex(b []byte) Index {
	if idx, ok := scanIndex(b); ok {
		return idx
	}
	return decodeIndex(b)
}

// decodeIndex is the general (slower) reader behind parseIndex.
func decodeIndex(b []byte) Index {
	var raw map[string]looseEntry
	if err := json.Unmarshal(b, &raw); err != nil {
		var typeErr *json.UnmarshalTypeError
		if !errors.As(err, &typeErr) || raw == nil {
			return Index{}
		}
	}
	idx := make(Index, len(raw))
	for id, e := range raw {
		head, ok1 := e.Head.(string)
		start, ok2 := e.Start.(string)
		at, ok3 := e.UpdatedAt.(float64)
		if ok1 && ok2 && ok3 {
			idx[id] = Entry{Head: head, Start: start, UpdatedAt: int64(at)}
		}
	}
	return idx
}

// marshalIndex writes the original's layout: two-space JSON, ids sorted,
// trailing newline.
func marshalIndex(idx Index) ([]byte, error) {
	ids := make([]string, 0, len(idx))
	for id := range idx {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	var buf bytes.Buffer
	buf.WriteString("{")
	for i, id := range ids {
		if i > 0 {
			buf.WriteString(",")
		}
		key, _ := json.Marshal(id)
		val, err := json.MarshalIndent(idx[id], "  ", "  ")
		if err != nil {
			return nil, err
		}
		buf.WriteString("\n  ")
		buf.Write(key)
		buf.WriteString(": ")
		buf.Write(val)
	}
	if len(ids) > 0 {
		buf.WriteString("\n")
	}
	buf.WriteString("}\n")
	return buf.Bytes(), nil
}

// Upsert sets the entry for id, keeping every other entry.
func Upsert(bundleDir, id string, e Entry) error {
	return Modify(bundleDir, func(idx Index) (bool, error) {
		idx[id] = e
		return true, nil
	})
}

// Remove deletes id from the index and reports whether it was there.
// Removing a missing id does not create the file.
func Remove(bundleDir, id string) (bool, error) {
	if _, err := os.Stat(IndexFile(bundleDir)); errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	removed := false
	err := Modify(bundleDir, func(idx Index) (bool, error) {
		_, removed = idx[id]
		delete(idx, id)
		return removed, nil
	})
	return removed, err
}

// Modify runs fn on the current index under the bundle's index lock and
// writes the result back if fn reports a change.
func Modify(bundleDir string, fn func(Index) (changed bool, err error)) error {
	path := IndexFile(bundleDir)
	return atomicfile.Update(path, func() error {
		idx, err := ReadIndex(bundleDir)
		if err != nil {
			return err
		}
		changed, err := fn(idx)
		if err != nil || !changed {
			return err
		}
		b, err := marshalIndex(idx)
		if err != nil {
			return err
		}
		return atomicfile.Write(path, b, 0o644)
	})
}
