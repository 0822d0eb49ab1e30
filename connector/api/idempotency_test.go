package api

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/uncaged/workflow/engine/ids"
	"github.com/uncaged/workflow/engine/threads"
)

// runKeyed posts a run with an Idempotency-Key header.
func (f *fixture) runKeyed(workflowName, prompt, key string) *httptest.ResponseRecorder {
	f.t.Helper()
	body, _ := json.Marshal(map[string]string{"workflow": workflowName, "prompt": prompt})
	return f.call(http.MethodPost, "/api/threads", string(body), IdempotencyKeyHeader, key)
}

// threadIDOf is the threadId of a run's answer.
func threadIDOf(t testing.TB, rec *httptest.ResponseRecorder) string {
	t.Helper()
	var ref struct {
		ThreadID string `json:"threadId"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &ref); err != nil || ref.ThreadID == "" {
		t.Fatalf("no threadId in %d %s", rec.Code, rec.Body)
	}
	return ref.ThreadID
}

// wantStarted checks that rec is a run's first answer (201, no replay
// header) or a repeat's (200, Idempotent-Replayed: true), and returns its
// thread.
func wantStarted(t testing.TB, rec *httptest.ResponseRecorder, replayed bool) string {
	t.Helper()
	code, header := http.StatusCreated, ""
	if replayed {
		code, header = http.StatusOK, "true"
	}
	if rec.Code != code || rec.Header().Get(IdempotentReplayedHeader) != header {
		t.Fatalf("%d %s %q; want %d with %s %q", rec.Code, strings.TrimSpace(rec.Body.String()), rec.Header().Get(IdempotentReplayedHeader), code, IdempotentReplayedHeader, header)
	}
	return threadIDOf(t, rec)
}

func (f *fixture) threadCount() int {
	f.t.Helper()
	recs, err := threads.List(f.l)
	if err != nil {
		f.t.Fatal(err)
	}
	return len(recs)
}

func TestARunRepeatedWithItsKeyAnswersItsThread(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.register("linear", "linear.esm.js")
	f.startHost()
	const key = "run_01jfq4r9yx0000000000000000"
	id := wantStarted(t, f.runKeyed("linear", "go", key), false)
	if again := wantStarted(t, f.runKeyed("linear", "go", key), true); again != id {
		t.Fatalf("the repeat answered %s, want %s", again, id)
	}
	f.waitStatus(id, "completed")
	// Another engine host, on the same root: the key is kept there.
	f.shutdownHost()
	f.startHost()
	if again := wantStarted(t, f.runKeyed("linear", "go", key), true); again != id {
		t.Fatalf("after a host restart the repeat answered %s, want %s", again, id)
	}
	if n := f.threadCount(); n != 1 {
		t.Fatalf("%d threads, want 1", n)
	}
	// Runs without a key start a thread each, as before.
	if a, b := f.run("linear", "go"), f.run("linear", "go"); a == b {
		t.Fatalf("two runs without a key answered one thread, %s", a)
	}
}

func TestConcurrentRunsWithOneKeyStartOneThread(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.register("linear", "linear.esm.js")
	f.register("again", "linear.esm.js")
	f.startHost()
	seed := time.Now().UnixNano()
	r := rand.New(rand.NewPCG(uint64(seed), 3))
	const rounds, senders = 3, 20
	for round := 1; round <= rounds; round++ {
		key := fmt.Sprintf("run_%x", r.Uint64())
		name, prompt := []string{"linear", "again"}[r.IntN(2)], fmt.Sprintf("p%d", r.IntN(1000))
		answers := make([]*httptest.ResponseRecorder, senders)
		var wg sync.WaitGroup
		for i := range senders {
			wg.Go(func() { answers[i] = f.runKeyed(name, prompt, key) })
		}
		wg.Wait()
		created, first := 0, ""
		for _, rec := range answers {
			id := wantStarted(t, rec, rec.Code == http.StatusOK)
			if first == "" {
				first = id
			}
			if id != first {
				t.Fatalf("seed %d, key %s: threads %s and %s", seed, key, first, id)
			}
			if rec.Code == http.StatusCreated {
				created++
			}
		}
		if created != 1 {
			t.Fatalf("seed %d, key %s: %d answers of 201, want 1", seed, key, created)
		}
		if n := f.threadCount(); n != round {
			t.Fatalf("seed %d: %d threads after %d keys", seed, n, round)
		}
	}
}

func TestBadIdempotencyKeysAreRefusedAndStartNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.register("linear", "linear.esm.js")
	f.startHost()
	before := snapshot(t, f.l.Root)
	cases := []struct {
		name, key, msg string
	}{
		{"empty", "", "it is empty"},
		{"too long", strings.Repeat("k", 201), "201 bytes long, at most 200"},
		{"space", "run 1", "byte 4 is 0x20"},
		{"control character", "run\x1b1", "byte 4 is 0x1b"},
		{"non-ASCII", "run_é", "byte 5 is 0xc3"},
	}
	for _, c := range cases {
		rec := f.runKeyed("linear", "go", c.key)
		var e errorBody
		if rec.Code != http.StatusBadRequest || json.Unmarshal(rec.Body.Bytes(), &e) != nil ||
			!strings.Contains(e.Error, "Idempotency-Key: invalid idempotency key") || !strings.Contains(e.Error, c.msg) {
			t.Errorf("%s: %d %s; want 400 saying %q", c.name, rec.Code, strings.TrimSpace(rec.Body.String()), c.msg)
		}
	}
	// The header twice, even with one key, is a 400 too.
	req := httptest.NewRequest(http.MethodPost, "/api/threads", strings.NewReader(`{"workflow":"linear","prompt":"go"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Add(IdempotencyKeyHeader, "run_1")
	req.Header.Add(IdempotencyKeyHeader, "run_1")
	rec := httptest.NewRecorder()
	f.e.ServeHTTP(rec, req)
	if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "Idempotency-Key sent 2 times") {
		t.Errorf("two keys: %d %s", rec.Code, rec.Body)
	}
	if after := snapshot(t, f.l.Root); !reflect.DeepEqual(before, after) {
		t.Errorf("the root changed:\nbefore %v\nafter  %v", before, after)
	}
}

func TestAKeyUsedForAnotherRunIsA422(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.register("linear", "linear.esm.js")
	f.register("again", "linear.esm.js")
	f.startHost()
	id := wantStarted(t, f.runKeyed("linear", "go", "run_x"), false)
	for _, other := range []struct{ workflow, prompt string }{{"again", "go"}, {"linear", "stop"}, {"linear", ""}} {
		rec := f.runKeyed(other.workflow, other.prompt, "run_x")
		var e errorBody
		if rec.Code != http.StatusUnprocessableEntity || json.Unmarshal(rec.Body.Bytes(), &e) != nil ||
			!strings.Contains(e.Error, `idempotency key "run_x" was used for another request`) {
			t.Errorf("%+v: %d %s; want 422", other, rec.Code, strings.TrimSpace(rec.Body.String()))
		}
	}
	if n := f.threadCount(); n != 1 {
		t.Fatalf("%d threads, want 1", n)
	}
	if again := wantStarted(t, f.runKeyed("linear", "go", "run_x"), true); again != id {
		t.Fatalf("the key's own run answered %s, want %s", again, id)
	}
}

// recordPending writes key's record as the engine host does just before
// it starts the thread (engine/host/idempotency.go), as a crash there
// leaves it.
func (f *fixture) recordPending(key, workflowName, prompt, threadID string) {
	f.t.Helper()
	keySum, promptSum := sha256.Sum256([]byte(key)), sha256.Sum256([]byte(prompt))
	path := f.l.IdempotencyFile(key)
	if filepath.Base(path) != hex.EncodeToString(keySum[:])+".json" {
		f.t.Fatalf("the key's file is %s", path)
	}
	b, _ := json.Marshal(map[string]any{"key": key, "workflow": workflowName, "promptSha256": hex.EncodeToString(promptSum[:]),
		"threadId": threadID, "createdAt": time.Now().UnixMilli(), "started": false})
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		f.t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		f.t.Fatal(err)
	}
}

func TestARunCutShortAfterItsKeyWasRecordedStartsOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.register("linear", "linear.esm.js")
	f.startHost()
	// The key recorded, its thread not started: the repeat starts it,
	// under the recorded id, once.
	recorded := ids.NewThreadID(time.Now())
	f.recordPending("run_cut", "linear", "go", recorded)
	if id := wantStarted(t, f.runKeyed("linear", "go", "run_cut"), false); id != recorded {
		t.Fatalf("started %s, want the recorded %s", id, recorded)
	}
	if id := wantStarted(t, f.runKeyed("linear", "go", "run_cut"), true); id != recorded {
		t.Fatalf("the repeat answered %s, want %s", id, recorded)
	}
	f.waitStatus(recorded, "completed")
	// The key recorded and its thread listed, but not marked started: the
	// repeat finds it and starts nothing.
	listed := f.run("linear", "again")
	f.recordPending("run_listed", "linear", "again", listed)
	if id := wantStarted(t, f.runKeyed("linear", "again", "run_listed"), true); id != listed {
		t.Fatalf("answered %s, want %s", id, listed)
	}
	if n := f.threadCount(); n != 2 {
		t.Fatalf("%d threads, want 2", n)
	}
	// The key recorded while a damaged index hides whether its thread
	// was listed: a 409 naming the key, and nothing started.
	hidden := ids.NewThreadID(time.Now())
	f.recordPending("run_hidden", "linear", "go", hidden)
	damaged := filepath.Join(f.l.BundleDir("ZZZZZZZZZZZZZ"), "threads.json")
	if err := os.MkdirAll(filepath.Dir(damaged), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(damaged, []byte("[]"), 0o600); err != nil {
		t.Fatal(err)
	}
	rec := f.runKeyed("linear", "go", "run_hidden")
	var e errorBody
	if rec.Code != http.StatusConflict || json.Unmarshal(rec.Body.Bytes(), &e) != nil ||
		!strings.Contains(e.Error, `idempotency key "run_hidden" was interrupted`) || !strings.Contains(e.Error, hidden) {
		t.Fatalf("%d %s; want 409 naming the key and thread %s", rec.Code, strings.TrimSpace(rec.Body.String()), hidden)
	}
	if _, err := threads.Resolve(f.l, hidden); err == nil {
		t.Fatal("the hidden start was started")
	}
}

func TestAnEngineThatCannotKeepKeysRefusesKeyedRuns(t *testing.T) {
	t.Parallel()
	eng := &runRecorder{}
	f := newFixture(t, func(o *Options) { o.Engine = eng })
	f.register("linear", "linear.esm.js")
	rec := f.runKeyed("linear", "go", "run_1")
	if rec.Code != http.StatusNotImplemented || !strings.Contains(rec.Body.String(), "cannot keep idempotency keys") {
		t.Fatalf("%d %s; want 501", rec.Code, rec.Body)
	}
	if runs, _, _ := eng.last(); runs != 0 {
		t.Fatalf("%d runs reached the engine", runs)
	}
	f.run("linear", "go")
	if runs, _, _ := eng.last(); runs != 1 {
		t.Fatalf("a run without a key: %d runs reached the engine, want 1", runs)
	}
}
