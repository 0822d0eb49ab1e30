package host

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/uncaged/workflow/engine/storage"
	"github.com/uncaged/workflow/engine/threads"
)

// A Sighting judges a record by the host's first answer when that answer
// names the thread, and asks again, once, only for an active thread it
// did not name: such a thread began after the first answer, and reads as
// running whatever the second answer says it does by now.
func TestASightingJudgesARecordByTheAnswerBeforeIt(t *testing.T) {
	t.Parallel()
	l := storage.Layout{Root: t.TempDir()}
	const id = "01KSIGHTED000000000000000000"
	answer := func(st threads.Status) map[string]RunningThread {
		return map[string]RunningThread{id: {ThreadID: id, Status: st}}
	}
	failed := errors.New("host gone")
	for _, tc := range []struct {
		name          string
		first, second map[string]RunningThread
		firstErr      error
		secondErr     error
		source        threads.Source
		want          threads.Liveness
		asks          int32
		wantErr       error
	}{
		{name: "paused in the first answer", first: answer(threads.StatusPaused), second: answer(threads.StatusRunning), source: threads.SourceActive, want: threads.HeldPaused, asks: 1},
		{name: "pausing in the first answer", first: answer(threads.StatusPausing), second: answer(threads.StatusPaused), source: threads.SourceActive, want: threads.Pausing, asks: 1},
		{name: "running in the first answer", first: answer(threads.StatusRunning), second: answer(threads.StatusPaused), source: threads.SourceActive, want: threads.Executing, asks: 1},
		{name: "waiting in the first answer", first: answer(threads.StatusWaiting), source: threads.SourceActive, want: threads.AwaitingAnswer, asks: 1},
		{name: "begun between the answers", second: answer(threads.StatusRunning), source: threads.SourceActive, want: threads.Executing, asks: 2},
		{name: "begun and paused between the answers", second: answer(threads.StatusPaused), source: threads.SourceActive, want: threads.Executing, asks: 2},
		{name: "begun and waiting between the answers", second: answer(threads.StatusWaiting), source: threads.SourceActive, want: threads.Executing, asks: 2},
		{name: "run by nobody", source: threads.SourceActive, want: threads.NotExecuting, asks: 2},
		{name: "finished", second: answer(threads.StatusRunning), source: threads.SourceHistory, want: threads.NotExecuting, asks: 1},
		{name: "no first answer", firstErr: failed, second: answer(threads.StatusRunning), source: threads.SourceActive, want: threads.Executing, asks: 2, wantErr: failed},
		{name: "no second answer", secondErr: failed, source: threads.SourceActive, want: threads.NotExecuting, asks: 2, wantErr: failed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var asks atomic.Int32
			s := Sight(func() (map[string]RunningThread, error) {
				if asks.Add(1) == 1 {
					return tc.first, tc.firstErr
				}
				return tc.second, tc.secondErr
			})
			rec := threads.Record{ThreadID: id, BundleHash: "SIGHTED000000", Source: tc.source}
			// Many readers at once: the host is still asked at most twice.
			var wg sync.WaitGroup
			got := make([]threads.Liveness, 8)
			for i := range got {
				wg.Go(func() { got[i] = s.Liveness(l, rec) })
			}
			wg.Wait()
			for _, g := range got {
				if g != tc.want {
					t.Fatalf("liveness %v, want %v", g, tc.want)
				}
			}
			if n := asks.Load(); n != tc.asks {
				t.Fatalf("the host was asked %d times, want %d", n, tc.asks)
			}
			if err := s.Err(); !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) {
				t.Fatalf("Err() = %v, want %v", err, tc.wantErr)
			}
		})
	}
}

// The host lists a thread as running before it writes the thread's line
// in the index, whichever way the thread begins (a run, a fork, a child):
// a view that asks the host first and then finds the line never finds a
// thread nobody runs. The executor stamps the line with its clock: each
// such reading finds a thread running that no earlier reading found,
// marked starting (a list of threads to look up leaves it out until the
// line is there), and the mark is gone once the thread's records are.
func TestAThreadIsListedRunningBeforeItsIndexLine(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	f := newFixture(t, 0, map[string]goFlow{"steps": {roles: []string{"a", "b"}}, "parent": {roles: []string{"child:steps"}}, "held": {roles: []string{"wait"}, release: release}})
	var (
		mu        sync.Mutex
		known     = map[string]bool{}
		stamps    int
		violation string
	)
	f.host.exec.Now = func() time.Time {
		if stampsIndexLine() {
			mu.Lock()
			stamps++
			fresh := false
			for _, r := range f.host.List() {
				if !known[r.ThreadID] {
					known[r.ThreadID], fresh = true, true
					if !r.Starting && violation == "" {
						violation = fmt.Sprintf("thread %s is not marked starting while its index line is written", r.ThreadID)
					}
				}
			}
			if !fresh && violation == "" {
				violation = fmt.Sprintf("the executor stamped a new thread's index line while the host listed only %v", f.host.List())
			}
			mu.Unlock()
		}
		return time.Now()
	}
	check := func(what string, wantStamps int) {
		t.Helper()
		mu.Lock()
		defer mu.Unlock()
		if violation != "" {
			t.Fatalf("%s: %s", what, violation)
		}
		if stamps != wantStamps {
			t.Fatalf("%s: %d new threads' index lines stamped, want %d", what, stamps, wantStamps)
		}
		stamps = 0
	}
	id, err := f.host.Run(RunRequest{Workflow: "steps", Prompt: "p"})
	if err != nil {
		t.Fatal(err)
	}
	f.finished(id)
	check("a run", 1)
	if err := os.WriteFile(f.l.BundleFile("STEPS00000000"), nil, 0o644); err != nil { // what a fork checks is there
		t.Fatal(err)
	}
	fork, err := f.host.Fork(id, ForkRequest{FromRole: "a"})
	if err != nil {
		t.Fatal(err)
	}
	f.finished(fork)
	check("a fork", 1)
	held, err := f.host.Run(RunRequest{Workflow: "held", Prompt: "p"})
	if err != nil {
		t.Fatal(err)
	}
	if l := f.host.List(); len(l) != 1 || l[0].ThreadID != held || l[0].Starting {
		t.Fatalf("a thread whose records are written: %+v", l)
	}
	close(release)
	f.finished(held)
	check("a held run", 1)
	parent, err := f.host.Run(RunRequest{Workflow: "parent", Prompt: "p"})
	if err != nil {
		t.Fatal(err)
	}
	f.finished(parent)
	check("a run and its child", 2)
}

// stampsIndexLine reports whether the caller's caller reads the clock for
// the executor writing a new thread's line in the index (Begin, List).
func stampsIndexLine() bool {
	pc := make([]uintptr, 32)
	frames := runtime.CallersFrames(pc[:runtime.Callers(3, pc)])
	for {
		fr, more := frames.Next()
		if strings.HasSuffix(fr.Function, "executor.(*Executor).Begin") || strings.HasSuffix(fr.Function, "executor.(*Executor).List") {
			return true
		}
		if !more {
			return false
		}
	}
}
