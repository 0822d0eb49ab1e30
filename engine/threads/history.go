package threads

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/uncaged/workflow/engine/atomicfile"
)

// HistoryEntry is one line of history/YYYY-MM-DD.jsonl: a finished thread.
// Field order is the original's.
type HistoryEntry struct {
	ThreadID    string `json:"threadId"`
	Head        string `json:"head"`
	Start       string `json:"start"`
	CompletedAt int64  `json:"completedAt"`
}

// HistoryDir is the history directory inside a bundle directory.
func HistoryDir(bundleDir string) string { return filepath.Join(bundleDir, "history") }

// HistoryFile is the file a thread completed at completedAt (ms) goes to:
// named by the UTC date.
func HistoryFile(bundleDir string, completedAt int64) string {
	day := time.UnixMilli(completedAt).UTC().Format("2006-01-02")
	return filepath.Join(HistoryDir(bundleDir), day+".jsonl")
}

// AppendHistory appends one line for a finished thread and syncs it.
// Threads of a bundle that finish at the same moment share one write and
// one fsync of the day's file: the lines waiting when the history lock is
// taken are appended together, as the index's changes are (commit.go).
func AppendHistory(bundleDir string, e HistoryEntry) error {
	line, err := json.Marshal(e)
	if err != nil {
		return err
	}
	a := &historyLine{path: HistoryFile(bundleDir, e.CompletedAt), line: append(line, '\n'), lead: make(chan bool, 1)}
	dir := filepath.Clean(HistoryDir(bundleDir))
	w := historyWriterFor(dir)
	w.mu.Lock()
	w.pending = append(w.pending, a)
	if w.leading {
		w.mu.Unlock()
		if !<-a.lead {
			return a.err
		}
	} else {
		w.leading = true
		w.mu.Unlock()
	}
	var group []*historyLine
	take := func() {
		w.mu.Lock()
		group, w.pending = w.pending, nil
		w.mu.Unlock()
	}
	err = atomicfile.Update(dir, func() error {
		take()
		return appendLines(group)
	})
	if group == nil {
		// The lock could not be had: the lines waiting fail with that.
		take()
	}
	w.mu.Lock()
	if len(w.pending) > 0 {
		w.pending[0].lead <- true
	} else {
		w.leading = false
	}
	w.mu.Unlock()
	for _, o := range group {
		if o.err == nil {
			o.err = err
		}
		if o != a {
			o.lead <- false
		}
	}
	return a.err
}

// historyLine is one finished thread's line waiting to be appended.
type historyLine struct {
	path string
	line []byte
	err  error
	// lead is sent true when this caller is to append the next group,
	// false when its line was appended (or failed: err).
	lead chan bool
}

// historyWriter groups the appends to one bundle's history made in this
// process.
type historyWriter struct {
	mu      sync.Mutex
	pending []*historyLine
	leading bool
}

var historyWriters sync.Map // history directory → *historyWriter

func historyWriterFor(dir string) *historyWriter {
	if w, ok := historyWriters.Load(dir); ok {
		return w.(*historyWriter)
	}
	w, _ := historyWriters.LoadOrStore(dir, &historyWriter{})
	return w.(*historyWriter)
}

// appendLines appends each day's lines of group to its file with one
// write and one fsync, holding the history lock; the lines of a file that
// cannot be written get its error.
func appendLines(group []*historyLine) error {
	var created bool
	var dir string
	for len(group) > 0 {
		path := group[0].path
		var mine, rest []*historyLine
		var lines []byte
		for _, a := range group {
			if a.path == path {
				mine = append(mine, a)
				lines = append(lines, a.line...)
			} else {
				rest = append(rest, a)
			}
		}
		group = rest
		made, err := appendToFile(path, lines)
		for _, a := range mine {
			a.err = err
		}
		if made {
			created, dir = true, filepath.Dir(path)
		}
	}
	if created {
		// A day's first completion creates its file; the file's name must
		// be on disk too before the thread leaves threads.json.
		return atomicfile.SyncDir(dir)
	}
	return nil
}

// appendToFile appends lines to path and syncs it, reporting whether it
// created the file.
func appendToFile(path string, lines []byte) (created bool, err error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return false, err
	}
	_, statErr := os.Lstat(path)
	created = errors.Is(statErr, fs.ErrNotExist)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return false, err
	}
	if torn, err := endsMidLine(f); err != nil {
		_ = f.Close() // nothing written yet; err is what matters
		return created, err
	} else if torn {
		// A crash cut the last line short. Starting a fresh line keeps
		// these readable; the torn one stays, to be reported.
		lines = append([]byte{'\n'}, lines...)
	}
	if _, err := f.Write(lines); err != nil {
		return created, errors.Join(err, f.Close())
	}
	if err := atomicfile.Fsync(f); err != nil {
		return created, errors.Join(err, f.Close())
	}
	return created, f.Close()
}

// endsMidLine reports whether a non-empty file lacks its final newline.
func endsMidLine(f *os.File) (bool, error) {
	st, err := f.Stat()
	if err != nil || st.Size() == 0 {
		return false, err
	}
	var last [1]byte
	if _, err := f.ReadAt(last[:], st.Size()-1); err != nil {
		return false, err
	}
	return last[0] != '\n', nil
}

// historyFiles lists the .jsonl files of a bundle, sorted by name (date):
// every entry so named, whatever it is, so that a history file replaced by
// a directory or a link to nothing is read, and reported, rather than
// passed over. A history directory that is there but cannot be listed is
// damage; none at all is an empty history. So is one whose bundle
// directory cannot be read, which the index reader reports.
func historyFiles(bundleDir string) ([]string, *DamageError) {
	dir := HistoryDir(bundleDir)
	entries, err := os.ReadDir(dir)
	if err != nil {
		if dirProblem(bundleDir) != "" {
			return nil, nil
		}
		missing := false
		problem := openProblem(dir, err, &missing)
		for tries := 1; problem == appeared && tries < 3; tries++ {
			// Made by the first completion meanwhile: list it now.
			if entries, err = os.ReadDir(dir); err == nil {
				return historyPaths(dir, entries), nil
			}
			problem = openProblem(dir, err, &missing)
		}
		if missing {
			return nil, nil
		}
		if p := dirProblem(dir); p != "" {
			problem = p
		}
		return nil, unreadable(dir, problem)
	}
	return historyPaths(dir, entries), nil
}

// historyPaths is the .jsonl files among the entries of dir, sorted.
func historyPaths(dir string, entries []os.DirEntry) []string {
	var out []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".jsonl") {
			out = append(out, filepath.Join(dir, e.Name()))
		}
	}
	sort.Strings(out)
	return out
}

// looseHistory decodes a line without trusting its types.
type looseHistory struct {
	ThreadID    any `json:"threadId"`
	Head        any `json:"head"`
	Start       any `json:"start"`
	CompletedAt any `json:"completedAt"`
}

// parseHistoryLine returns the entry on one line. ok is false for a blank
// line (which readers skip, as the original does) and for a damaged one,
// which has a reason.
func parseHistoryLine(line []byte) (e HistoryEntry, reason string, ok bool) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return HistoryEntry{}, "", false
	}
	if e, reason, fast := scanHistoryLine(line); fast {
		return e, reason, reason == ""
	}
	e, reason = decodeHistoryLine(line)
	return e, reason, reason == ""
}

// decodeHistoryLine is the general (slower) reader behind parseHistoryLine.
func decodeHistoryLine(line []byte) (HistoryEntry, string) {
	var l looseHistory
	if err := json.Unmarshal(line, &l); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) && typeErr.Field == "" {
			return HistoryEntry{}, "not a JSON object"
		}
		if !json.Valid(line) {
			return HistoryEntry{}, "not valid JSON: " + err.Error()
		}
		return HistoryEntry{}, "not a history entry: " + err.Error()
	}
	id, ok1 := l.ThreadID.(string)
	head, ok2 := l.Head.(string)
	start, ok3 := l.Start.(string)
	at, ok4 := l.CompletedAt.(float64)
	if !ok1 || !ok2 || !ok3 || !ok4 {
		has := hasBits(ok2, ok3, ok4)
		if ok1 {
			has |= hasThreadID
		}
		return HistoryEntry{}, missingFields(has, "completedAt", true)
	}
	if bad := badHashes(head, start); bad != "" {
		return HistoryEntry{}, bad
	}
	return HistoryEntry{ThreadID: id, Head: head, Start: start, CompletedAt: int64(at)}, ""
}

// EachHistory calls fn for every history line of a bundle, oldest file
// first. Blank lines are skipped; a line that cannot be read completely
// stops the walk with a *DamageError naming the file and line.
func EachHistory(bundleDir string, fn func(HistoryEntry) error) error {
	return eachHistory(bundleDir, atLine(fn), func(d *DamageError) error { return d }, nil)
}

// EachHistoryTolerant is EachHistory for those who show what they can: a
// damaged line is handed to damaged and the walk goes on.
func EachHistoryTolerant(bundleDir string, fn func(HistoryEntry) error, damaged func(*DamageError)) error {
	return eachHistory(bundleDir, atLine(fn), func(d *DamageError) error {
		damaged(d)
		return nil
	}, nil)
}

// lineFn receives a history entry with the file and 1-based line it is on.
type lineFn func(e HistoryEntry, path string, line int) error

// atLine adapts a callback that needs no place.
func atLine(fn func(HistoryEntry) error) lineFn {
	return func(e HistoryEntry, _ string, _ int) error { return fn(e) }
}

// eachHistory walks every history file of a bundle: each intact line to
// fn, each damaged place to damaged, and, when file is set, each file's
// bytes as first read.
func eachHistory(bundleDir string, fn lineFn, damaged func(*DamageError) error, file func(path string, b []byte)) error {
	files, d := historyFiles(bundleDir)
	if d != nil {
		return damaged(d)
	}
	for _, path := range files {
		b, missing, problem := readIndexFile(path)
		if missing {
			problem = "vanished while it was being read"
		}
		if problem != "" {
			if err := damaged(unreadable(path, problem)); err != nil {
				return err
			}
			continue
		}
		if file != nil {
			file(path, b)
		}
		torn, err := eachHistoryLine(path, b, 0, 1, fn, damaged)
		if err != nil || torn < 0 {
			if err != nil {
				return err
			}
			continue
		}
		if err := recheckTornEnd(bundleDir, path, b, torn, fn, damaged); err != nil {
			return err
		}
	}
	return nil
}

// eachHistoryLine walks the lines of one history file from offset off
// (line number lineNo). A damaged last line without its newline may be an
// append still in progress, so it is not reported: its offset is returned
// for the caller to look again (-1 when there is none).
func eachHistoryLine(path string, b []byte, off, lineNo int, fn lineFn, damaged func(*DamageError) error) (torn int, err error) {
	for off < len(b) {
		line, next := b[off:], len(b)
		if i := bytes.IndexByte(line, '\n'); i >= 0 {
			line, next = line[:i], off+i+1
		}
		e, reason, ok := parseHistoryLine(line)
		switch {
		case ok:
			if err := fn(e, path, lineNo); err != nil {
				return -1, err
			}
		case reason != "" && next == len(b) && b[len(b)-1] != '\n':
			return off, nil
		case reason != "":
			if err := damaged(&DamageError{Path: path, Line: lineNo, Reason: reason}); err != nil {
				return -1, err
			}
		}
		off, lineNo = next, lineNo+1
	}
	return -1, nil
}

// recheckTornEnd reads a history file again, under the lock appenders hold,
// from the start of a last line that looked cut short. An append that was
// under way is complete by then; a line still cut short is damage.
func recheckTornEnd(bundleDir, path string, seen []byte, torn int, fn lineFn, damaged func(*DamageError) error) error {
	report := func(b []byte, off int) error {
		line := 1 + bytes.Count(b[:off], []byte{'\n'})
		return damaged(&DamageError{Path: path, Line: line, Reason: "the last line is cut short (the file ends in the middle of it)"})
	}
	lock, err := atomicfile.Acquire(HistoryDir(bundleDir))
	if err != nil {
		return report(seen, torn)
	}
	b, err := os.ReadFile(path)
	_ = lock.Release() // only read under it; closing drops the lock regardless
	if err != nil || !bytes.HasPrefix(b, seen[:torn]) {
		// Unreadable now, or rewritten meanwhile: what was seen stands.
		return report(seen, torn)
	}
	lineNo := 1 + bytes.Count(b[:torn], []byte{'\n'})
	again, err := eachHistoryLine(path, b, torn, lineNo, fn, damaged)
	if err != nil || again < 0 {
		return err
	}
	return report(b, again)
}

// ReadHistory returns every history entry of a bundle, or a *DamageError
// for a line that cannot be read completely.
func ReadHistory(bundleDir string) ([]HistoryEntry, error) {
	var out []HistoryEntry
	err := EachHistory(bundleDir, func(e HistoryEntry) error {
		out = append(out, e)
		return nil
	})
	return out, err
}

// RemoveHistory drops every line about id from every history file of the
// bundle and returns how many it dropped. Lines it cannot parse are kept,
// so their damage stays visible to every reader. A missing history
// directory removes nothing.
func RemoveHistory(bundleDir, id string) (int, error) {
	files, d := historyFiles(bundleDir)
	if d != nil {
		return 0, d
	}
	if len(files) == 0 {
		return 0, nil
	}
	removed := 0
	err := atomicfile.Update(HistoryDir(bundleDir), func() error {
		for _, path := range files {
			b, missing, problem := readIndexFile(path)
			if missing {
				continue
			}
			if problem != "" {
				return unreadable(path, problem)
			}
			var kept bytes.Buffer
			dropped := 0
			sc := bufio.NewScanner(bytes.NewReader(b))
			sc.Buffer(make([]byte, 0, 64*1024), len(b)+1)
			for sc.Scan() {
				line := sc.Bytes()
				if e, _, ok := parseHistoryLine(line); ok && e.ThreadID == id {
					dropped++
					continue
				}
				kept.Write(line)
				kept.WriteByte('\n')
			}
			if err := sc.Err(); err != nil {
				return fmt.Errorf("failed to read history file %s: %w", path, err)
			}
			if dropped == 0 {
				continue
			}
			if err := atomicfile.Write(path, kept.Bytes(), 0o644); err != nil {
				return err
			}
			removed += dropped
		}
		return nil
	})
	return removed, err
}

// RemoveLines removes every line about thread id from a bundle's
// threads.json and history, and reports whether there was any. A damaged
// index refuses before anything changes; damaged history lines are kept.
func RemoveLines(bundleDir, id string) (bool, error) {
	inIndex, err := Remove(bundleDir, id)
	if err != nil {
		return false, err
	}
	n, err := RemoveHistory(bundleDir, id)
	return inIndex || n > 0, err
}
