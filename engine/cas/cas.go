// Package cas is the content-addressed store: one file per node at
// <dir>/<hash>.txt holding the exact bytes that were hashed. Writes are
// atomic and idempotent, so any number of goroutines and processes may put
// the same content at once.
package cas

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/uncaged/workflow/engine/atomicfile"
	"github.com/uncaged/workflow/engine/ids"
	"github.com/uncaged/workflow/engine/node"
)

// ErrNotFound is returned by Get for a hash that is not stored.
var ErrNotFound = errors.New("cas entry not found")

const suffix = ".txt"

// Store is a filesystem CAS rooted at one directory.
type Store struct {
	dir string
	// batch, on a view from Batched, holds back the directory sync of
	// each put until Sync; nil on a store whose puts are durable when
	// they return.
	batch *dirBatch
}

// dirBatch is the directory sync a batched view owes.
type dirBatch struct {
	mu      sync.Mutex
	pending bool
}

// Batched returns a view of s whose puts skip the directory sync that
// makes a new blob's name survive a power cut, until Sync does it once for
// all of them. A blob put through the view is readable at once and its
// bytes are on disk (they are synced before it is renamed into place, so a
// blob is never found torn), but until Sync its name may be lost to a
// power cut (not to a process crash). The executor writes a step's content
// and state nodes through one view and calls Sync before the thread's
// index names the state: one directory sync per step instead of one per
// node.
func (s *Store) Batched() *Store { return &Store{dir: s.dir, batch: &dirBatch{}} }

// Sync makes the names of the blobs put through a batched view since the
// last Sync durable. On a store that is not batched it does nothing.
func (s *Store) Sync() error {
	if s.batch == nil {
		return nil
	}
	s.batch.mu.Lock()
	defer s.batch.mu.Unlock()
	if !s.batch.pending {
		return nil
	}
	// The threads of a workflow sync this one directory at every step:
	// a shared sync serves all those whose blobs are in place when it
	// begins.
	if err := atomicfile.SyncDirShared(s.dir); err != nil {
		return fmt.Errorf("cas sync: %w", err)
	}
	s.batch.pending = false
	return nil
}

// owe records that the view's next Sync must sync the directory.
func (s *Store) owe() {
	if s.batch == nil {
		return
	}
	s.batch.mu.Lock()
	s.batch.pending = true
	s.batch.mu.Unlock()
}

// Open returns the store in dir. The directory is created on first write.
func Open(dir string) *Store { return &Store{dir: dir} }

// Dir is the directory holding the blobs.
func (s *Store) Dir() string { return s.dir }

// Put stores content and returns its hash. Text that is already a node
// envelope is stored unchanged; anything else is wrapped into a content node
// first, so Put("hello") returns the hash of
// "type: content\npayload: hello\nrefs: []\n" — as the original does.
func (s *Store) Put(content string) (string, error) {
	b := []byte(content)
	if !node.IsNodeYAML(b) {
		var err error
		if b, err = node.NewContent(content, nil).Marshal(); err != nil {
			return "", err
		}
	}
	return s.PutBytes(b)
}

// PutNode serializes n and stores it.
func (s *Store) PutNode(n node.Node) (string, error) {
	b, err := n.Marshal()
	if err != nil {
		return "", err
	}
	return s.PutBytes(b)
}

// PutBytes stores b exactly as given and returns its hash. An existing blob
// keeps its bytes (its name is the hash of its contents) but has its
// modification time set to now: garbage collection spares blobs younger
// than its grace period, and a thread that stores content a second time is
// about to link it just as if it were new. When PutBytes returns, the blob
// is stored and counts as young, even against a collection running at the
// same moment (see DeleteUnlessNewer).
func (s *Store) PutBytes(b []byte) (string, error) {
	h := ids.HashBytes(b)
	p := s.path(h)
	for tries := 0; ; tries++ {
		if s.refresh(p) {
			// A blob found in place may be another batched view's, whose
			// name is not durable yet: this view owes a directory sync
			// too.
			s.owe()
			return h, nil
		}
		if tries == 3 {
			return "", fmt.Errorf("cas put %s: something is at %s that is not a readable file", h, p)
		}
		// Written beside the others without a temporary name: threads
		// storing nodes at once change the directory once per blob.
		created, err := atomicfile.CreateNew(p, b, 0o644)
		if err != nil {
			return "", fmt.Errorf("cas put %s: %w", h, err)
		}
		if created {
			break
		}
		// Another put linked it meanwhile: refresh it as found (or, if
		// a collection took it since, write it again).
	}
	if s.batch == nil {
		if err := atomicfile.SyncDir(s.dir); err != nil {
			return "", fmt.Errorf("cas put %s: %w", h, err)
		}
	}
	s.owe()
	s.indexRefs(h, b)
	return h, nil
}

// refresh marks the blob at p as just stored and reports whether it is
// there. The stat after the touch is what makes that answer safe against a
// concurrent DeleteUnlessNewer: a collection that moved the blob aside
// before the touch landed makes the stat miss it (and the caller writes it
// again); one that moves it aside after the stat reads the new time and
// puts it back.
func (s *Store) refresh(p string) bool {
	// A zero access time leaves it alone: only the modification time,
	// which the grace period reads, moves.
	err := os.Chtimes(p, time.Time{}, time.Now())
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return false
	}
	// Any other failure (a blob owned by someone else, a read-only store)
	// leaves the time as it was, which is all a re-put ever did before;
	// the blob is there to link.
	_, err = os.Stat(p)
	return err == nil
}

// tombstones names the private names blobs are moved to while a collection
// decides about them; unique within the process, and the pid makes them
// unique across processes.
var tombstones atomic.Uint64

// testHookSweep, set by tests, runs where a concurrent put would interleave
// with DeleteUnlessNewer: after the age check ("aged", with the blob's
// path) and after the move aside ("moved", with the private name).
var testHookSweep func(point, path string)

// DeleteUnlessNewer removes hash unless its blob was stored, or stored
// again, after cutoff, and reports whether it removed it. A missing blob is
// not an error and reports false.
//
// Checking the age and then deleting would lose a blob that PutBytes
// refreshes in between, after telling its caller the blob is stored. So the
// blob is first moved to a private name, its age read there, and a young
// one moved back: a refresh that landed before the move is seen by that
// read, and one after the move no longer finds the blob and writes it anew.
func (s *Store) DeleteUnlessNewer(hash string, cutoff time.Time) (bool, error) {
	h, err := ids.ParseHash(hash)
	if err != nil {
		return false, err
	}
	p := s.path(h)
	st, err := os.Stat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if st.ModTime().After(cutoff) {
		return false, nil
	}
	if testHookSweep != nil {
		testHookSweep("aged", p)
	}
	tomb := fmt.Sprintf("%s.gc.%d.%d", p, os.Getpid(), tombstones.Add(1))
	if err := os.Rename(p, tomb); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return false, nil
		}
		return false, err
	}
	if testHookSweep != nil {
		testHookSweep("moved", tomb)
	}
	if st, err = os.Stat(tomb); err != nil || st.ModTime().After(cutoff) {
		// Stored again meanwhile (or unreadable): back under its name. A
		// blob a put wrote there since holds the same bytes.
		if rerr := os.Rename(tomb, p); rerr != nil {
			return false, rerr
		}
		return false, err
	}
	if err := os.Remove(tomb); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, err
	}
	return true, nil
}

// Get returns the stored bytes of hash, or ErrNotFound.
func (s *Store) Get(hash string) ([]byte, error) {
	h, err := ids.ParseHash(hash)
	if err != nil {
		return nil, err
	}
	b, err := readRegular(s.path(h))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, h)
	}
	return b, err
}

// OpenBlob opens the stored bytes of hash for reading, or returns
// ErrNotFound, so that a large blob can be streamed rather than held whole
// in memory. The caller closes the file.
func (s *Store) OpenBlob(hash string) (*os.File, error) {
	h, err := ids.ParseHash(hash)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(s.path(h))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, h)
	}
	return f, err
}

// ReadInto reads the blob of a canonical hash into buf, growing it as
// needed, and returns the filled slice, for scans that read many blobs
// with one reused buffer. Anything but a regular file under the blob's
// name is an error.
func (s *Store) ReadInto(hash string, buf []byte) ([]byte, error) {
	if !ids.IsHash(hash) {
		if _, err := ids.ParseHash(hash); err != nil {
			return buf[:0], err
		}
		return buf[:0], fmt.Errorf("cas: hash %q is not in canonical upper-case form", hash)
	}
	// Not blocking on open, and the check below: a FIFO or a device
	// under a blob's name must fail the read, not hang or never end it.
	f, err := os.OpenFile(s.path(hash), os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return buf[:0], fmt.Errorf("%w: %s", ErrNotFound, hash)
	}
	if err != nil {
		return buf[:0], err
	}
	defer func() { _ = f.Close() }() // opened read-only
	if err := checkRegular(f); err != nil {
		return buf[:0], err
	}
	if cap(buf) < 4096 {
		buf = make([]byte, 0, 4096)
	}
	buf = buf[:0]
	for {
		room := cap(buf) - len(buf)
		n, err := f.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		switch {
		case err == io.EOF || (err == nil && n == 0):
			return buf, nil
		case err != nil:
			return buf, err
		case n < room:
			// A regular file reads short only at its end; stopping here
			// saves the read that would return EOF.
			return buf, nil
		}
		buf = append(buf, 0)[:len(buf)]
	}
}

// GetNode reads and parses a node.
func (s *Store) GetNode(hash string) (node.Node, error) {
	b, err := s.Get(hash)
	if err != nil {
		return nil, err
	}
	n, err := node.Parse(b)
	if err != nil {
		return nil, fmt.Errorf("cas %s: %w", hash, err)
	}
	return n, nil
}

// Exists reports whether hash is stored.
func (s *Store) Exists(hash string) (bool, error) {
	h, err := ids.ParseHash(hash)
	if err != nil {
		return false, err
	}
	_, err = os.Stat(s.path(h))
	if err == nil {
		return true, nil
	}
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return false, err
}

// Delete removes hash. Deleting a missing hash is not an error.
func (s *Store) Delete(hash string) error {
	h, err := ids.ParseHash(hash)
	if err != nil {
		return err
	}
	if err := os.Remove(s.path(h)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// List returns every stored hash in directory order. Temporary files and
// anything not named like a blob are skipped; a missing directory is empty.
func (s *Store) List() ([]string, error) {
	var out []string
	err := s.Each(func(h string) error {
		out = append(out, h)
		return nil
	})
	return out, err
}

// Each calls fn for every stored hash without holding the whole list, for
// stores with millions of blobs.
func (s *Store) Each(fn func(hash string) error) error {
	d, err := os.Open(s.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer func() { _ = d.Close() }() // a directory, only read
	for {
		names, err := d.Readdirnames(4096)
		for _, name := range names {
			h, ok := strings.CutSuffix(name, suffix)
			if !ok || !ids.IsHash(h) {
				continue
			}
			if ferr := fn(h); ferr != nil {
				return ferr
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

func (s *Store) path(hash string) string { return filepath.Join(s.dir, hash+suffix) }
