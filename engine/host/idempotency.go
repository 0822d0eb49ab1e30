package host

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/uncaged/workflow/engine/atomicfile"
	"github.com/uncaged/workflow/engine/ids"
	"github.com/uncaged/workflow/engine/storage"
	"github.com/uncaged/workflow/engine/threads"
)

// A run that names an idempotency key starts at most one thread per key:
// a sender that cannot tell whether its first request got through (the
// gateway, after a crash or a dropped tunnel) sends the same key again and
// gets the thread the first one started.
//
// Each key has a record in the root (storage.Layout.IdempotencyFile),
// written before its thread starts and naming the id the thread is given:
// the executor starts a thread under an id chosen beforehand, so a start
// cut short between the record and the thread (a crash, a failed write)
// is finished by the next request with the key, under the recorded id,
// and no request can ever start a second thread for it. Once the thread
// is listed the record is marked started, which a repeat answers without
// looking for the thread, and which keeps answering even if the thread is
// later removed. The host is the one process that starts threads on its
// root, and it serialises the requests of one key (keyStore.lock), so the
// record is read and written by one request at a time.

// IdempotencyKeyTTL is how long a key is kept. A repeat within it starts
// nothing; a key older than it may be forgotten, and a run that names it
// again then starts a new thread.
const IdempotencyKeyTTL = 7 * 24 * time.Hour

// MaxIdempotencyKeyLen is the longest key accepted, in bytes.
const MaxIdempotencyKeyLen = 200

// Errors a run with an idempotency key can fail with; the socket carries
// them to the Client (errors.Is holds on both sides).
var (
	// ErrInvalidIdempotencyKey: the key is empty, too long, or holds a
	// byte that is not printable ASCII. Nothing was started.
	ErrInvalidIdempotencyKey = errors.New("invalid idempotency key")
	// ErrIdempotencyKeyReused: the key started a thread of another
	// workflow or prompt. Nothing was started.
	ErrIdempotencyKeyReused = errors.New("idempotency key used for another request")
	// ErrIdempotencyKeyUnsettled: the key's record cannot be read, or its
	// first start was cut short and whether it started the thread cannot
	// be told (a damaged thread index may name it). Nothing was started.
	ErrIdempotencyKeyUnsettled = errors.New("idempotency key's first start cannot be settled")
)

// keyErrors name each key error on the socket, where only the message
// and a code travel (codedAPIError), and give its status.
var keyErrors = []struct {
	code   string
	kind   error
	status int
}{
	{"idempotency-key-invalid", ErrInvalidIdempotencyKey, http.StatusBadRequest},
	{"idempotency-key-reused", ErrIdempotencyKeyReused, http.StatusUnprocessableEntity},
	{"idempotency-key-unsettled", ErrIdempotencyKeyUnsettled, http.StatusConflict},
}

// keyError is a key error with its own message, which errors.Is matches
// to its kind.
type keyError struct {
	kind error
	msg  string
}

func (e *keyError) Error() string        { return e.msg }
func (e *keyError) Is(target error) bool { return target == e.kind }

func keyErrorf(kind error, format string, args ...any) error {
	return &keyError{kind: kind, msg: fmt.Sprintf(format, args...)}
}

// keyErrorCode is the socket's code and status for err; "" for any other
// error.
func keyErrorCode(err error) (string, int) {
	for _, k := range keyErrors {
		if errors.Is(err, k.kind) {
			return k.code, k.status
		}
	}
	return "", 0
}

// keyErrorOf is the key error a host answered with code, nil for an
// unknown code.
func keyErrorOf(code, msg string) error {
	for _, k := range keyErrors {
		if k.code == code {
			return &keyError{kind: k.kind, msg: msg}
		}
	}
	return nil
}

// CheckIdempotencyKey accepts 1 to MaxIdempotencyKeyLen bytes of printable
// ASCII (0x21-0x7e): what fits in an HTTP header unchanged, with no space
// a proxy could trim or fold. The error (ErrInvalidIdempotencyKey) says
// what is wrong and where.
func CheckIdempotencyKey(key string) error {
	switch {
	case key == "":
		return keyErrorf(ErrInvalidIdempotencyKey, "invalid idempotency key: it is empty; send 1 to %d printable ASCII characters", MaxIdempotencyKeyLen)
	case len(key) > MaxIdempotencyKeyLen:
		return keyErrorf(ErrInvalidIdempotencyKey, "invalid idempotency key: %d bytes long, at most %d", len(key), MaxIdempotencyKeyLen)
	}
	for i := 0; i < len(key); i++ {
		if c := key[i]; c < 0x21 || c > 0x7e {
			return keyErrorf(ErrInvalidIdempotencyKey, "invalid idempotency key: byte %d is 0x%02x; only printable ASCII (0x21-0x7e) is allowed, no spaces", i+1, c)
		}
	}
	return nil
}

// RunOutcome is what a run answers: the thread's id, and whether the run's
// idempotency key had already started it (Replayed), in which case
// nothing was started now.
type RunOutcome struct {
	ThreadID string
	Replayed bool
}

// keyRecord is the file of one key (storage.Layout.IdempotencyFile).
type keyRecord struct {
	// Key is the key itself, for a person reading the file: the file is
	// named by its hash.
	Key      string `json:"key"`
	Workflow string `json:"workflow"`
	// PromptSHA256 tells a repeat from another request with the key
	// without keeping a second copy of the prompt.
	PromptSHA256 string `json:"promptSha256"`
	// ThreadID is the id the key's thread is, or is to be, started under.
	ThreadID  string `json:"threadId"`
	CreatedAt int64  `json:"createdAt"` // ms since the epoch
	// Started is set once the thread is listed; until then the start may
	// have been cut short.
	Started bool `json:"started"`
}

// maxKeyRecord bounds what is read of a record: ours are a few hundred
// bytes.
const maxKeyRecord = 64 << 10

func promptDigest(prompt string) string {
	sum := sha256.Sum256([]byte(prompt))
	return hex.EncodeToString(sum[:])
}

// sameRequest reports whether req asks for what the record's first
// request asked for. The caller's environment does not count: the same
// run sent again may come with another.
func (r keyRecord) sameRequest(req RunRequest) bool {
	return r.Workflow == req.Workflow && r.PromptSHA256 == promptDigest(req.Prompt)
}

// sweepEvery spaces the sweeps of expired keys made as keys are recorded;
// one is made when the host opens too. sweepLimit bounds the entries one
// sweep looks at, so that no request waits on a huge directory: the next
// sweep goes on where the removals left room.
const (
	sweepEvery = time.Hour
	sweepLimit = 10000
)

// keyStore keeps the root's idempotency keys.
type keyStore struct {
	layout storage.Layout
	log    *slog.Logger

	mu sync.Mutex
	// now is the clock keys are dated and aged by (a test sets it).
	now func() time.Time
	// held are the locks of the records in use, by file name, each with
	// the number of requests holding or waiting for it.
	held      map[string]*recordLock
	lastSweep time.Time
}

type recordLock struct {
	sync.Mutex
	users int
}

func newKeyStore(l storage.Layout, log *slog.Logger) *keyStore {
	return &keyStore{layout: l, log: log, now: time.Now, held: map[string]*recordLock{}}
}

func (s *keyStore) clock() time.Time {
	s.mu.Lock()
	now := s.now
	s.mu.Unlock()
	return now()
}

// setClock replaces the clock (tests).
func (s *keyStore) setClock(now func() time.Time) {
	s.mu.Lock()
	s.now = now
	s.mu.Unlock()
}

// lock holds the record named name until the returned function is called;
// whoever else asks for it waits.
func (s *keyStore) lock(name string) (unlock func()) {
	s.mu.Lock()
	l := s.held[name]
	if l == nil {
		l = &recordLock{}
		s.held[name] = l
	}
	l.users++
	s.mu.Unlock()
	l.Lock()
	return func() {
		l.Unlock()
		s.mu.Lock()
		if l.users--; l.users == 0 {
			delete(s.held, name)
		}
		s.mu.Unlock()
	}
}

// expired reports whether a record last written at mtime may be forgotten.
func (s *keyStore) expired(mtime time.Time) bool {
	return s.clock().Sub(mtime) > IdempotencyKeyTTL
}

// load reads key's record at path; an expired one is removed and, like a
// missing one, not found. A record that cannot be read, or is not one of
// ours for key, is an error (ErrIdempotencyKeyUnsettled): whether the key
// started a thread cannot be told, so none may be started.
func (s *keyStore) load(path, key string) (keyRecord, bool, error) {
	var rec keyRecord
	unsettled := func(why string, args ...any) (keyRecord, bool, error) {
		return rec, false, keyErrorf(ErrIdempotencyKeyUnsettled, "idempotency key %q: its record %s %s; nothing was started (remove the file to forget the key)",
			key, path, fmt.Sprintf(why, args...))
	}
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return rec, false, nil
	case err != nil:
		return unsettled("cannot be read: %v", err)
	case !fi.Mode().IsRegular():
		return unsettled("is not a regular file (%s)", fi.Mode().Type())
	case s.expired(fi.ModTime()):
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return unsettled("has expired but cannot be removed: %v", err)
		}
		return rec, false, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return unsettled("cannot be read: %v", err)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxKeyRecord+1))
	_ = f.Close() // read-only
	switch {
	case err != nil:
		return unsettled("cannot be read: %v", err)
	case len(b) > maxKeyRecord:
		return unsettled("is larger than %d bytes", maxKeyRecord)
	}
	if err := json.Unmarshal(b, &rec); err != nil {
		return unsettled("is not a key record: %v", err)
	}
	if rec.Key != key {
		return unsettled("names another key, %q", rec.Key)
	}
	if _, err := ids.ParseThreadID(rec.ThreadID); err != nil {
		return unsettled("names no thread: %v", err)
	}
	return rec, true, nil
}

// create writes rec at path unless a record is there already, and reports
// whether it did. The record is on disk, its name synced, before create
// returns: the thread it names may be started then.
func (s *keyStore) create(path string, rec keyRecord) (bool, error) {
	b, err := json.Marshal(rec)
	if err != nil {
		return false, err
	}
	dir := filepath.Dir(path)
	if err := ensurePrivateDir(dir); err != nil {
		return false, fmt.Errorf("record idempotency key %q: %w", rec.Key, err)
	}
	created, err := createExclusive(path, b)
	if err != nil {
		return false, fmt.Errorf("record idempotency key %q: %w", rec.Key, err)
	}
	if created {
		if err := atomicfile.SyncDir(dir); err != nil {
			return false, fmt.Errorf("record idempotency key %q: %w", rec.Key, err)
		}
	}
	return created, nil
}

// markStarted records that rec's thread is listed. Its directory is not
// synced: a mark lost to a power cut leaves the record unstarted, and the
// next repeat finds the thread by looking for it. A mark that fails is
// only logged, for the same reason.
func (s *keyStore) markStarted(path string, rec keyRecord) {
	rec.Started = true
	b, err := json.Marshal(rec)
	if err == nil {
		err = atomicfile.Replace(path, b, 0o600)
	}
	if err != nil {
		s.log.Warn("engine host: cannot mark an idempotency key's thread started; a repeat will look for the thread", "thread", rec.ThreadID, "path", path, "err", err)
	}
}

// ensurePrivateDir makes dir, open to its owner only whatever the umask,
// when it is missing.
func ensurePrivateDir(dir string) error {
	err := os.Mkdir(dir, 0o700)
	if errors.Is(err, fs.ErrExist) {
		return nil
	}
	if err != nil {
		return err
	}
	return os.Chmod(dir, 0o700)
}

// createExclusive puts data at path, whole and synced, unless something is
// there already (then it reports false and leaves it). The data is written
// under a temporary name and linked under path: a link, unlike a rename,
// fails when the name is taken, on every system.
func createExclusive(path string, data []byte) (bool, error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".new-*.tmp")
	if err != nil {
		return false, err
	}
	defer func() { _ = os.Remove(tmp.Name()) }() // linked or not, the temporary name goes
	if _, err := tmp.Write(data); err != nil {
		_ = tmp.Close()
		return false, err
	}
	if err := tmp.Chmod(0o600); err != nil {
		_ = tmp.Close()
		return false, err
	}
	if err := atomicfile.Fsync(tmp); err != nil {
		_ = tmp.Close()
		return false, err
	}
	if err := tmp.Close(); err != nil {
		return false, err
	}
	err = os.Link(tmp.Name(), path)
	if errors.Is(err, fs.ErrExist) {
		return false, nil
	}
	return err == nil, err
}

// sweepIfDue sweeps when the last sweep is more than sweepEvery old.
func (s *keyStore) sweepIfDue() {
	now := s.clock()
	s.mu.Lock()
	due := now.Sub(s.lastSweep) > sweepEvery
	if due {
		s.lastSweep = now
	}
	s.mu.Unlock()
	if due {
		s.sweep()
	}
}

// sweep removes the expired entries of the keys' directory, looking at
// no more than sweepLimit of them. Each is removed under its record's
// lock, and only if it is still expired then: a request with its key may
// have just replaced it.
func (s *keyStore) sweep() {
	s.mu.Lock()
	s.lastSweep = s.now()
	s.mu.Unlock()
	dir := s.layout.IdempotencyDir()
	d, err := os.Open(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	if err != nil {
		s.log.Warn("engine host: cannot sweep expired idempotency keys", "dir", dir, "err", err)
		return
	}
	defer func() { _ = d.Close() }() // read-only
	removed, seen := 0, 0
	for seen < sweepLimit {
		ents, err := d.ReadDir(256)
		for _, e := range ents {
			seen++
			if fi, err := e.Info(); err == nil && s.expired(fi.ModTime()) && s.removeExpired(filepath.Join(dir, e.Name())) {
				removed++
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				s.log.Warn("engine host: sweeping expired idempotency keys", "dir", dir, "err", err)
			}
			break
		}
	}
	if removed > 0 {
		s.log.Info("engine host: forgot expired idempotency keys", "removed", removed, "olderThan", IdempotencyKeyTTL)
	}
}

// removeExpired removes path if it is still expired, and reports whether
// it did.
func (s *keyStore) removeExpired(path string) bool {
	unlock := s.lock(filepath.Base(path))
	defer unlock()
	fi, err := os.Lstat(path)
	if err != nil || !s.expired(fi.ModTime()) {
		return false
	}
	if err := os.Remove(path); err != nil {
		s.log.Warn("engine host: cannot remove an expired idempotency key", "path", path, "err", err)
		return false
	}
	return true
}

// runKeyed is Run for a request with an idempotency key (checked): it
// answers the thread the key started, finishes a start of the key that
// was cut short, or starts a thread and records the key first.
func (h *Host) runKeyed(req RunRequest) (RunOutcome, error) {
	out, err := h.runKeyedLocked(req)
	h.keys.sweepIfDue()
	return out, err
}

func (h *Host) runKeyedLocked(req RunRequest) (RunOutcome, error) {
	key := req.IdempotencyKey
	path := h.opts.Layout.IdempotencyFile(key)
	defer h.keys.lock(filepath.Base(path))()
	rec, found, err := h.keys.load(path, key)
	if err != nil {
		return RunOutcome{}, err
	}
	if found {
		if !rec.sameRequest(req) {
			return RunOutcome{}, keyErrorf(ErrIdempotencyKeyReused,
				"idempotency key %q was used for another request (workflow %q, thread %s, with a different workflow or prompt); nothing was started",
				key, rec.Workflow, rec.ThreadID)
		}
		if rec.Started {
			return RunOutcome{ThreadID: rec.ThreadID, Replayed: true}, nil
		}
		// The key's first start was cut short: its thread may or may not
		// have been listed.
		_, err := threads.Resolve(h.opts.Layout, rec.ThreadID)
		switch {
		case err == nil:
			h.keys.markStarted(path, rec)
			return RunOutcome{ThreadID: rec.ThreadID, Replayed: true}, nil
		case !errors.Is(err, threads.ErrNotFound) || errors.Is(err, threads.ErrDamaged):
			return RunOutcome{}, keyErrorf(ErrIdempotencyKeyUnsettled,
				"the first start with idempotency key %q was interrupted, and whether it started thread %s cannot be told: %v; nothing was started (uncaged-workflow doctor)",
				key, rec.ThreadID, err)
		}
		h.opts.Logger.Info("engine host: finishing a start cut short", "thread", rec.ThreadID)
	}
	plan, err := h.planRun(req)
	if err != nil {
		return RunOutcome{}, err
	}
	if !found {
		now := h.keys.clock()
		rec = keyRecord{Key: key, Workflow: req.Workflow, PromptSHA256: promptDigest(req.Prompt), ThreadID: ids.NewThreadID(time.Now()), CreatedAt: now.UnixMilli()}
		created, err := h.keys.create(path, rec)
		if err != nil {
			return RunOutcome{}, err
		}
		if !created {
			// Requests of one key wait for each other, and one host runs
			// per root: only a process that is not the host writes here.
			return RunOutcome{}, keyErrorf(ErrIdempotencyKeyUnsettled,
				"idempotency key %q was recorded by another process meanwhile (%s); nothing was started", key, path)
		}
	}
	if err := h.launch(plan, req, rec.ThreadID); err != nil {
		return RunOutcome{}, err
	}
	h.keys.markStarted(path, rec)
	return RunOutcome{ThreadID: rec.ThreadID}, nil
}
