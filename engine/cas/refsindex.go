package cas

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/uncaged/workflow/engine/atomicfile"
	"github.com/uncaged/workflow/engine/ids"
	"github.com/uncaged/workflow/engine/node"
)

// The refs index is a cache beside the blobs: one line
// "HASH N REF... CHECK\n" per blob this store wrote, where N is how many
// refs follow and CHECK is the hash (ids.HashBytes) of everything before
// the space that precedes it. A blob's refs never change (its name is the
// hash of its bytes), so an entry never goes stale; it lets garbage
// collection find what a million blobs point to by reading one file
// instead of opening every blob. Blobs without an entry (written by
// another implementation — the original never writes this file — or whose
// refs are not all canonical hashes) are simply read.
//
// A collection trusts an entry instead of the blob, so a line must never
// read as an entry it is not. The count makes a torn append harmless: one
// cut short (a full disk, a crash) is completed by the next append's line,
// and without the count "A R1 " + "B R3\n" would read as A pointing at R1,
// B and R3 — a collection trusting it would sweep A's real second ref. The
// check makes any other change harmless: a flipped byte that turned one
// ref into another hash, or the entry's own hash into another blob's,
// would make the sweep take what the blob really points to; with the
// check, such a line is a flaw, and its blob is read instead.
//
// Lines written before the check existed ("HASH N REF..." and, older,
// "HASH REF...") are read but not trusted: nothing tells a damaged one
// from a sound one, so their blobs are read, and the next collection's
// rewrite gives them a check.
const refsIndexName = "refs.idx"

func (s *Store) refsIndexPath() string { return filepath.Join(s.dir, refsIndexName) }

// indexRefs appends b's entry. Appenders share a lock that a rewrite takes
// exclusively, so an append never lands in a file about to be replaced.
// Failures are ignored: the index is only a cache.
func (s *Store) indexRefs(hash string, b []byte) {
	refs := node.RefsOf(b)
	if !allCanonical(refs) {
		return
	}
	line := appendIndexLine(make([]byte, 0, (ids.HashLen+1)*(2+len(refs))+4), hash, refs)
	lock, err := s.lockIndex(unix.LOCK_SH)
	if err != nil {
		return
	}
	defer unlockIndex(lock)
	f, err := os.OpenFile(s.refsIndexPath(), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return
	}
	// Ignored like every failure here: a line lost or torn is skipped by
	// readers, and a blob missing from the index is read by itself.
	_, _ = f.Write(line)
	_ = f.Close()
}

func (s *Store) lockIndex(how int) (*os.File, error) {
	f, err := os.OpenFile(s.refsIndexPath()+".lock", os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	for {
		err = unix.Flock(int(f.Fd()), how)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		_ = f.Close() // the lock file holds no data
		return nil, err
	}
	return f, nil
}

// unlockIndex drops the lock. The lock file holds no data, and closing it
// drops the lock even if the unlock failed: there is nothing to report.
func unlockIndex(f *os.File) {
	_ = unix.Flock(int(f.Fd()), unix.LOCK_UN)
	_ = f.Close()
}

// RefsIndex reads the refs index: hash → the hashes it points to, from
// the lines whose check holds. Torn, damaged or unchecked lines are
// skipped: their blobs are read instead.
func (s *Store) RefsIndex() (map[string][]string, error) {
	idx, _, _, err := s.readRefsIndex(nil)
	return idx, err
}

// RefsIndexFlaw is a line of the refs index that cannot be used.
type RefsIndexFlaw struct {
	// Line is 1-based.
	Line int `json:"line"`
	// Reason says why the line cannot be used.
	Reason string `json:"reason"`
}

// CheckRefsIndex reads the refs index as RefsIndex does and also returns
// every line it had to skip as damaged, and how many lines an older
// version wrote without a check (skipped too, but sound as far as anyone
// knows), for a check of the store. The index is only a cache, so a
// skipped line costs a blob read, never a blob.
func (s *Store) CheckRefsIndex() (map[string][]string, []RefsIndexFlaw, int, error) {
	var flaws []RefsIndexFlaw
	idx, unchecked, _, err := s.readRefsIndex(func(line int, reason string) {
		flaws = append(flaws, RefsIndexFlaw{Line: line, Reason: reason})
	})
	return idx, flaws, unchecked, err
}

// RefsIndexPath is the refs index file, for messages about it.
func (s *Store) RefsIndexPath() string { return s.refsIndexPath() }

// readRefsIndex returns the checked entries, how many unchecked lines an
// older version wrote, and whether the file exists.
func (s *Store) readRefsIndex(flawed func(line int, reason string)) (map[string][]string, int, bool, error) {
	if flawed == nil {
		flawed = func(int, string) {}
	}
	b, err := readRegular(s.refsIndexPath())
	if errors.Is(err, fs.ErrNotExist) {
		return map[string][]string{}, 0, false, nil
	}
	if err != nil {
		return nil, 0, true, err
	}
	idx := make(map[string][]string, bytes.Count(b, []byte{'\n'}))
	lineNo, unchecked := 0, 0
	for len(b) > 0 {
		lineNo++
		nl := bytes.IndexByte(b, '\n')
		if nl < 0 {
			flawed(lineNo, "the last line is cut short")
			break
		}
		line := b[:nl]
		b = b[nl+1:]
		hash, refs, checked, reason := parseIndexLine(line)
		switch {
		case reason != "":
			flawed(lineNo, reason)
		case !checked:
			unchecked++
		default:
			idx[hash] = refs
		}
	}
	return idx, unchecked, true, nil
}

// parseIndexLine reads "HASH N REF... CHECK", or an older line without
// the check ("HASH N REF...", "HASH REF...": checked is false), or says
// why it cannot.
func parseIndexLine(line []byte) (hash string, refs []string, checked bool, reason string) {
	const width = ids.HashLen + 1 // " REF"
	if len(line) < ids.HashLen || !ids.IsHash(string(line[:ids.HashLen])) {
		return "", nil, false, "does not start with a hash"
	}
	hash = string(line[:ids.HashLen])
	rest := line[ids.HashLen:]
	count := -1
	if len(rest) >= 2 && rest[0] == ' ' {
		digits := 0
		for digits < 6 && 1+digits < len(rest) && rest[1+digits] >= '0' && rest[1+digits] <= '9' {
			digits++
		}
		if digits > 0 && (1+digits == len(rest) || rest[1+digits] == ' ') {
			count = 0
			for _, c := range rest[1 : 1+digits] {
				count = count*10 + int(c-'0')
			}
			rest = rest[1+digits:]
		}
	}
	if len(rest)%width != 0 {
		return "", nil, false, "its refs do not match its count (an append cut short?)"
	}
	fields := len(rest) / width
	switch {
	case count >= 0 && fields == count+1:
		check := rest[len(rest)-width:]
		body := line[:len(line)-width]
		if check[0] != ' ' || ids.HashBytes(body) != string(check[1:]) {
			return "", nil, false, "its check does not match its content (the line is damaged)"
		}
		checked, rest = true, rest[:len(rest)-width]
	case count >= 0 && fields != count:
		return "", nil, false, "its refs do not match its count (an append cut short?)"
	}
	refs = make([]string, 0, len(rest)/width)
	for ; len(rest) > 0; rest = rest[width:] {
		r := string(rest[1:width])
		if rest[0] != ' ' || !ids.IsHash(r) {
			return "", nil, false, "not a hash followed by hashes"
		}
		refs = append(refs, r)
	}
	return hash, refs, checked, ""
}

// readRegular reads a file the store keeps beside its blobs, refusing
// anything but a regular file (a FIFO would block, a device never end).
func readRegular(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }() // read only
	if err := checkRegular(f); err != nil {
		return nil, err
	}
	return io.ReadAll(f)
}

// checkRegular refuses an open file that is not a regular one.
func checkRegular(f *os.File) error {
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file (%v)", f.Name(), st.Mode().Type())
	}
	return nil
}

// RebuildRefsIndex replaces the refs index with entries, which the caller
// read from the blobs themselves (a repair). A blob stored since the caller
// looked is indexed from its own bytes, read under the index lock, so the
// rebuilt index holds no entry nobody checked.
func (s *Store) RebuildRefsIndex(entries map[string][]string) error {
	lock, err := s.lockIndex(unix.LOCK_EX)
	if err != nil {
		return err
	}
	defer unlockIndex(lock)
	current, err := s.RefsIndex()
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	w := bufio.NewWriter(&buf)
	for h, refs := range entries {
		writeIndexLine(w, h, refs)
	}
	for h := range current {
		if _, ok := entries[h]; ok {
			continue
		}
		b, err := os.ReadFile(s.path(h))
		if err != nil {
			continue // gone, or unreadable: a collection reads it itself
		}
		refs := node.RefsOf(b)
		if allCanonical(refs) {
			writeIndexLine(w, h, refs)
		}
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("cas: building the refs index: %w", err)
	}
	return atomicfile.Write(s.refsIndexPath(), buf.Bytes(), 0o644)
}

func allCanonical(refs []string) bool {
	for _, r := range refs {
		if !ids.IsHash(r) {
			return false
		}
	}
	return true
}

// RewriteRefsIndex replaces the index with the given entries (after a
// collection: the blobs that survived) plus whatever was appended since the
// caller read it, minus the entries of the deleted blobs. It holds the
// index lock exclusively, so no append is lost to the rename.
func (s *Store) RewriteRefsIndex(entries map[string][]string, deleted []string) error {
	if _, err := os.Stat(s.dir); errors.Is(err, fs.ErrNotExist) && len(entries) == 0 {
		return nil // an empty store has nothing to index
	}
	lock, err := s.lockIndex(unix.LOCK_EX)
	if err != nil {
		return err
	}
	defer unlockIndex(lock)
	// Appends made since the caller read the index are kept too.
	current, err := s.RefsIndex()
	if err != nil {
		return err
	}
	for _, h := range deleted {
		delete(current, h)
	}
	var buf bytes.Buffer
	buf.Grow((len(entries) + len(current)) * 3 * (ids.HashLen + 1))
	w := bufio.NewWriter(&buf)
	for h, refs := range entries {
		writeIndexLine(w, h, refs)
		delete(current, h)
	}
	// What is left was appended during the collection (or is stale: a blob
	// removed by hand); a stat tells them apart for these few.
	for h, refs := range current {
		if _, err := os.Stat(s.path(h)); err == nil {
			writeIndexLine(w, h, refs)
		}
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("cas: building the refs index: %w", err)
	}
	return atomicfile.Write(s.refsIndexPath(), buf.Bytes(), 0o644)
}

// writeIndexLine buffers one line. A bufio.Writer keeps its first error
// and returns it from Flush, which the callers check.
func writeIndexLine(w *bufio.Writer, h string, refs []string) {
	var buf [(ids.HashLen + 1) * 21]byte
	_, _ = w.Write(appendIndexLine(buf[:0], h, refs))
}

// appendIndexLine appends "HASH N REF... CHECK\n".
func appendIndexLine(line []byte, h string, refs []string) []byte {
	from := len(line)
	line = append(line, h...)
	line = append(line, ' ')
	line = strconv.AppendInt(line, int64(len(refs)), 10)
	for _, r := range refs {
		line = append(line, ' ')
		line = append(line, r...)
	}
	check := ids.HashBytes(line[from:])
	line = append(line, ' ')
	line = append(line, check...)
	return append(line, '\n')
}
