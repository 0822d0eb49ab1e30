package threads

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/uncaged/workflow/engine/ids"
)

// ErrDamaged is matched (errors.Is) by every error about an index or history
// file whose content cannot be read completely. Such a file may name threads
// nobody can see any more, so whatever would act on "all threads" — garbage
// collection above all — must stop instead of treating it as empty.
var ErrDamaged = errors.New("damaged thread index")

// DamageError locates content of a threads.json or history file that cannot
// be read completely. Both implementations replace threads.json by an atomic
// rename, so a reader never sees a half-written one: whatever fails to parse
// was damaged after it was written.
type DamageError struct {
	// Path is the damaged file.
	Path string `json:"path"`
	// Line is the 1-based line the damage starts on.
	Line int `json:"line"`
	// Reason says what is wrong there.
	Reason string `json:"reason"`
	// Thread is set when the line itself reads but names a head or start
	// that cannot back the thread's status (ReadStatus): the thread is
	// listed, as damaged, rather than missing from the list.
	Thread string `json:"threadId,omitempty"`
	// Unreadable marks a file (Line 0) or directory that could not be read
	// at all, rather than content that could not be parsed: a repair has
	// nothing to rebuild it from.
	Unreadable bool `json:"-"`
}

// Error names the file, the line and what is wrong.
func (e *DamageError) Error() string {
	switch {
	case e.Path == "":
		return "damaged: " + e.Reason
	case e.Line == 0:
		return fmt.Sprintf("damaged %s: %s", e.Path, e.Reason)
	}
	return fmt.Sprintf("damaged file %s, line %d: %s", e.Path, e.Line, e.Reason)
}

// Is makes errors.Is(err, ErrDamaged) hold.
func (e *DamageError) Is(target error) bool { return target == ErrDamaged }

// joinDamage makes one error of everything damaged, or nil.
func joinDamage(damaged []*DamageError) error {
	switch len(damaged) {
	case 0:
		return nil
	case 1:
		return damaged[0]
	}
	errs := make([]error, len(damaged))
	for i, d := range damaged {
		errs[i] = d
	}
	return errors.Join(errs...)
}

// flaw is damage found while parsing bytes, before the file's path is known.
type flaw struct {
	offset int
	reason string
}

// at turns a flaw into a DamageError for the file the bytes came from.
func (f *flaw) at(path string, b []byte) *DamageError {
	off := min(max(f.offset, 0), len(b))
	return &DamageError{Path: path, Line: 1 + bytes.Count(b[:off], []byte{'\n'}), Reason: f.reason}
}

// missingFields names the fields an index entry or history line lacks, from
// the has-bits of fastEntry; withID is set for history lines.
func missingFields(has uint8, atKey string, withID bool) string {
	var miss []string
	if withID && has&hasThreadID == 0 {
		miss = append(miss, "threadId (a string)")
	}
	if has&hasHead == 0 {
		miss = append(miss, "head (a string)")
	}
	if has&hasStart == 0 {
		miss = append(miss, "start (a string)")
	}
	if has&hasAt == 0 {
		miss = append(miss, atKey+" (a number)")
	}
	return "lacks " + strings.Join(miss, ", ")
}

// keptAsideMarker is what a repair inserts between a damaged file's name and
// the time it set the file aside: threads.json.damaged-20260509T120000Z.
// Readers of the index ignore such files (they neither are threads.json nor
// end in .jsonl); garbage collection keeps every node they name.
const keptAsideMarker = ".damaged-"

// KeptAsideName is the name a damaged file is kept under once a repair has
// rebuilt it: "<path>.damaged-<UTC time>".
func KeptAsideName(path string, at time.Time) string {
	return path + keptAsideMarker + at.UTC().Format("20060102T150405Z")
}

// KeptAside lists the damaged files a repair has set aside in a bundle
// directory and its history directory, sorted: every entry so named,
// whatever it is, so that one that cannot be read is an error for the
// caller rather than a file passed over.
func KeptAside(bundleDir string) ([]string, error) {
	var out []string
	for _, dir := range []string{bundleDir, HistoryDir(bundleDir)} {
		entries, err := os.ReadDir(dir)
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			continue // nothing set aside; what is wrong there, the index reader says
		}
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			if strings.Contains(e.Name(), keptAsideMarker) {
				out = append(out, filepath.Join(dir, e.Name()))
			}
		}
	}
	sort.Strings(out)
	return out, nil
}

// badHashes says what is wrong with the head and start a line names, or ""
// when both are hashes in the CAS's own form (ids.IsHash). A value in any
// other form — cut, lengthened, lower case, empty, with a letter the
// alphabet lacks — names no node, and the thread's chain would be
// unreachable from it: whatever acts on every thread must see the line as
// damaged, not as a thread whose nodes are gone.
func badHashes(head, start string) string {
	var bad []string
	for _, f := range [...]struct{ name, value string }{{"head", head}, {"start", start}} {
		if !ids.IsHash(f.value) {
			bad = append(bad, fmt.Sprintf("%s %q", f.name, clip(f.value)))
		}
	}
	if len(bad) == 0 {
		return ""
	}
	what := " is not a node hash"
	if len(bad) == 2 {
		what = " are not node hashes"
	}
	return strings.Join(bad, " and ") + what + " (13 characters of 0-9 and upper-case A-Z, as the CAS names its files)"
}
