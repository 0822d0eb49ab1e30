package executor

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/uncaged/workflow/shared/testkit"
)

// fullDisk is the real log file with a disk that fills up: the armed write
// stores only its first `room` bytes and fails with ENOSPC; failTruncate
// makes the next cut fail too.
type fullDisk struct {
	logFile
	room         *int // -1: unlimited
	failTruncate *bool
}

func (d fullDisk) Write(b []byte) (int, error) {
	if *d.room < 0 || len(b) <= *d.room {
		return d.logFile.Write(b)
	}
	n, _ := d.logFile.Write(b[:*d.room])
	*d.room = -1
	return n, &os.PathError{Op: "write", Path: "log", Err: syscall.ENOSPC}
}

func (d fullDisk) Truncate(size int64) error {
	if *d.failTruncate {
		*d.failTruncate = false
		return syscall.EIO
	}
	return d.logFile.Truncate(size)
}

func newFullDiskLog(t *testing.T) (l *DebugLog, path string, room *int, failTruncate *bool) {
	path = filepath.Join(t.TempDir(), "logs", "H", "T.info.jsonl")
	l = NewDebugLog(path, time.Now)
	room, failTruncate = new(int), new(bool)
	*room = -1
	l.open = func(p string) (logFile, error) {
		f, err := openLogFile(p)
		if err != nil {
			return nil, err
		}
		return fullDisk{logFile: f, room: room, failTruncate: failTruncate}, nil
	}
	return l, path, room, failTruncate
}

// wholeLines checks that the log holds only complete JSON records and
// returns their contents.
func wholeLines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > 0 && b[len(b)-1] != '\n' {
		t.Fatalf("log ends in a partial line: %q", b)
	}
	var out []string
	for _, line := range bytes.Split(bytes.TrimSuffix(b, []byte("\n")), []byte("\n")) {
		if len(line) == 0 && len(b) == 0 {
			break
		}
		var rec logLine
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&rec); err != nil || dec.More() {
			t.Fatalf("line %q is not one record: %v", line, err)
		}
		out = append(out, rec.Content)
	}
	return out
}

// A write that runs out of disk part-way leaves nothing of its record, and
// the next record lands on a line of its own.
func TestDebugLogWriteCutShortLeavesNoPartialLine(t *testing.T) {
	t.Parallel()
	l, path, room, _ := newFullDiskLog(t)
	l.Write("A", "first")
	*room = 10
	l.Write("B", "lost to a full disk")
	if got := wholeLines(t, path); strings.Join(got, ",") != "first" {
		t.Fatalf("after the failed write: %q", got)
	}
	l.Write("C", "after the disk had room again")
	if got := wholeLines(t, path); strings.Join(got, ",") != "first,after the disk had room again" {
		t.Fatalf("records = %q", got)
	}
	// The very first record of a log can be cut short too.
	l2, path2, room2, _ := newFullDiskLog(t)
	*room2 = 3
	l2.Write("A", "lost")
	l2.Write("B", "kept")
	if got := wholeLines(t, path2); strings.Join(got, ",") != "kept" {
		t.Fatalf("records = %q", got)
	}
}

// When the cut fails as well, the partial record is removed before the next
// one starts.
func TestDebugLogNeverAppendsAfterAPartialLine(t *testing.T) {
	t.Parallel()
	l, path, room, failTruncate := newFullDiskLog(t)
	l.Write("A", "first")
	*room, *failTruncate = 7, true
	l.Write("B", "lost, and its cut fails")
	l.Write("C", "third")
	if got := wholeLines(t, path); strings.Join(got, ",") != "first,third" {
		t.Fatalf("records = %q", got)
	}
	// A partial line left by a crash (no trailing newline) is dropped too,
	// however long it is.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(`{"tag":"X","content":"` + strings.Repeat("y", 10000)); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	l.Write("D", "after a crash")
	if got := wholeLines(t, path); strings.Join(got, ",") != "first,third,after a crash" {
		t.Fatalf("records = %q", got)
	}
	// A log holding nothing but a partial line is emptied first.
	if err := os.WriteFile(path, []byte(`{"tag":"X"`), 0o644); err != nil {
		t.Fatal(err)
	}
	l.Write("E", "alone")
	if got := wholeLines(t, path); strings.Join(got, ",") != "alone" {
		t.Fatalf("records = %q", got)
	}
}

// A log whose file cannot be opened drops the record and keeps going.
func TestDebugLogUnwritableIsIgnored(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	l := NewDebugLog(filepath.Join(dir, "file", "T.info.jsonl"), time.Now)
	if err := os.WriteFile(filepath.Join(dir, "file"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	l.Write("A", "nowhere to go") // must not panic
	if _, err := os.Stat(filepath.Join(dir, "file", "T.info.jsonl")); !errors.Is(err, syscall.ENOTDIR) {
		t.Fatalf("stat = %v", err)
	}
}

// waitingOn reports whether some process waits for a lock on the file with
// inode ino (Linux lists blocked requests in /proc/locks with "->").
func waitingOn(ino uint64) bool {
	b, err := os.ReadFile("/proc/locks")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.Contains(line, "->") && strings.Contains(line, ":"+strconv.FormatUint(ino, 10)+" ") {
			return true
		}
	}
	return false
}

// Two writers of one log (a thread run twice at once, another process)
// never interleave a record with another's cut: while one write is under
// way, the other waits for it, and a record cut back off takes no one
// else's with it.
func TestDebugLogSecondWriterWaitsForAWriteAndItsCut(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/proc/locks"); err != nil {
		t.Skip("no /proc/locks to see a waiting writer")
	}
	first, path, room, _ := newFullDiskLog(t)
	first.Write("A", "first")
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	ino := st.Sys().(*syscall.Stat_t).Ino
	second := NewDebugLog(path, time.Now)
	secondDone := make(chan struct{})
	*room = 12
	open := first.open
	first.open = func(p string) (logFile, error) {
		f, err := open(p)
		if err != nil {
			return nil, err
		}
		return interleaved{logFile: f, during: func() {
			go func() {
				second.Write("B", "the other writer's")
				close(secondDone)
			}()
			testkit.WaitUntil(t, "the second writer to wait for the lock", func() bool {
				if waitingOn(ino) {
					return true
				}
				select {
				case <-secondDone:
					t.Error("the second writer wrote while a record was half written")
					return true
				default:
					return false
				}
			})
		}}, nil
	}
	first.Write("C", "cut short by a full disk")
	<-secondDone
	if got := wholeLines(t, path); strings.Join(got, ",") != "first,the other writer's" {
		t.Fatalf("records = %q", got)
	}
}

// interleaved runs during in the middle of the first write through it.
type interleaved struct {
	logFile
	during func()
}

func (f interleaved) Write(b []byte) (int, error) {
	n, err := f.logFile.Write(b)
	f.during()
	return n, err
}
