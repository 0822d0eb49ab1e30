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
func AppendHistory(bundleDir string, e HistoryEntry) error {
	line, err := json.Marshal(e)
	if err != nil {
		return err
	}
	line = append(line, '\n')
	path := HistoryFile(bundleDir, e.CompletedAt)
	return atomicfile.Update(HistoryDir(bundleDir), func() error {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err != nil {
			return err
		}
		if _, err := f.Write(line); err != nil {
			f.Close()
			return err
		}
		if err := f.Sync(); err != nil {
			f.Close()
			return err
		}
		return f.Close()
	})
}

// historyFiles lists the .jsonl files of a bundle, sorted by name (date).
func historyFiles(bundleDir string) ([]string, error) {
	entries, err := os.ReadDir(HistoryDir(bundleDir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("failed to read history directory %s: %w", HistoryDir(bundleDir), err)
	}
	var out []string
	for _, e := range entries {
		if !e.IsDir() && strings.HasSuffix(e.Name(), ".jsonl") {
			out = append(out, filepath.Join(HistoryDir(bundleDir), e.Name()))
		}
	}
	sort.Strings(out)
	return out, nil
}

// looseHistory decodes a line without trusting its types.
type looseHistory struct {
	ThreadID    any `json:"threadId"`
	Head        any `json:"head"`
	Start       any `json:"start"`
	CompletedAt any `json:"completedAt"`
}

// parseHistoryLine returns the entry on one line, or false for a blank,
// invalid or incomplete line (which readers skip).
func parseHistoryLine(line []byte) (HistoryEntry, bool) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return HistoryEntry{}, false
	}
	if e, valid, ok := scanHistoryLine(line); ok {
		return e, valid
	}
	return decodeHistoryLine(line)
}

// decodeHistoryLine is the general (slower) reader behind parseHistoryLine.
func decodeHistoryLine(line []byte) (HistoryEntry, bool) {
	var l looseHistory
	if err := json.Unmarshal(line, &l); err != nil {
		return HistoryEntry{}, false
	}
	id, ok1 := l.ThreadID.(string)
	head, ok2 := l.Head.(string)
	start, ok3 := l.Start.(string)
	at, ok4 := l.CompletedAt.(float64)
	if !ok1 || !ok2 || !ok3 || !ok4 {
		return HistoryEntry{}, false
	}
	return HistoryEntry{ThreadID: id, Head: head, Start: start, CompletedAt: int64(at)}, true
}

// EachHistory calls fn for every valid history line of a bundle, oldest file
// first.
func EachHistory(bundleDir string, fn func(HistoryEntry) error) error {
	files, err := historyFiles(bundleDir)
	if err != nil {
		return err
	}
	for _, path := range files {
		b, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("failed to read history file %s: %w", path, err)
		}
		for len(b) > 0 {
			line := b
			if i := bytes.IndexByte(b, '\n'); i >= 0 {
				line, b = b[:i], b[i+1:]
			} else {
				b = nil
			}
			if e, ok := parseHistoryLine(line); ok {
				if err := fn(e); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// ReadHistory returns every valid history entry of a bundle.
func ReadHistory(bundleDir string) ([]HistoryEntry, error) {
	var out []HistoryEntry
	err := EachHistory(bundleDir, func(e HistoryEntry) error {
		out = append(out, e)
		return nil
	})
	return out, err
}

// RemoveHistory drops every line about id from every history file of the
// bundle and returns how many it dropped. Lines it cannot parse are kept:
// they are not ours to judge. A missing history directory removes nothing.
func RemoveHistory(bundleDir, id string) (int, error) {
	files, err := historyFiles(bundleDir)
	if err != nil || len(files) == 0 {
		return 0, err
	}
	removed := 0
	err = atomicfile.Update(HistoryDir(bundleDir), func() error {
		for _, path := range files {
			b, err := os.ReadFile(path)
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				return fmt.Errorf("failed to read history file %s: %w", path, err)
			}
			var kept bytes.Buffer
			dropped := 0
			sc := bufio.NewScanner(bytes.NewReader(b))
			sc.Buffer(make([]byte, 0, 64*1024), len(b)+1)
			for sc.Scan() {
				line := sc.Bytes()
				if e, ok := parseHistoryLine(line); ok && e.ThreadID == id {
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
