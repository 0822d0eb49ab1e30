package api

import (
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/uncaged/workflow/engine/cas"
	"github.com/uncaged/workflow/engine/host"
	"github.com/uncaged/workflow/engine/node"
	"github.com/uncaged/workflow/engine/storage"
	"github.com/uncaged/workflow/engine/threads"
	"github.com/uncaged/workflow/engine/usage"
	"github.com/uncaged/workflow/shared/fleet"
	"github.com/uncaged/workflow/shared/testkit"
)

// openEvents opens GET /api/events over real HTTP, with lastID as
// Last-Event-ID when set.
func (f *fixture) openEvents(ctx context.Context, lastID string) (*http.Response, *fleet.Decoder) {
	f.t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.srv.URL+fleet.EventsPath, nil)
	if err != nil {
		f.t.Fatal(err)
	}
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		f.t.Fatalf("events: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	f.t.Cleanup(func() { _ = resp.Body.Close() })
	return resp, fleet.NewDecoder(resp.Body)
}

// eventsUntil reads events until stop says so, and returns them.
func eventsUntil(t *testing.T, d *fleet.Decoder, stop func(fleet.Event) bool) []fleet.Event {
	t.Helper()
	var out []fleet.Event
	for {
		ev, err := d.Next()
		if err != nil {
			t.Fatalf("stream ended after %d events: %v", len(out), err)
		}
		out = append(out, ev)
		if stop(ev) {
			return out
		}
	}
}

func isSynced(ev fleet.Event) bool { return ev.Name == fleet.EventSynced }

// threadsOf decodes the thread events, last one per id winning.
func threadsOf(t *testing.T, evs []fleet.Event) map[string]fleet.Thread {
	t.Helper()
	out := map[string]fleet.Thread{}
	for _, ev := range evs {
		if ev.Name != fleet.EventThread {
			continue
		}
		var th fleet.Thread
		if err := json.Unmarshal(ev.Data, &th); err != nil {
			t.Fatalf("thread event %s: %v", ev.Data, err)
		}
		out[th.ID] = th
	}
	return out
}

// checkEventIDs asserts every event has an id of one instance, and the
// sequence numbers never go back.
func checkEventIDs(t *testing.T, evs []fleet.Event) string {
	t.Helper()
	var inst string
	var prev uint64
	for _, ev := range evs {
		i, seq, err := fleet.ParseEventID(ev.ID)
		if err != nil {
			t.Fatalf("event %s: %v", ev.Name, err)
		}
		if inst != "" && i != inst {
			t.Fatalf("instance %s after %s", i, inst)
		}
		if seq < prev {
			t.Fatalf("id %s after seq %d", ev.ID, prev)
		}
		inst, prev = i, seq
	}
	return inst
}

// A new stream sends reset, every thread with its summary, synced; then
// a thread's changes as they happen, until it ends.
func TestEventsSnapshotThenLive(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(o *Options) { o.LivePoll = 20 * time.Millisecond })
	f.register("linear", "linear.esm.js")
	f.register("slow", "slow.esm.js")
	f.startHost()
	done := f.run("linear", "say hello to the "+strings.Repeat("long ", 200)+"world")
	f.waitStatus(done, "completed")

	_, d := f.openEvents(context.Background(), "")
	evs := eventsUntil(t, d, isSynced)
	checkEventIDs(t, evs)
	if evs[0].Name != fleet.EventReset {
		t.Fatalf("first event %s, want reset", evs[0].Name)
	}
	got := threadsOf(t, evs)
	th, ok := got[done]
	if len(got) != 1 || !ok {
		t.Fatalf("snapshot: %v", got)
	}
	if th.Workflow != "linear" || th.Status != "completed" || th.ReturnCode == nil || *th.ReturnCode != 0 ||
		th.Steps == 0 || th.StartedAt.IsZero() || th.UpdatedAt.Before(th.StartedAt) ||
		th.DurationMs != th.UpdatedAt.Sub(th.StartedAt).Milliseconds() ||
		!strings.HasPrefix(th.Prompt, "say hello") || len([]rune(th.Prompt)) != fleet.PromptMaxRunes {
		t.Fatalf("summary: %+v", th)
	}
	if d := f.detail(done); len(d.roles()) != th.Steps || d.result()["content"] != th.Summary {
		t.Fatalf("summary %+v disagrees with the thread %+v", th, d.Records)
	}

	// Live: a new thread shows up running, then completed.
	id := f.run("slow", "slowly")
	var last fleet.Thread
	sawRunning := false
	evs = eventsUntil(t, d, func(ev fleet.Event) bool {
		if ev.Name != fleet.EventThread {
			return false
		}
		if err := json.Unmarshal(ev.Data, &last); err != nil {
			t.Fatal(err)
		}
		sawRunning = sawRunning || (last.ID == id && last.Status == "running")
		return last.ID == id && last.Status == "completed"
	})
	checkEventIDs(t, evs)
	if !sawRunning || last.Steps != 5 || last.Workflow != "slow" {
		t.Fatalf("live: running seen %v, last %+v", sawRunning, last)
	}
}

// A client that comes back with its last id gets only what changed since,
// and no reset; one with another instance's id, or none it can use, gets
// the whole snapshot again.
func TestEventsResume(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(o *Options) { o.LivePoll = 20 * time.Millisecond })
	hash := f.register("linear", "linear.esm.js")
	f.startHost()
	first := f.run("linear", "one")
	f.waitStatus(first, "completed")
	// A finished thread's history line is written before it leaves
	// threads.json: wait for both, so the snapshot below is its last word
	// and the resumed stream owes it nothing.
	testkit.WaitUntil(t, "the first thread to leave threads.json", func() bool {
		idx, err := threads.ReadIndex(f.l.BundleDir(hash))
		_, active := idx[first]
		return err == nil && !active
	})

	ctx, cancel := context.WithCancel(context.Background())
	_, d := f.openEvents(ctx, "")
	evs := eventsUntil(t, d, isSynced)
	lastID := evs[len(evs)-1].ID
	inst := checkEventIDs(t, evs)
	cancel()

	second := f.run("linear", "two")
	f.waitStatus(second, "completed")
	_, d = f.openEvents(context.Background(), lastID)
	evs = eventsUntil(t, d, isSynced)
	if got := checkEventIDs(t, evs); got != inst {
		t.Fatalf("instance %s, then %s", inst, got)
	}
	got := threadsOf(t, evs)
	if evs[0].Name == fleet.EventReset || len(got) != 1 || got[second].Status != "completed" {
		t.Fatalf("resume from %s: %v", lastID, evs)
	}

	for _, id := range []string{"0123456789abcdef-3", inst + "-999999", "garbage"} {
		_, d := f.openEvents(context.Background(), id)
		evs := eventsUntil(t, d, isSynced)
		got := threadsOf(t, evs)
		if evs[0].Name != fleet.EventReset || len(got) != 2 {
			t.Fatalf("Last-Event-ID %s: want reset and both threads, got %v", id, evs)
		}
	}
}

// A client that leaves ends its handler; pings keep an idle stream alive.
func TestEventsClientCancelAndPing(t *testing.T) {
	t.Parallel()
	var logs testkit.Buffer
	f := newFixture(t, func(o *Options) {
		o.LivePing = 10 * time.Millisecond
		o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	ctx, cancel := context.WithCancel(context.Background())
	resp, d := f.openEvents(ctx, "")
	evs := eventsUntil(t, d, isSynced)
	if len(evs) != 2 || evs[0].Name != fleet.EventReset {
		t.Fatalf("empty machine: %v", evs)
	}
	buf := make([]byte, len(fleet.Ping))
	if _, err := resp.Body.Read(buf); err != nil || string(buf) != fleet.Ping {
		t.Fatalf("after synced: %q %v, want a ping", buf, err)
	}
	cancel()
	testkit.WaitUntil(t, "the events handler to return after the client left", func() bool {
		return strings.Contains(logs.String(), "path="+fleet.EventsPath)
	})
}

// A server shutting down ends the stream instead of waiting for it: a
// stopping connector (whose tunnel server drains its requests) would
// otherwise wait out its whole drain timeout.
func TestEventsEndWhenTheServerShutsDown(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: f.e}
	go func() { _ = srv.Serve(ln) }() // ErrServerClosed after Shutdown
	resp, err := http.Get("http://" + ln.Addr().String() + fleet.EventsPath)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	eventsUntil(t, fleet.NewDecoder(resp.Body), isSynced)
	done := make(chan error, 1)
	go func() { done <- srv.Shutdown(context.Background()) }()
	var shutErr error
	testkit.WaitUntil(t, "the server to shut down with a stream open", func() bool {
		select {
		case shutErr = <-done:
			return true
		default:
			return false
		}
	})
	if shutErr != nil {
		t.Fatal(shutErr)
	}
}

// A thread's summary carries what its model calls used: the total tokens,
// the cost at config.prices and the totals' whole document; a thread
// that made no call carries none of them.
func TestEventsCarryUsage(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	hash := f.register("linear", "linear.esm.js")
	f.priceModel()
	f.startHost()
	spent := f.run("linear", "build")
	idle := f.run("linear", "build again")
	f.waitStatus(spent, "completed")
	f.waitStatus(idle, "completed")
	now := time.Now().UnixMilli()
	appendUsage(t, usage.Path(f.l, hash, spent),
		usage.Record{Time: now, Thread: spent, Workflow: "linear", Step: 1, Source: usage.SourceRole, Model: "p/m", PromptTokens: 1000, CompletionTokens: 100},
		usage.Record{Time: now, Thread: spent, Workflow: "linear", Step: 2, Source: usage.SourceRole, Model: "p/m", PromptTokens: 500, CompletionTokens: 50})

	_, d := f.openEvents(context.Background(), "")
	got := threadsOf(t, eventsUntil(t, d, isSynced))
	th := got[spent]
	var totals usage.Totals
	if th.Tokens != 1650 || th.Cost != (1500+150*2)/1e6 || json.Unmarshal(th.Usage, &totals) != nil || totals.Calls != 2 || totals.PromptTokens != 1500 {
		t.Fatalf("with usage: tokens %d, cost %v, usage %s", th.Tokens, th.Cost, th.Usage)
	}
	if th := got[idle]; th.Tokens != 0 || th.Cost != 0 || th.Usage != nil {
		t.Fatalf("without usage: tokens %d, cost %v, usage %s", th.Tokens, th.Cost, th.Usage)
	}
}

// A finished thread is no change to send again because the engine still
// listed it as running at the poll that first read its history line (the
// host lets go of a thread a moment after its last write): the stream
// would resend it to every client.
func TestAFinishedThreadIsNotResentWhenTheEngineLetsGoOfIt(t *testing.T) {
	l := storage.Layout{Root: t.TempDir()}
	store := cas.Open(l.CASDir())
	f := newFeed(&server{opts: Options{Layout: l}, store: store, log: slog.New(slog.DiscardHandler)})
	start, err := store.PutNode(node.NewStart(node.StartPayload{Name: "w", Hash: "B"}, "SSVQ0RZ55P9Y4"))
	if err != nil {
		t.Fatal(err)
	}
	finished := threads.Record{ThreadID: "01KFINISHED0000000000000000", BundleHash: "B", Head: start, Start: start, Source: threads.SourceHistory}
	for _, running := range []map[string]host.RunningThread{
		{finished.ThreadID: {Status: threads.StatusRunning}},
		{finished.ThreadID: {Status: threads.StatusPaused}},
		{},
	} {
		f.apply([]string{"B"}, []threads.Record{finished}, host.Sight(func() (map[string]host.RunningThread, error) { return running, nil }), true, true)
	}
	if _, changes, _ := f.since(0); changes != 1 {
		t.Fatalf("the finished thread was recorded as %d changes, want 1", changes)
	}
}
