// Package threads keeps the thread index of a storage root: per bundle, the
// active threads in bundles/<hash>/threads.json and the finished ones in
// bundles/<hash>/history/YYYY-MM-DD.jsonl, in the original's formats. Every
// read-modify-write holds a file lock, so writers in different processes
// never lose each other's updates; within a process, the updates of
// threads that step at the same moment share one rewrite of threads.json
// (commit.go).
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
	"strconv"
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
// trailing newline — as JSON.stringify(index, null, 2) does, and as
// encoding/json's MarshalIndent of each entry would. It is written by
// hand because an index of 10,000 threads is rewritten at every group of
// steps; strings that JSON would escape go through encoding/json.
func marshalIndex(idx Index) ([]byte, error) {
	ids := make([]string, 0, len(idx))
	for id := range idx {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	buf := make([]byte, 0, 3+len(ids)*entrySize)
	buf = append(buf, '{')
	for i, id := range ids {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = appendEntry(buf, id, idx[id])
	}
	return closeIndex(buf, len(ids)), nil
}

// entrySize is about what an entry of hashes takes in the file.
const entrySize = 128

// appendEntry appends one member of the index object as marshalIndex
// writes it, without the comma that separates it from the one before.
func appendEntry(buf []byte, id string, e Entry) []byte {
	buf = append(buf, "\n  "...)
	buf = appendJSONString(buf, id)
	buf = append(buf, ": {\n    \"head\": "...)
	buf = appendJSONString(buf, e.Head)
	buf = append(buf, ",\n    \"start\": "...)
	buf = appendJSONString(buf, e.Start)
	buf = append(buf, ",\n    \"updatedAt\": "...)
	buf = strconv.AppendInt(buf, e.UpdatedAt, 10)
	return append(buf, "\n  }"...)
}

// closeIndex ends an index object of n members.
func closeIndex(buf []byte, n int) []byte {
	if n > 0 {
		buf = append(buf, '\n')
	}
	return append(buf, "}\n"...)
}

// appendJSONString appends s as encoding/json writes it: plain printable
// ASCII as it is, anything it would escape (quotes, backslashes, control
// characters, <, > and &, and all but ASCII, to be safe) through
// json.Marshal itself.
func appendJSONString(buf []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			b, _ := json.Marshal(s) // a string always marshals
			return append(buf, b...)
		}
	}
	buf = append(buf, '"')
	buf = append(buf, s...)
	return append(buf, '"')
}

// Upsert sets the entry for id, keeping every other entry. It returns
// once the index naming the entry is durably in place; concurrent calls
// share one rewrite of the file (see commit.go). An entry the index's
// readers would not read back whole (checkEntry) is refused, and nothing
// changes.
func Upsert(bundleDir, id string, e Entry) error {
	return UpsertWhen(bundleDir, id, e, nil)
}

// UpsertWhen is Upsert whose entry is renamed into place only once ready
// returns nil: the executor writes a step's state node meanwhile, and the
// index must not name it before it is on disk. ready is called at most
// once, by whichever caller commits the group, after the new index is
// written and synced beside the node. An error from ready leaves id's
// entry as it was (the other changes of its group are still committed);
// one from reading the index, such as damage, leaves the whole index as
// it was, without calling ready.
func UpsertWhen(bundleDir, id string, e Entry, ready func() error) error {
	return UpsertAfter(bundleDir, id, e, ready, "")
}

// UpsertAfter is UpsertWhen for an entry whose head is a file in dir (a
// CAS blob written without its directory synced): ready returns once the
// file is in place with its bytes synced, and the entry is renamed into
// place only after an fsync of dir that began after ready returned. The
// entries committed together share that fsync, so K threads stepping at
// once sync the CAS directory once, not K times. dir "" is UpsertWhen.
func UpsertAfter(bundleDir, id string, e Entry, ready func() error, dir string) error {
	if err := checkEntry(id, e); err != nil {
		return err
	}
	return commit(bundleDir, &change{id: id, entry: e, ready: ready, syncDir: dir})
}

// Remove deletes id from the index and reports whether it was there.
// Removing a missing id does not create the file. Removes share the
// rewrites of concurrent upserts.
func Remove(bundleDir, id string) (bool, error) {
	if _, err := os.Stat(IndexFile(bundleDir)); errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	ch := &change{id: id, remove: true}
	err := commit(bundleDir, ch)
	return ch.found, err
}

// Modify runs fn on the current index under the bundle's index lock and
// writes the result back if fn reports a change. It is a writer of its
// own beside the grouped ones (Upsert, Remove), as another process is:
// the lock orders them, so neither loses the other's update.
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
