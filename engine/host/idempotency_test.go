package host

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/uncaged/workflow/engine/ids"
	"github.com/uncaged/workflow/engine/threads"
)

// keyFixture is a host with two quick workflows, counting the runs each
// starts.
func keyFixture(t *testing.T) (*fixture, *atomic.Int32) {
	t.Helper()
	starts := new(atomic.Int32)
	f := newFixture(t, 4, map[string]goFlow{
		"linear": {roles: []string{"a", "b"}, starts: starts},
		"other":  {roles: []string{"c"}, starts: starts},
	})
	return f, starts
}

// threadCount is how many threads the root lists, active and finished.
func (f *fixture) threadCount() int {
	f.t.Helper()
	recs, err := threads.List(f.l)
	if err != nil {
		f.t.Fatal(err)
	}
	return len(recs)
}

// keyRecordOf reads the record of key as the host wrote it.
func (f *fixture) keyRecordOf(key string) keyRecord {
	f.t.Helper()
	b, err := os.ReadFile(f.l.IdempotencyFile(key))
	if err != nil {
		f.t.Fatal(err)
	}
	var rec keyRecord
	if err := json.Unmarshal(b, &rec); err != nil {
		f.t.Fatal(err)
	}
	return rec
}

// randomKey is a valid key of random length and bytes.
func randomKey(r *rand.Rand) string {
	b := make([]byte, 1+r.IntN(MaxIdempotencyKeyLen))
	for i := range b {
		b[i] = byte(0x21 + r.IntN(0x7e-0x21+1))
	}
	return string(b)
}

func TestCheckIdempotencyKey(t *testing.T) {
	t.Parallel()
	bad := []struct {
		name, key, why string
	}{
		{"empty", "", "it is empty"},
		{"too long", strings.Repeat("k", MaxIdempotencyKeyLen+1), "201 bytes long, at most 200"},
		{"space", "run 1", "byte 4 is 0x20"},
		{"tab", "run\t1", "byte 4 is 0x09"},
		{"newline", "run_1\n", "byte 6 is 0x0a"},
		{"NUL", "\x00run", "byte 1 is 0x00"},
		{"DEL", "run\x7f", "byte 4 is 0x7f"},
		{"non-ASCII", "rün", "byte 2 is 0xc3"},
		{"invalid UTF-8", "run\xff", "byte 4 is 0xff"},
	}
	for _, c := range bad {
		err := CheckIdempotencyKey(c.key)
		if !errors.Is(err, ErrInvalidIdempotencyKey) || !strings.Contains(err.Error(), c.why) {
			t.Errorf("%s: %v; want ErrInvalidIdempotencyKey saying %q", c.name, err, c.why)
		}
	}
	for _, key := range []string{"!", "~", "run_01JF0000000000000000000000", strings.Repeat("~", MaxIdempotencyKeyLen)} {
		if err := CheckIdempotencyKey(key); err != nil {
			t.Errorf("%q refused: %v", key, err)
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 1000 {
		key := randomKey(r)
		if err := CheckIdempotencyKey(key); err != nil {
			t.Fatalf("%q refused: %v", key, err)
		}
		// One byte outside the range anywhere spoils it.
		b := []byte(key)
		b[r.IntN(len(b))] = []byte{0x00, 0x1f, 0x20, 0x7f, 0x80, 0xff}[r.IntN(6)]
		if err := CheckIdempotencyKey(string(b)); !errors.Is(err, ErrInvalidIdempotencyKey) {
			t.Fatalf("%q accepted (%v)", b, err)
		}
	}
}

func TestARunRepeatedWithItsKeyStartsOneThreadAcrossHostRestarts(t *testing.T) {
	t.Parallel()
	f, starts := keyFixture(t)
	req := RunRequest{Workflow: "linear", Prompt: "go", IdempotencyKey: "run_01jf"}
	first, err := f.client.RunOnce(req)
	if err != nil || first.Replayed || first.ThreadID == "" {
		t.Fatalf("first run: %+v %v", first, err)
	}
	again, err := f.client.RunOnce(req)
	if err != nil || !again.Replayed || again.ThreadID != first.ThreadID {
		t.Fatalf("repeat: %+v %v; want thread %s replayed", again, err, first.ThreadID)
	}
	// Callers of Run, which cannot tell, get the same thread.
	if id, err := f.client.Run(req); err != nil || id != first.ThreadID {
		t.Fatalf("Run with the key: %s %v", id, err)
	}
	f.finished(first.ThreadID)
	f.stopHost()
	f.startHost(4)
	after, err := f.client.RunOnce(req)
	if err != nil || !after.Replayed || after.ThreadID != first.ThreadID {
		t.Fatalf("repeat after a restart: %+v %v", after, err)
	}
	if n, s := f.threadCount(), starts.Load(); n != 1 || s != 1 {
		t.Fatalf("%d threads listed, %d runs started; want 1 of each", n, s)
	}
	// The record is private, in a private directory, and marked started.
	rec := f.keyRecordOf(req.IdempotencyKey)
	if !rec.Started || rec.ThreadID != first.ThreadID || rec.Key != req.IdempotencyKey || rec.Workflow != "linear" {
		t.Errorf("record %+v", rec)
	}
	for path, want := range map[string]os.FileMode{f.l.IdempotencyDir(): 0o700, f.l.IdempotencyFile(req.IdempotencyKey): 0o600} {
		if st, err := os.Stat(path); err != nil || st.Mode().Perm() != want {
			t.Errorf("%s: %v %v, want mode %04o", path, st.Mode(), err, want)
		}
	}
	// Another key starts another thread.
	other, err := f.client.RunOnce(RunRequest{Workflow: "linear", Prompt: "go", IdempotencyKey: "run_01jg"})
	if err != nil || other.Replayed || other.ThreadID == first.ThreadID {
		t.Fatalf("another key: %+v %v", other, err)
	}
}

func TestConcurrentRunsOfOneKeyStartOneThread(t *testing.T) {
	t.Parallel()
	f, starts := keyFixture(t)
	seed := time.Now().UnixNano()
	r := rand.New(rand.NewPCG(uint64(seed), 7))
	const rounds, senders = 5, 20
	for round := 1; round <= rounds; round++ {
		req := RunRequest{Workflow: []string{"linear", "other"}[r.IntN(2)], Prompt: fmt.Sprintf("prompt %d", r.Int()), IdempotencyKey: randomKey(r)}
		outs := make([]RunOutcome, senders)
		errs := make([]error, senders)
		var wg sync.WaitGroup
		for i := range senders {
			wg.Go(func() { outs[i], errs[i] = f.client.RunOnce(req) })
		}
		wg.Wait()
		created := 0
		for i, out := range outs {
			if errs[i] != nil {
				t.Fatalf("seed %d, key %q: sender %d: %v", seed, req.IdempotencyKey, i, errs[i])
			}
			if out.ThreadID != outs[0].ThreadID {
				t.Fatalf("seed %d, key %q: threads %s and %s", seed, req.IdempotencyKey, outs[0].ThreadID, out.ThreadID)
			}
			if !out.Replayed {
				created++
			}
		}
		if created != 1 {
			t.Fatalf("seed %d, key %q: %d senders were told they started the thread, want 1", seed, req.IdempotencyKey, created)
		}
		if n := f.threadCount(); n != round {
			t.Fatalf("seed %d: %d threads after %d keys", seed, n, round)
		}
	}
	f.waitFor("the runs to start", func() bool { return starts.Load() == rounds })
}

func TestAKeyReusedForAnotherRequestStartsNothing(t *testing.T) {
	t.Parallel()
	f, _ := keyFixture(t)
	const key = "run_reused"
	first, err := f.client.RunOnce(RunRequest{Workflow: "linear", Prompt: "go", IdempotencyKey: key})
	if err != nil {
		t.Fatal(err)
	}
	for _, req := range []RunRequest{
		{Workflow: "other", Prompt: "go"},
		{Workflow: "linear", Prompt: "go "},
		{Workflow: "linear", Prompt: ""},
		{Workflow: "linear", Prompt: "Go"},
	} {
		req.IdempotencyKey = key
		_, err := f.client.RunOnce(req)
		if !errors.Is(err, ErrIdempotencyKeyReused) || !strings.Contains(err.Error(), `idempotency key "run_reused" was used for another request`) ||
			!strings.Contains(err.Error(), first.ThreadID) {
			t.Errorf("%+v: %v; want ErrIdempotencyKeyReused naming the key and thread %s", req, err, first.ThreadID)
		}
	}
	if n := f.threadCount(); n != 1 {
		t.Fatalf("%d threads, want 1", n)
	}
	// The key's own request still answers its thread.
	if out, err := f.client.RunOnce(RunRequest{Workflow: "linear", Prompt: "go", IdempotencyKey: key}); err != nil || out.ThreadID != first.ThreadID || !out.Replayed {
		t.Fatalf("the key's own request: %+v %v", out, err)
	}
}

func TestBadKeysStartNothing(t *testing.T) {
	t.Parallel()
	f, starts := keyFixture(t)
	for _, key := range []string{strings.Repeat("x", 201), "a b", "a\x01b", "ключ", " "} {
		out, err := f.client.RunOnce(RunRequest{Workflow: "linear", IdempotencyKey: key})
		if !errors.Is(err, ErrInvalidIdempotencyKey) || out.ThreadID != "" {
			t.Errorf("key %q: %+v %v; want ErrInvalidIdempotencyKey", key, out, err)
		}
	}
	if _, err := os.Stat(f.l.IdempotencyDir()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a key was recorded: %v", err)
	}
	if n, s := f.threadCount(), starts.Load(); n != 0 || s != 0 {
		t.Fatalf("%d threads, %d runs; want none", n, s)
	}
}

// recordPending writes key's record as the host does before it starts the
// thread, as a start cut short there leaves it.
func (f *fixture) recordPending(req RunRequest, threadID string) {
	f.t.Helper()
	rec := keyRecord{Key: req.IdempotencyKey, Workflow: req.Workflow, PromptSHA256: promptDigest(req.Prompt), ThreadID: threadID, CreatedAt: time.Now().UnixMilli()}
	if created, err := f.host.keys.create(f.l.IdempotencyFile(req.IdempotencyKey), rec); err != nil || !created {
		f.t.Fatalf("record %+v: %v %v", rec, created, err)
	}
}

func TestAStartCutShortBeforeItsThreadIsFinishedUnderTheRecordedID(t *testing.T) {
	t.Parallel()
	f, starts := keyFixture(t)
	req := RunRequest{Workflow: "linear", Prompt: "go", IdempotencyKey: "run_cut"}
	recorded := ids.NewThreadID(time.Now())
	f.recordPending(req, recorded)
	out, err := f.client.RunOnce(req)
	if err != nil || out.ThreadID != recorded || out.Replayed {
		t.Fatalf("%+v %v; want thread %s started now", out, err, recorded)
	}
	f.finished(recorded)
	if !f.keyRecordOf(req.IdempotencyKey).Started {
		t.Error("the record is not marked started")
	}
	if out, err := f.client.RunOnce(req); err != nil || out.ThreadID != recorded || !out.Replayed {
		t.Fatalf("repeat: %+v %v", out, err)
	}
	if n, s := f.threadCount(), starts.Load(); n != 1 || s != 1 {
		t.Fatalf("%d threads, %d runs; want 1 of each", n, s)
	}
}

func TestAStartCutShortAfterItsThreadWasListedStartsNothing(t *testing.T) {
	t.Parallel()
	f, starts := keyFixture(t)
	listed, err := f.client.Run(RunRequest{Workflow: "linear", Prompt: "go"})
	if err != nil {
		t.Fatal(err)
	}
	req := RunRequest{Workflow: "linear", Prompt: "go", IdempotencyKey: "run_listed"}
	f.recordPending(req, listed)
	out, err := f.client.RunOnce(req)
	if err != nil || out.ThreadID != listed || !out.Replayed {
		t.Fatalf("%+v %v; want thread %s replayed", out, err, listed)
	}
	if !f.keyRecordOf(req.IdempotencyKey).Started {
		t.Error("the record is not marked started")
	}
	f.finished(listed)
	if n, s := f.threadCount(), starts.Load(); n != 1 || s != 1 {
		t.Fatalf("%d threads, %d runs; want 1 of each", n, s)
	}
}

func TestAStartCutShortBehindADamagedIndexIsRefused(t *testing.T) {
	t.Parallel()
	f, starts := keyFixture(t)
	req := RunRequest{Workflow: "linear", Prompt: "go", IdempotencyKey: "run_hidden"}
	recorded := ids.NewThreadID(time.Now())
	f.recordPending(req, recorded)
	damaged := filepath.Join(f.l.BundleDir("ZZZZZZZZZZZZZ"), "threads.json")
	if err := os.MkdirAll(filepath.Dir(damaged), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(damaged, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(f.l.IdempotencyFile(req.IdempotencyKey))
	for range 2 {
		_, err := f.client.RunOnce(req)
		if !errors.Is(err, ErrIdempotencyKeyUnsettled) || !strings.Contains(err.Error(), `idempotency key "run_hidden" was interrupted`) ||
			!strings.Contains(err.Error(), recorded) {
			t.Fatalf("%v; want ErrIdempotencyKeyUnsettled naming the key and thread %s", err, recorded)
		}
	}
	if after, _ := os.ReadFile(f.l.IdempotencyFile(req.IdempotencyKey)); string(after) != string(before) {
		t.Errorf("the record changed: %s", after)
	}
	if _, err := threads.Resolve(f.l, recorded); !errors.Is(err, threads.ErrNotFound) || starts.Load() != 0 {
		t.Fatalf("a thread was started: %v, %d runs", err, starts.Load())
	}
	// Once the index is repaired, the start is finished.
	if err := os.Remove(damaged); err != nil {
		t.Fatal(err)
	}
	if out, err := f.client.RunOnce(req); err != nil || out.ThreadID != recorded || out.Replayed {
		t.Fatalf("after the repair: %+v %v", out, err)
	}
}

func TestARecordThatCannotBeReadStartsNothing(t *testing.T) {
	t.Parallel()
	f, starts := keyFixture(t)
	const key = "run_odd"
	path := f.l.IdempotencyFile(key)
	good, _ := json.Marshal(keyRecord{Key: key, Workflow: "linear", PromptSHA256: promptDigest("go"), ThreadID: ids.NewThreadID(time.Now())})
	cases := []struct {
		name string
		put  func() error
		why  string
	}{
		{"not JSON", func() error { return os.WriteFile(path, []byte("{"), 0o600) }, "is not a key record"},
		{"another key", func() error {
			return os.WriteFile(path, []byte(strings.Replace(string(good), key, "run_else", 1)), 0o600)
		}, `names another key, "run_else"`},
		{"no thread", func() error {
			return os.WriteFile(path, []byte(`{"key":"run_odd","workflow":"linear","promptSha256":"`+promptDigest("go")+`","threadId":"../x"}`), 0o600)
		}, "names no thread"},
		{"too large", func() error { return os.WriteFile(path, []byte(strings.Repeat(" ", maxKeyRecord+1)), 0o600) }, "larger than"},
		{"a directory", func() error { return os.Mkdir(path, 0o700) }, "not a regular file"},
	}
	if err := ensurePrivateDir(f.l.IdempotencyDir()); err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		if err := os.RemoveAll(path); err != nil {
			t.Fatal(err)
		}
		if err := c.put(); err != nil {
			t.Fatal(err)
		}
		_, err := f.client.RunOnce(RunRequest{Workflow: "linear", Prompt: "go", IdempotencyKey: key})
		if !errors.Is(err, ErrIdempotencyKeyUnsettled) || !strings.Contains(err.Error(), c.why) || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: %v; want ErrIdempotencyKeyUnsettled naming %s and saying %q", c.name, err, path, c.why)
		}
	}
	if n, s := f.threadCount(), starts.Load(); n != 0 || s != 0 {
		t.Fatalf("%d threads, %d runs; want none", n, s)
	}
}

func TestKeysExpireAfterSevenDays(t *testing.T) {
	t.Parallel()
	f, _ := keyFixture(t)
	now := time.Now()
	var offset atomic.Int64
	f.host.keys.setClock(func() time.Time { return now.Add(time.Duration(offset.Load())) })
	req := RunRequest{Workflow: "linear", Prompt: "go", IdempotencyKey: "run_old"}
	first, err := f.client.RunOnce(req)
	if err != nil {
		t.Fatal(err)
	}
	offset.Store(int64(IdempotencyKeyTTL - time.Minute))
	if out, err := f.client.RunOnce(req); err != nil || !out.Replayed || out.ThreadID != first.ThreadID {
		t.Fatalf("within 7 days: %+v %v", out, err)
	}
	// A week on, the key is forgotten: sent again, it starts a thread.
	offset.Store(int64(IdempotencyKeyTTL + time.Minute))
	later, err := f.client.RunOnce(req)
	if err != nil || later.Replayed || later.ThreadID == first.ThreadID {
		t.Fatalf("after 7 days: %+v %v; want a new thread", later, err)
	}
	if rec := f.keyRecordOf(req.IdempotencyKey); rec.ThreadID != later.ThreadID {
		t.Errorf("the record names %s, want %s", rec.ThreadID, later.ThreadID)
	}
}

func TestExpiredKeysAreSweptWhenAHostOpens(t *testing.T) {
	t.Parallel()
	f, _ := keyFixture(t)
	ages := map[string]time.Duration{"run_8d": 8 * 24 * time.Hour, "run_6d": 6 * 24 * time.Hour, "run_new": 0}
	for key := range ages {
		if _, err := f.client.RunOnce(RunRequest{Workflow: "other", IdempotencyKey: key}); err != nil {
			t.Fatal(err)
		}
	}
	leftover := filepath.Join(f.l.IdempotencyDir(), ".new-123.tmp") // a create cut short
	if err := os.WriteFile(leftover, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	f.stopHost()
	ages[".new-123.tmp"] = 30 * 24 * time.Hour
	for key, age := range ages {
		path := f.l.IdempotencyFile(key)
		if key == ".new-123.tmp" {
			path = leftover
		}
		at := time.Now().Add(-age)
		if err := os.Chtimes(path, at, at); err != nil {
			t.Fatal(err)
		}
	}
	f.startHost(4)
	for key, age := range ages {
		path := f.l.IdempotencyFile(key)
		if key == ".new-123.tmp" {
			path = leftover
		}
		_, err := os.Stat(path)
		if kept := err == nil; kept != (age < IdempotencyKeyTTL) {
			t.Errorf("%s, %s old: kept %v (%v)", key, age, kept, err)
		}
	}
}

func TestASweepIsDueHourlyAsKeysAreRecorded(t *testing.T) {
	t.Parallel()
	f, _ := keyFixture(t)
	if _, err := f.client.RunOnce(RunRequest{Workflow: "other", IdempotencyKey: "run_a"}); err != nil {
		t.Fatal(err)
	}
	old := f.l.IdempotencyFile("run_a")
	eightDaysAgo := time.Now().Add(-8 * 24 * time.Hour)
	if err := os.Chtimes(old, eightDaysAgo, eightDaysAgo); err != nil {
		t.Fatal(err)
	}
	sweptAgo := func(d time.Duration) {
		f.host.keys.mu.Lock()
		f.host.keys.lastSweep = time.Now().Add(-d)
		f.host.keys.mu.Unlock()
	}
	// run_a has expired; a run with another key sweeps it once a sweep
	// is due, and not before.
	sweptAgo(sweepEvery / 2)
	if _, err := f.client.RunOnce(RunRequest{Workflow: "other", IdempotencyKey: "run_b"}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(old); err != nil {
		t.Fatalf("swept before a sweep was due: %v", err)
	}
	sweptAgo(2 * sweepEvery)
	if _, err := f.client.RunOnce(RunRequest{Workflow: "other", IdempotencyKey: "run_c"}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(old); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("not swept: %v", err)
	}
	for _, key := range []string{"run_b", "run_c"} {
		if _, err := os.Stat(f.l.IdempotencyFile(key)); err != nil {
			t.Errorf("%s swept: %v", key, err)
		}
	}
}
