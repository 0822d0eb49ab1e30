package host

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/uncaged/workflow/engine/cas"
	"github.com/uncaged/workflow/engine/executor"
	"github.com/uncaged/workflow/engine/threads"
)

// pauseRecords are thread id's debug-log records of pausing, "tag: content".
func (f *fixture) pauseRecords(id string) []string {
	f.t.Helper()
	rec, err := threads.Resolve(f.l, id)
	if err != nil {
		f.t.Fatal(err)
	}
	b, err := os.ReadFile(f.l.InfoLog(rec.BundleHash, id))
	if err != nil {
		f.t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var r struct{ Tag, Content string }
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			f.t.Fatalf("log line %q: %v", line, err)
		}
		switch r.Tag {
		case executor.TagPausing, executor.TagPaused, executor.TagResumed:
			out = append(out, r.Tag+": "+r.Content)
		}
	}
	return out
}

// status is thread id's status as every view derives it (a Sighting of
// the host's list), beside what the list itself says.
func (f *fixture) status(id string) (view, listed threads.Status) {
	f.t.Helper()
	seen := Sight(f.client.Running)
	if err := seen.Err(); err != nil {
		f.t.Fatal(err)
	}
	rec, err := threads.Resolve(f.l, id)
	if err != nil {
		f.t.Fatal(err)
	}
	view, damage := seen.Status(cas.Open(f.l.CASDir()), rec)
	if damage != nil {
		f.t.Fatal(damage)
	}
	return view, seen.Running()[id].Status
}

func (f *fixture) expectStatus(id string, want threads.Status) {
	f.t.Helper()
	if view, listed := f.status(id); view != want || listed != want {
		f.t.Fatalf("status = %s (listed %s), want %s", view, listed, want)
	}
}

func expectRecords(t *testing.T, got []string, want ...string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("pause records = %q, want %q", got, want)
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Fatalf("pause records = %q, want %q", got, want)
		}
	}
}

// A pause asked while a role runs: the thread is pausing (not paused) and
// its log says so until the role's step is written; then it is paused,
// and the log says after which step; a resume logs how long it was held.
func TestPauseIsPausingUntilTheRoleFinishes(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	var waiting atomic.Int32
	f := newFixture(t, 0, map[string]goFlow{"linear": {roles: []string{"a", "wait", "b"}, release: release, waiting: &waiting}})
	id, err := f.client.Run(RunRequest{Workflow: "linear"})
	if err != nil {
		t.Fatal(err)
	}
	f.waitFor("the second role to run", func() bool { return waiting.Load() == 1 })
	f.expectStatus(id, threads.StatusRunning)
	if err := f.client.Pause(id); err != nil {
		t.Fatal(err)
	}
	f.expectStatus(id, threads.StatusPausing)
	expectRecords(t, f.pauseRecords(id), "pausing: pause requested; role wait finishes its step first")

	close(release)
	f.waitFor("the thread to be held", func() bool { view, _ := f.status(id); return view == threads.StatusPaused })
	f.expectStatus(id, threads.StatusPaused)
	if got := f.chainRoles(f.head(id)); got != "a,wait" {
		t.Fatalf("paused at %s, want after the role in flight", got)
	}
	expectRecords(t, f.pauseRecords(id), "pausing: ", "paused: paused after step 2")

	if err := f.client.Resume(id); err != nil {
		t.Fatal(err)
	}
	if got := f.chainRoles(f.finished(id).Head); got != "a,wait,b,__end__" {
		t.Fatalf("chain = %s", got)
	}
	expectRecords(t, f.pauseRecords(id), "pausing: ", "paused: ", "resumed: resumed after ")
}

// A resume while the thread is still pausing cancels the pause: the role
// in flight finishes and the thread goes on without stopping.
func TestResumeWhilePausingCancelsThePause(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	var waiting atomic.Int32
	f := newFixture(t, 0, map[string]goFlow{"linear": {roles: []string{"a", "wait", "b"}, release: release, waiting: &waiting}})
	id, err := f.client.Run(RunRequest{Workflow: "linear"})
	if err != nil {
		t.Fatal(err)
	}
	f.waitFor("the second role to run", func() bool { return waiting.Load() == 1 })
	if err := f.client.Pause(id); err != nil {
		t.Fatal(err)
	}
	f.expectStatus(id, threads.StatusPausing)
	if err := f.client.Resume(id); err != nil {
		t.Fatal(err)
	}
	f.expectStatus(id, threads.StatusRunning)
	close(release)
	if got := f.chainRoles(f.finished(id).Head); got != "a,wait,b,__end__" {
		t.Fatalf("chain = %s", got)
	}
	expectRecords(t, f.pauseRecords(id), "pausing: ", "resumed: resumed after 0s paused: the pause was cancelled")
}

// A killed thread's summary says which step and role ran and who killed
// it: the command a client names as its caller, or nobody.
func TestAKilledThreadsSummaryNamesItsStepAndWhoKilledIt(t *testing.T) {
	t.Parallel()
	var waiting atomic.Int32
	f := newFixture(t, 0, map[string]goFlow{"linear": {roles: []string{"a", "wait"}, release: make(chan struct{}), waiting: &waiting}})
	for i, tc := range []struct {
		caller *Caller
		want   string
	}{
		{CommandCaller("uncaged-workflow thread kill"), fmt.Sprintf("thread aborted: killed during step 2 (role wait) by `uncaged-workflow thread kill` (pid %d)", os.Getpid())},
		{nil, "thread aborted: killed during step 2 (role wait)"},
	} {
		id, err := f.client.Run(RunRequest{Workflow: "linear"})
		if err != nil {
			t.Fatal(err)
		}
		f.waitFor("the second role to run", func() bool { return waiting.Load() == int32(i+1) })
		c, err := Dial(f.l)
		if err != nil {
			t.Fatal(err)
		}
		c.SetCaller(func() *Caller { return tc.caller })
		if err := c.Kill(id); err != nil {
			t.Fatal(err)
		}
		c.Close()
		end, _ := threads.HeadEnd(f.host.exec.CAS, f.finished(id).Head)
		if end == nil || end.ReturnCode() != threads.ReturnCodeKilled || end.Summary() != tc.want {
			t.Fatalf("killed thread's end = %+v, want summary %q", end, tc.want)
		}
	}
}

// head is thread id's head now.
func (f *fixture) head(id string) string {
	f.t.Helper()
	rec, err := threads.Resolve(f.l, id)
	if err != nil {
		f.t.Fatal(err)
	}
	return rec.Head
}
