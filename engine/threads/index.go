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
	"strings"

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

// looseEntry decodes an entry without trusting its types.
type looseEntry struct {
	Head      any `json:"head"`
	Start     any `json:"start"`
	UpdatedAt any `json:"updatedAt"`
}

// ReadIndex reads threads.json. A missing file is an empty index; a file
// that cannot be read completely — not JSON, not an object, empty, or an
// entry without a string head, a string start and a numeric updatedAt — is
// a *DamageError naming the file and line, because treating it as empty
// would hide threads from whoever acts on all of them. (The original read
// such files as empty; it never writes one.)
func ReadIndex(bundleDir string) (Index, error) {
	idx, damaged, err := ReadIndexTolerant(bundleDir)
	if err != nil {
		return nil, err
	}
	if damaged != nil {
		return nil, damaged
	}
	return idx, nil
}

// ReadIndexTolerant reads threads.json for those who show what they can:
// the entries it can read and, for a damaged file, where the damage is (the
// index then holds the intact entries of a file that parses, and nothing of
// one that does not). A bundle directory or threads.json that is there but
// cannot be read — a symbolic link to nothing, a file where the directory
// should be or the reverse, no permission — is damage too (Unreadable),
// never an empty index. The error is for callers' own failures only; it
// is always nil today.
func ReadIndexTolerant(bundleDir string) (Index, *DamageError, error) {
	idx, _, d := readIndexTolerant(bundleDir)
	return idx, d, nil
}

// readIndexTolerant is ReadIndexTolerant that also returns the file's
// bytes (nil when there were none to read).
func readIndexTolerant(bundleDir string) (Index, []byte, *DamageError) {
	path := IndexFile(bundleDir)
	b, missing, problem := readIndexFile(path)
	if missing || problem != "" {
		// The bundle directory itself may be what cannot be read (its
		// threads.json then looks missing, or off a non-directory).
		if p := dirProblem(bundleDir); p != "" {
			return Index{}, nil, unreadable(bundleDir, p)
		}
		if missing {
			return Index{}, nil, nil
		}
		return Index{}, nil, unreadable(path, problem)
	}
	idx, fl := parseIndex(b)
	if fl != nil {
		return idx, b, fl.at(path, b)
	}
	return idx, b, nil
}

func parseIndex(b []byte) (Index, *flaw) {
	if idx, fl, ok := scanIndex(b); ok {
		return idx, fl
	}
	return decodeIndex(b)
}

// decodeIndex is the general (slower) reader behind parseIndex: it takes
// any valid JSON and finds the line of whatever is wrong.
func decodeIndex(b []byte) (Index, *flaw) {
	if len(bytes.TrimSpace(b)) == 0 {
		return Index{}, &flaw{0, "the file is empty (an index without threads holds {})"}
	}
	var whole json.RawMessage
	if err := json.Unmarshal(b, &whole); err != nil {
		return Index{}, syntaxFlaw(b, err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return Index{}, &flaw{len(b) - len(bytes.TrimLeft(b, " \t\r\n")), "not a JSON object"}
	}
	idx := Index{}
	var first *flaw
	seen := map[string]bool{}
	for dec.More() {
		keyAt := skipSeparators(b, int(dec.InputOffset()))
		tok, err := dec.Token()
		if err != nil {
			return Index{}, syntaxFlaw(b, err)
		}
		id, _ := tok.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return Index{}, syntaxFlaw(b, err)
		}
		if seen[id] && first == nil {
			first = &flaw{keyAt, duplicateReason(id)}
		}
		seen[id] = true
		var e looseEntry
		if err := json.Unmarshal(raw, &e); err != nil {
			delete(idx, id)
			if first == nil {
				first = &flaw{keyAt, fmt.Sprintf("thread %q is not a JSON object", clip(id))}
			}
			continue
		}
		head, ok1 := e.Head.(string)
		start, ok2 := e.Start.(string)
		at, ok3 := e.UpdatedAt.(float64)
		reason := ""
		if !ok1 || !ok2 || !ok3 {
			reason = entryReason(id, hasBits(ok1, ok2, ok3))
		} else if bad := badHashes(head, start); bad != "" {
			reason = fmt.Sprintf("thread %q: %s", clip(id), bad)
		}
		if reason == "" {
			idx[id] = Entry{Head: head, Start: start, UpdatedAt: int64(at)}
			continue
		}
		delete(idx, id)
		if first == nil {
			first = &flaw{keyAt, reason}
		}
	}
	return idx, first
}

// hasBits builds fastEntry's has-bits for an index entry.
func hasBits(head, start, at bool) uint8 {
	var has uint8
	if head {
		has |= hasHead
	}
	if start {
		has |= hasStart
	}
	if at {
		has |= hasAt
	}
	return has
}

// skipSeparators moves past the blanks and the comma between two members.
func skipSeparators(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r' || b[i] == '\n' || b[i] == ',') {
		i++
	}
	return i
}

// syntaxFlaw places a JSON syntax error; an input that ends early is
// reported at its end, as a file cut short.
func syntaxFlaw(b []byte, err error) *flaw {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		reason := "not valid JSON: " + se.Error()
		if strings.Contains(se.Error(), "unexpected end") {
			reason = "the file ends in the middle of the JSON (cut short)"
		}
		// Offset counts the byte that broke the parse; the damage is on
		// that byte's line.
		return &flaw{int(se.Offset) - 1, reason}
	}
	return &flaw{len(b), "not valid JSON: " + err.Error()}
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

// UpsertWhen is Upsert whose new index replaces the old one only once
// ready returns nil (see atomicfile.WriteWhen): the executor writes a
// step's state node meanwhile, and the index must not name it before it
// is on disk. ready is called at most once; an error from it, or from
// reading the index, leaves the index as it was.
func UpsertWhen(bundleDir, id string, e Entry, ready func() error) error {
	path := IndexFile(bundleDir)
	return atomicfile.Update(path, func() error {
		idx, err := ReadIndex(bundleDir)
		if err != nil {
			return err
		}
		idx[id] = e
		b, err := marshalIndex(idx)
		if err != nil {
			return err
		}
		return atomicfile.WriteWhen(path, b, 0o644, ready)
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
