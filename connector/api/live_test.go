package api

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/uncaged/workflow/shared/testkit"
)

// collect reads events until done (or the stream ends).
func collect(t *testing.T, r *sseReader) []sseEvent {
	t.Helper()
	var out []sseEvent
	for {
		ev, err := r.next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, ev)
		if ev.Name == EventDone {
			// The server closes the stream after done.
			if extra, err := r.next(); !errors.Is(err, io.EOF) {
				t.Errorf("event after done: %+v (%v)", extra, err)
			}
			return out
		}
	}
}

func posOf(t *testing.T, id string) streamPos {
	t.Helper()
	p, err := parseStreamPos(id)
	if err != nil || !strings.Contains(id, ":") {
		t.Fatalf("event id %q: %v", id, err)
	}
	return p
}

// checkIDs asserts every event has an id and the ids never go back.
func checkIDs(t *testing.T, evs []sseEvent) {
	t.Helper()
	var prev streamPos
	for _, ev := range evs {
		p := posOf(t, ev.ID)
		if p.records < prev.records || p.logOff < prev.logOff {
			t.Errorf("id %q after %v", ev.ID, prev)
		}
		if ev.Name == EventRecord && p.records != prev.records+1 {
			t.Errorf("record id %q after %v: not the next record", ev.ID, prev)
		}
		prev = p
	}
}

func records(t *testing.T, evs []sseEvent) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, ev := range evs {
		if ev.Name != EventRecord {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(ev.Data), &m); err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

func doneReason(t *testing.T, evs []sseEvent) string {
	t.Helper()
	if len(evs) == 0 || evs[len(evs)-1].Name != EventDone {
		t.Fatalf("the stream did not end with done: %+v", evs)
	}
	var d DoneEvent
	if err := json.Unmarshal([]byte(evs[len(evs)-1].Data), &d); err != nil {
		t.Fatal(err)
	}
	return d.Reason
}

// The live stream delivers each step while the thread runs, then done; a
// reconnect resumes after the last event it saw.
func TestLiveSlowThread(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.register("slow", "slow.esm.js")
	f.startHost()
	id := f.run("slow", "go slowly")

	resp := f.openLive(context.Background(), id)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("live: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	r := newSSEReader(resp.Body)
	var evs []sseEvent
	for {
		ev, err := r.next()
		if err != nil {
			t.Fatalf("stream ended before the first step: %v", err)
		}
		evs = append(evs, ev)
		if ev.Name == EventRecord && strings.Contains(ev.Data, `"type":"role"`) {
			break
		}
	}
	// The first step arrived while the thread was still running.
	if d := f.detail(id); d.status() != "running" || len(d.roles()) >= 5 {
		t.Fatalf("at the first step the thread was %s with %d steps", d.status(), len(d.roles()))
	}
	evs = append(evs, collect(t, r)...)
	checkIDs(t, evs)
	if reason := doneReason(t, evs); reason != DoneCompleted {
		t.Errorf("done: %s", reason)
	}
	recs := records(t, evs)
	var kinds []string
	for _, m := range recs {
		k, _ := m["type"].(string)
		if role, ok := m["role"].(string); ok {
			k += ":" + role
		}
		kinds = append(kinds, k)
	}
	want := "thread-start,role:one,role:two,role:three,role:four,role:five,workflow-result"
	if strings.Join(kinds, ",") != want {
		t.Fatalf("records %v\nwant %s", kinds, want)
	}
	// The stream's thread-start is the REST one (taken while it ran).
	start := recs[0]
	rest := f.detail(id).Records[0]
	for _, k := range []string{"threadId", "workflow", "prompt", "startedAt", "timestamp", "bundleHash", "start"} {
		if start[k] != rest[k] {
			t.Errorf("thread-start %s: stream %v, REST %v", k, start[k], rest[k])
		}
	}
	if start["status"] != "running" || start["prompt"] != "go slowly" || start["workflow"] != "slow" {
		t.Errorf("thread-start: %+v", start)
	}
	for i, m := range recs[1:6] {
		meta, _ := m["meta"].(map[string]any)
		if meta["step"] != float64(i+1) {
			t.Errorf("step %d meta: %v", i+1, m)
		}
	}
	infos := 0
	for _, ev := range evs {
		if ev.Name == EventInfo {
			infos++
			var line struct {
				Tag       string
				Content   string
				Timestamp int64
			}
			if err := json.Unmarshal([]byte(ev.Data), &line); err != nil || line.Tag == "" || line.Timestamp == 0 {
				t.Errorf("info %q: %v", ev.Data, err)
			}
		}
	}
	if infos == 0 {
		t.Error("no debug-log lines")
	}

	// Reconnect after the second record: only later records, no
	// thread-start, and done again.
	resp2 := f.openLive(context.Background(), id, "Last-Event-ID", "2")
	defer resp2.Body.Close()
	evs2 := collect(t, newSSEReader(resp2.Body))
	recs2 := records(t, evs2)
	if len(recs2) != 5 || recs2[0]["role"] != "two" || recs2[4]["type"] != RecordWorkflowResult {
		t.Errorf("after Last-Event-ID 2: %+v", recs2)
	}
	if p := posOf(t, evs2[0].ID); evs2[0].Name == EventRecord && p.records != 3 {
		t.Errorf("first id after 2: %s", evs2[0].ID)
	}
	if doneReason(t, evs2) != DoneCompleted {
		t.Error(evs2)
	}

	// Reconnect with the id of the last info line: nothing the first stream
	// delivered up to there comes again.
	var lastInfo string
	for _, ev := range evs {
		if ev.Name == EventInfo {
			lastInfo = ev.ID
		}
	}
	seen := posOf(t, lastInfo)
	resp3 := f.openLive(context.Background(), id, "Last-Event-ID", lastInfo)
	defer resp3.Body.Close()
	evs3 := collect(t, newSSEReader(resp3.Body))
	for _, ev := range evs3[:len(evs3)-1] {
		p := posOf(t, ev.ID)
		switch {
		case ev.Name == EventInfo && p.logOff <= seen.logOff:
			t.Errorf("info line again: %+v", ev)
		case ev.Name == EventRecord && p.records <= seen.records:
			t.Errorf("record again: %+v", ev)
		}
	}
	if got := len(records(t, evs3)); got != len(recs)-seen.records {
		t.Errorf("%d records after %s, want %d", got, lastInfo, len(recs)-seen.records)
	}
	if doneReason(t, evs3) != DoneCompleted {
		t.Error(evs3)
	}
}

// A client that goes away stops the handler.
func TestLiveClientCancel(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(o *Options) { o.LivePing = 10 * time.Millisecond })
	f.register("slow", "slow.esm.js")
	f.startHost()
	id := f.run("slow", "")

	ctx, cancel := context.WithCancel(context.Background())
	resp := f.openLive(ctx, id)
	r := newSSEReader(resp.Body)
	if ev, err := r.next(); err != nil || ev.Name != EventRecord {
		t.Fatalf("first event: %+v %v", ev, err)
	}
	cancel()
	resp.Body.Close()
	select {
	case got := <-f.exits:
		if got != id {
			t.Errorf("exit of %s", got)
		}
	case <-time.After(testkit.WaitBound):
		t.Fatal("the live handler did not return after the client left")
	}
	// The thread itself runs on.
	if d := f.detail(id); d.status() != "running" {
		t.Errorf("thread is %s after the client left", d.status())
	}
	f.want(http.MethodPost, "/api/threads/"+id+"/kill", "", http.StatusOK, nil)
}

// Pings keep an idle stream (a paused thread) alive.
func TestLivePing(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(o *Options) { o.LivePing = 20 * time.Millisecond })
	f.register("slow", "slow.esm.js")
	f.startHost()
	id := f.run("slow", "")
	testkit.WaitUntil(t, "a step", func() bool { return len(f.detail(id).roles()) > 0 })
	f.want(http.MethodPost, "/api/threads/"+id+"/pause", "", http.StatusOK, nil)
	f.waitStatus(id, "paused")

	ctx, cancel := context.WithTimeout(context.Background(), testkit.WaitBound)
	defer cancel()
	resp := f.openLive(ctx, id)
	sc := bufio.NewScanner(resp.Body)
	pings := 0
	for pings < 3 && sc.Scan() {
		if sc.Text() == ": ping" {
			pings++
		}
	}
	cancel()
	resp.Body.Close()
	if pings < 3 {
		t.Fatalf("%d pings before the stream ended (%v)", pings, sc.Err())
	}
	f.want(http.MethodPost, "/api/threads/"+id+"/resume", "", http.StatusOK, nil)
	f.waitStatus(id, "completed")
}

// An interrupted thread (its host died) streams what it has, then
// done/not-running; resuming it on a new host finishes it.
func TestLiveInterruptedThenResume(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.register("slow", "slow.esm.js")
	f.startHost()
	id := f.run("slow", "")
	testkit.WaitUntil(t, "a step", func() bool { return len(f.detail(id).roles()) > 0 })
	f.shutdownHost()
	d := f.waitStatus(id, "interrupted")

	resp := f.openLive(context.Background(), id)
	evs := collect(t, newSSEReader(resp.Body))
	resp.Body.Close()
	checkIDs(t, evs)
	if reason := doneReason(t, evs); reason != DoneNotRunning {
		t.Errorf("done: %s", reason)
	}
	recs := records(t, evs)
	if len(recs) != 1+len(d.roles()) || recs[0]["status"] != "interrupted" {
		t.Errorf("records: %+v", recs)
	}

	f.startHost()
	f.want(http.MethodPost, "/api/threads/"+id+"/resume", "", http.StatusOK, nil)
	// Follow it live to the end from where the last stream stopped.
	resp = f.openLive(context.Background(), id, "Last-Event-ID", evs[len(evs)-1].ID)
	evs2 := collect(t, newSSEReader(resp.Body))
	resp.Body.Close()
	if reason := doneReason(t, evs2); reason != DoneCompleted {
		t.Errorf("after resume: %s", reason)
	}
	recs2 := records(t, evs2)
	if len(recs)-1+len(recs2) != 6 || recs2[len(recs2)-1]["type"] != RecordWorkflowResult {
		t.Errorf("after resume: %d then %d records", len(recs), len(recs2))
	}
	if d := f.detail(id); d.status() != "completed" || len(d.roles()) != 5 {
		t.Errorf("resumed thread: %s %v", d.status(), d.roles())
	}
}

func TestLiveErrors(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.register("linear", "linear.esm.js")
	f.startHost()
	id := f.run("linear", "")
	f.waitStatus(id, "completed")

	f.wantError(http.MethodGet, "/api/threads/01ARZ3NDEKTSV4RRFFQ69G5FAV/live", "", http.StatusNotFound, "thread not found: 01ARZ3NDEKTSV4RRFFQ69G5FAV")
	f.wantError(http.MethodGet, "/api/threads/a.b/live", "", http.StatusBadRequest, "invalid thread id")
	for _, bad := range []string{"x", "-1", "1:x", "1:-2", "1:2:3"} {
		rec := f.call(http.MethodGet, "/api/threads/"+id+"/live", "", "Last-Event-ID", bad)
		if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "invalid Last-Event-ID") {
			t.Errorf("Last-Event-ID %q: %d %s", bad, rec.Code, rec.Body)
		}
	}
	// A finished thread streams everything and ends at once, also through
	// a ResponseWriter that cannot flush (a tunnel that buffers).
	pw := &plainWriter{h: http.Header{}}
	f.e.ServeHTTP(pw, httptest.NewRequest(http.MethodGet, "/api/threads/"+id+"/live", nil))
	evs := collect(t, newSSEReader(&pw.buf))
	if pw.code != http.StatusOK || doneReason(t, evs) != DoneCompleted || len(records(t, evs)) != 5 {
		t.Errorf("finished thread: %d %+v", pw.code, evs)
	}
	// Past the end: nothing but done.
	rec := f.call(http.MethodGet, "/api/threads/"+id+"/live", "", "Last-Event-ID", strconv.Itoa(99))
	if evs := collect(t, newSSEReader(rec.Body)); len(records(t, evs)) != 0 || doneReason(t, evs) != DoneCompleted {
		t.Errorf("past the end: %+v", evs)
	}
}

// plainWriter is a ResponseWriter that is not an http.Flusher.
type plainWriter struct {
	h    http.Header
	buf  bytes.Buffer
	code int
}

func (w *plainWriter) Header() http.Header { return w.h }

func (w *plainWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.buf.Write(b)
}

func (w *plainWriter) WriteHeader(code int) { w.code = code }
