package executor

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// Tags of the debug log lines the executor writes (8 Crockford characters,
// as the original's log tags).
const (
	TagStarted  = "T9HQ2KHM"
	TagStep     = "N7BW4YHQ"
	TagFinished = "R2XK8MDA"
	TagError    = "Q3MN8YKW"
	TagKilled   = "V8JX4NP2"
)

// DebugLog appends {tag, content, timestamp} lines to a thread's
// .info.jsonl. It is safe for concurrent use.
//
// A line is written whole or not at all. A write cut short (a full disk) is
// cut back off, and a record is never started after a partial line (one
// left by a crash, or by a cut that failed too): that line is removed
// first. Readers of the log therefore only ever see whole JSON lines, and
// a tailer that waits for a newline never has a line it waited for removed.
type DebugLog struct {
	path string
	now  func() time.Time
	mu   sync.Mutex
	// open opens the log for appending; tests substitute files that fail
	// part-way.
	open func(path string) (logFile, error)
}

// logFile is what a write needs of the open log.
type logFile interface {
	io.Writer
	io.ReaderAt
	Seek(offset int64, whence int) (int64, error)
	Truncate(size int64) error
	Close() error
}

// NewDebugLog writes to path, creating its directory on first write.
func NewDebugLog(path string, now func() time.Time) *DebugLog {
	return &DebugLog{path: path, now: now, open: openLogFile}
}

// openLogFile opens path for appending and holds an exclusive lock on it
// until it is closed, so writers in other processes (or a second DebugLog
// on the same thread) never interleave with a write and its cut. Where the
// filesystem has no locks (some network mounts), it writes unlocked, as
// one writer per thread still holds.
func openLogFile(path string) (logFile, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_APPEND|os.O_CREATE, 0o644)
	if os.IsNotExist(err) {
		if err = os.MkdirAll(filepath.Dir(path), 0o755); err == nil {
			f, err = os.OpenFile(path, os.O_RDWR|os.O_APPEND|os.O_CREATE, 0o644)
		}
	}
	if err != nil {
		return nil, err
	}
	for unix.Flock(int(f.Fd()), unix.LOCK_EX) == unix.EINTR {
		// a signal arrived while waiting: wait on
	}
	return f, nil // closing the file releases the lock
}

// logLine is the original's record shape.
type logLine struct {
	Tag       string `json:"tag"`
	Content   string `json:"content"`
	Timestamp int64  `json:"timestamp"`
}

// Write appends one line. Errors are dropped: a debug log must never stop
// a thread, and a record that cannot be written whole is lost.
func (l *DebugLog) Write(tag, content string) {
	// Dropped, as said above.
	_ = l.Append(logLine{Tag: tag, Content: content, Timestamp: l.now().UnixMilli()})
}

// Append writes v as one JSON line, whole or not at all, as Write does:
// the thread's other line files (the usage sidecar) share the guarantee.
// A line written is then told to the watchers (WatchAppends).
func (l *DebugLog) Append(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	if err := l.appendLine(b); err != nil {
		return err
	}
	if watchers := appendWatchers.Load(); watchers != nil {
		for _, w := range *watchers {
			w.fn(l.path)
		}
	}
	return nil
}

// appendLine writes b, one whole line, to the end of the log.
func (l *DebugLog) appendLine(b []byte) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	open := l.open
	if open == nil {
		open = openLogFile
	}
	f, err := open(l.path)
	if err != nil {
		return err
	}
	// Dropped like every error here (see above): the record is lost at
	// worst, and the next Write cuts off whatever part of it is left.
	defer func() { _ = f.Close() }()
	end, err := wholeLinesEnd(f)
	if err != nil {
		return err
	}
	if n, err := f.Write(b); err != nil || n != len(b) {
		// The file is appended to only here, under the lock: everything
		// past end is this record's beginning.
		// Should this fail too, the next Write's wholeLinesEnd cuts the
		// partial line off before appending.
		_ = f.Truncate(end)
		if err == nil {
			err = io.ErrShortWrite
		}
		return err
	}
	return nil
}

// wholeLinesEnd returns the size of the log, first cutting off a partial
// last line if there is one. It fails when it cannot tell or cannot cut,
// and then nothing may be appended.
func wholeLinesEnd(f logFile) (int64, error) {
	end, err := f.Seek(0, io.SeekEnd)
	if err != nil || end == 0 {
		return end, err
	}
	var last [1]byte
	if _, err := f.ReadAt(last[:], end-1); err != nil {
		return 0, err
	}
	if last[0] == '\n' {
		return end, nil
	}
	// Look back for the end of the last whole line.
	buf := make([]byte, 4096)
	cut := int64(0)
	for off := end; off > 0; {
		n := min(off, int64(len(buf)))
		off -= n
		if _, err := f.ReadAt(buf[:n], off); err != nil {
			return 0, err
		}
		if i := bytes.LastIndexByte(buf[:n], '\n'); i >= 0 {
			cut = off + int64(i) + 1
			break
		}
	}
	if err := f.Truncate(cut); err != nil {
		return 0, err
	}
	return cut, nil
}

// A debug log is written by whichever DebugLog the run, its pause gate or
// its oversight made, so the engine host learns of every line here, by
// path, rather than from each writer: it passes them on as changes of the
// thread (package host), which wake the readers following it.

// appendWatcher is one WatchAppends registration.
type appendWatcher struct{ fn func(path string) }

// appendWatchers are the registrations in force, replaced whole on each
// change so that Append reads them without a lock.
var (
	appendWatchers   atomic.Pointer[[]*appendWatcher]
	appendWatchersMu sync.Mutex // serialises the replacements
)

// WatchAppends has fn called with the path of every line a DebugLog of
// this process appends from now on, once the line is in the file, until
// the returned stop is called. fn runs on the appending goroutine, so it
// must be quick and must not write to a debug log itself.
func WatchAppends(fn func(path string)) (stop func()) {
	w := &appendWatcher{fn: fn}
	appendWatchersMu.Lock()
	defer appendWatchersMu.Unlock()
	var next []*appendWatcher
	if cur := appendWatchers.Load(); cur != nil {
		next = slices.Clone(*cur)
	}
	next = append(next, w)
	appendWatchers.Store(&next)
	var once sync.Once
	return func() {
		once.Do(func() {
			appendWatchersMu.Lock()
			defer appendWatchersMu.Unlock()
			next := slices.DeleteFunc(slices.Clone(*appendWatchers.Load()), func(o *appendWatcher) bool { return o == w })
			appendWatchers.Store(&next)
		})
	}
}
