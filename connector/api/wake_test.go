package api

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/uncaged/workflow/engine/executor"
	"github.com/uncaged/workflow/engine/host"
	"github.com/uncaged/workflow/engine/ids"
	"github.com/uncaged/workflow/engine/workflow/workflowtest"
	"github.com/uncaged/workflow/shared/fleet"
	"github.com/uncaged/workflow/shared/testkit"
)

// noPolling leaves the live streams and the feed nothing but the engine
// host's changes to wake on: the timers they would poll by never fire
// within a test.
func noPolling(o *Options) { o.LivePoll, o.SlowPoll = time.Hour, time.Hour }

// changeStreamOpen is the API's gauge of the host's change stream.
func (f *fixture) changeStreamOpen() float64 {
	return sample(scrapeAPI(f.t, f.srv.URL), "uncaged_connector_change_stream_open")
}

// A live stream with no timer to poll by sends every step, debug-log line
// and the end, as the engine host tells of them.
func TestLiveFollowsTheHostsChangesAlone(t *testing.T) {
	t.Parallel()
	f := newFixture(t, noPolling)
	hash := f.register("ticks", "ticks.esm.js")
	f.startHost()
	if got := f.changeStreamOpen(); got != 0 {
		t.Errorf("change stream open with no stream to need it: %v", got)
	}
	id := f.run("ticks", "")
	resp := f.openLive(context.Background(), id)
	r := newSSEReader(resp.Body)
	if ev, err := r.next(); err != nil || ev.Name != EventRecord {
		t.Fatalf("first event: %+v %v", ev, err)
	}
	testkit.WaitUntil(t, "the change stream to open", func() bool { return f.changeStreamOpen() == 1 })
	evs := collect(t, r)
	resp.Body.Close()
	checkIDs(t, evs)
	if reason := doneReason(t, evs); reason != DoneCompleted {
		t.Fatalf("done: %s", reason)
	}
	if recs := records(t, evs); len(recs) != 1+20 || recs[len(recs)-1]["type"] != RecordWorkflowResult {
		t.Fatalf("%d records, want the start, 20 steps and the result", len(recs)+1)
	}
	// Every line of the debug log, in order.
	b, err := os.ReadFile(f.l.InfoLog(hash, id))
	if err != nil {
		t.Fatal(err)
	}
	var infos []string
	for _, ev := range evs {
		if ev.Name == EventInfo {
			infos = append(infos, ev.Data)
		}
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if !slices.Equal(infos, lines) {
		t.Fatalf("info events:\n%s\nthe log:\n%s", strings.Join(infos, "\n"), b)
	}
	testkit.WaitUntil(t, "the change stream to close with the last stream", func() bool { return f.changeStreamOpen() == 0 })
}

// streamed is what a stream sent, as it is compared: each record's
// position and data (the thread-start's position only: its status moves),
// and each info line's offset and data, in the order sent. How the two
// interleave is when each was read, which differs between a stream that
// follows the thread and one that reads it whole.
func streamed(t *testing.T, evs []sseEvent) (recs, infos []string) {
	t.Helper()
	for _, ev := range evs {
		p := posOf(t, ev.ID)
		switch {
		case ev.Name == EventRecord && p.records == 1:
			recs = append(recs, "record 1")
		case ev.Name == EventRecord:
			recs = append(recs, fmt.Sprintf("record %d %s", p.records, ev.Data))
		case ev.Name == EventInfo:
			infos = append(infos, fmt.Sprintf("info %d %s", p.logOff, ev.Data))
		}
	}
	return recs, infos
}

// A client that reconnects with Last-Event-ID, wherever it was cut off —
// many random places, while the thread runs and once it has ended — gets
// every record and debug-log line exactly once, in order, with nothing
// but the host's changes to wake the streams.
func TestLiveResumesAnywhereWithoutLossOrRepeat(t *testing.T) {
	t.Parallel()
	f := newFixture(t, noPolling)
	f.register("ticks", "ticks.esm.js")
	f.startHost()
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 28))
	cuts := 0
	for range 3 {
		id := f.run("ticks", "")
		var got []sseEvent
		last := ""
		for ended := false; !ended; {
			ctx, cancel := context.WithCancel(context.Background())
			resp := f.openLive(ctx, id, "Last-Event-ID", last)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("resume from %q: %d", last, resp.StatusCode)
			}
			r := newSSEReader(resp.Body)
			for n := 1 + rng.IntN(6); n > 0 && !ended; n-- {
				ev, err := r.next()
				if err != nil {
					t.Fatalf("resumed from %q: %v", last, err)
				}
				got = append(got, ev)
				last, ended = ev.ID, ev.Name == EventDone
			}
			cancel()
			resp.Body.Close()
			cuts++
		}
		checkIDs(t, got)
		resp := f.openLive(context.Background(), id)
		whole := collect(t, newSSEReader(resp.Body))
		resp.Body.Close()
		recs, infos := streamed(t, got)
		wantRecs, wantInfos := streamed(t, whole)
		if !slices.Equal(recs, wantRecs) || !slices.Equal(infos, wantInfos) || doneReason(t, got) != DoneCompleted {
			t.Fatalf("resumed stream of %s:\n%s\n%s\nthe whole stream:\n%s\n%s", id,
				strings.Join(recs, "\n"), strings.Join(infos, "\n"), strings.Join(wantRecs, "\n"), strings.Join(wantInfos, "\n"))
		}
	}
	t.Logf("%d cuts", cuts)
}

// A fork followed live, its copied steps and a __fork__ node first, then
// the steps it writes: the stream sends what a stream opened once it
// ended sends.
func TestLiveFollowsAForkAsItRuns(t *testing.T) {
	t.Parallel()
	f := newFixture(t, noPolling)
	f.register("ticks", "ticks.esm.js")
	f.startHost()
	id := f.run("ticks", "")
	f.waitStatus(id, "completed")
	var ref struct{ ThreadID string }
	f.want(http.MethodPost, "/api/threads/"+id+"/fork", `{"step":5}`, http.StatusCreated, &ref)
	resp := f.openLive(context.Background(), ref.ThreadID)
	evs := collect(t, newSSEReader(resp.Body))
	resp.Body.Close()
	resp = f.openLive(context.Background(), ref.ThreadID)
	whole := collect(t, newSSEReader(resp.Body))
	resp.Body.Close()
	recs, infos := streamed(t, evs)
	wantRecs, wantInfos := streamed(t, whole)
	if !slices.Equal(recs, wantRecs) || !slices.Equal(infos, wantInfos) || doneReason(t, evs) != DoneCompleted || len(recs) != 22 {
		t.Fatalf("the fork followed live:\n%s\nread once it ended:\n%s", strings.Join(recs, "\n"), strings.Join(wantRecs, "\n"))
	}
}

// The host stopping wakes the streams that follow its threads: a live
// stream says done/not-running, and the feed sends the thread
// interrupted, with no timer to poll by.
func TestTheHostStoppingWakesTheStreams(t *testing.T) {
	t.Parallel()
	f := newFixture(t, noPolling)
	f.register("slow", "slow.esm.js")
	f.startHost()
	id := f.runGated("slow", filepath.Join(t.TempDir(), "never"))
	_, feed := f.openEvents(context.Background(), "")
	eventsUntil(t, feed, isSynced)
	resp := f.openLive(context.Background(), id)
	defer resp.Body.Close()
	r := newSSEReader(resp.Body)
	for {
		ev, err := r.next()
		if err != nil {
			t.Fatalf("the stream ended before the first step: %v", err)
		}
		if ev.Name == EventRecord && strings.Contains(ev.Data, `"type":"role"`) {
			break
		}
	}
	f.shutdownHost()
	if reason := doneReason(t, collect(t, r)); reason != DoneNotRunning {
		t.Fatalf("done: %s", reason)
	}
	eventsUntil(t, feed, func(ev fleet.Event) bool {
		var th fleet.Thread
		return ev.Name == fleet.EventThread && json.Unmarshal(ev.Data, &th) == nil && th.ID == id && th.Status == "interrupted"
	})
}

// The feed, with no timer to poll by, sends a new thread running and then
// completed as the host tells of it.
func TestEventsFollowTheHostsChangesAlone(t *testing.T) {
	t.Parallel()
	f := newFixture(t, noPolling)
	f.register("ticks", "ticks.esm.js")
	f.startHost()
	_, d := f.openEvents(context.Background(), "")
	eventsUntil(t, d, isSynced)
	id := f.run("ticks", "")
	var last fleet.Thread
	sawRunning := false
	evs := eventsUntil(t, d, func(ev fleet.Event) bool {
		if ev.Name != fleet.EventThread || json.Unmarshal(ev.Data, &last) != nil {
			return false
		}
		sawRunning = sawRunning || (last.ID == id && last.Status == "running")
		return last.ID == id && last.Status == "completed"
	})
	checkEventIDs(t, evs)
	if !sawRunning || last.Steps != 20 {
		t.Fatalf("running seen %v, last %+v", sawRunning, last)
	}
}

// A thread the original engine's worker runs on a shared root changes
// with no word from this engine's host: the live stream and the feed
// find its steps and its end by their slow poll, whether a host runs or
// none does.
func TestAThreadAnotherProgramRunsIsFollowedBySlowPoll(t *testing.T) {
	t.Parallel()
	for _, withHost := range []bool{false, true} {
		t.Run(fmt.Sprintf("host=%v", withHost), func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, func(o *Options) { o.LivePoll, o.SlowPoll = time.Hour, 20*time.Millisecond })
			bundle := f.register("slow", "slow.esm.js")
			th := executor.Thread{ID: ids.NewThreadID(time.Now()), BundleHash: bundle, WorkflowName: "slow", Prompt: "the original's"}
			runner := executor.New(f.l)
			if err := runner.Begin(&th); err != nil {
				t.Fatal(err)
			}
			f.originalRuns(bundle, th.ID)
			if withHost {
				f.startHost()
			}
			_, feed := f.openEvents(context.Background(), "")
			eventsUntil(t, feed, isSynced)
			resp := f.openLive(context.Background(), th.ID)
			defer resp.Body.Close()
			r := newSSEReader(resp.Body)
			if ev, err := r.next(); err != nil || ev.Name != EventRecord || !strings.Contains(ev.Data, `"status":"running"`) {
				t.Fatalf("first event: %+v %v", ev, err)
			}
			if withHost {
				testkit.WaitUntil(t, "the change stream to open", func() bool { return f.changeStreamOpen() == 1 })
			}

			flow := workflowtest.Stepped{Roles: []string{"one", "two", "three"}, Next: make(chan struct{})}
			ran := make(chan error, 1)
			go func() {
				_, err := runner.Run(context.Background(), flow, th, executor.Env{})
				ran <- err
			}()
			for _, role := range flow.Roles {
				flow.Next <- struct{}{}
				for {
					ev, err := r.next()
					if err != nil {
						t.Fatalf("waiting for step %s: %v", role, err)
					}
					if ev.Name == EventRecord && strings.Contains(ev.Data, `"role":"`+role+`"`) {
						break
					}
				}
			}
			flow.Next <- struct{}{}
			if err := <-ran; err != nil {
				t.Fatal(err)
			}
			if reason := doneReason(t, collect(t, r)); reason != DoneCompleted {
				t.Fatalf("done: %s", reason)
			}
			eventsUntil(t, feed, func(ev fleet.Event) bool {
				var th2 fleet.Thread
				return ev.Name == fleet.EventThread && json.Unmarshal(ev.Data, &th2) == nil && th2.ID == th.ID && th2.Status == "completed" && th2.Steps == 3
			})
		})
	}
}

// hideChangeStream stands a proxy where the root's engine host listens,
// passing every request on but answering GET /v1/changes 404, as a host
// older than the change stream does. Call it before the API first
// reaches the host.
func (f *fixture) hideChangeStream() {
	t := f.t
	sock := host.SocketPath(f.l)
	hidden := filepath.Join(filepath.Dir(sock), "h.sock")
	if err := os.Rename(sock, hidden); err != nil {
		t.Fatal(err)
	}
	// Bound where no one else can reach it, made the owner's only, and
	// moved into place: what the client checks of a socket.
	dir, err := os.MkdirTemp(filepath.Dir(sock), ".p")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("unix", filepath.Join(dir, "s"))
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	if err := os.Chmod(filepath.Join(dir, "s"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, "s"), sock); err != nil {
		t.Fatal(err)
	}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) { r.Out.URL.Scheme, r.Out.URL.Host = "http", "engine" },
		Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", hidden)
		}},
	}
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/changes" {
			http.NotFound(w, r)
			return
		}
		proxy.ServeHTTP(w, r)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
}

// With a host older than the change stream, the live stream and the feed
// poll every LivePoll, as they did before the stream.
func TestAHostWithoutTheChangeStreamIsPolled(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(o *Options) { o.LivePoll, o.SlowPoll = 20*time.Millisecond, time.Hour })
	f.register("ticks", "ticks.esm.js")
	f.startHost()
	f.hideChangeStream()
	_, feed := f.openEvents(context.Background(), "")
	eventsUntil(t, feed, isSynced)
	id := f.run("ticks", "")
	resp := f.openLive(context.Background(), id)
	evs := collect(t, newSSEReader(resp.Body))
	resp.Body.Close()
	checkIDs(t, evs)
	if reason := doneReason(t, evs); reason != DoneCompleted || len(records(t, evs)) != 22 {
		t.Fatalf("done %s with %d records", reason, len(records(t, evs)))
	}
	eventsUntil(t, feed, func(ev fleet.Event) bool {
		var th fleet.Thread
		return ev.Name == fleet.EventThread && json.Unmarshal(ev.Data, &th) == nil && th.ID == id && th.Status == "completed"
	})
	if got := f.changeStreamOpen(); got != 0 {
		t.Fatalf("change stream open through a host without one: %v", got)
	}
}

// A stream reads at once on each wake by log lines up to its burst, then
// at logRate.
func TestLogBudget(t *testing.T) {
	t.Parallel()
	var b logBudget
	now := time.Unix(1e9, 0)
	turn := time.Second / logRate
	about := func(d, want time.Duration) bool { return d > want-time.Microsecond && d < want+time.Microsecond }
	for i := range logBurst {
		if d := b.take(now); d != 0 {
			t.Fatalf("step %d of a burst waits %s", i+1, d)
		}
	}
	if d := b.take(now); !about(d, turn) {
		t.Fatalf("the step after a burst waits %s, want %s", d, turn)
	}
	// Wakes that keep coming faster than the rate wait their turn each.
	for range 5 {
		now = now.Add(turn)
		if d := b.take(now); !about(d, turn) {
			t.Fatalf("at the rate: waits %s, want %s", d, turn)
		}
	}
	// Quiet for a while: a burst again.
	now = now.Add(time.Minute)
	for i := range logBurst {
		if d := b.take(now); d != 0 {
			t.Fatalf("after a quiet minute, step %d waits %s", i+1, d)
		}
	}
}
