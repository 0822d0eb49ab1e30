package host

import (
	"errors"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/uncaged/workflow/engine/threads"
)

// A running or paused thread is never removed: the removal is refused with
// its status and the way on, and the thread goes on. With force it is
// killed, waited for, and removed; a resume then finds nothing to start.
func TestRemoveRefusesALiveThreadAndForceKillsItFirst(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	var waiting atomic.Int32
	f := newFixture(t, 0, map[string]goFlow{"linear": {roles: []string{"a", "wait", "b"}, release: release, waiting: &waiting}})
	id, err := f.client.Run(RunRequest{Workflow: "linear"})
	if err != nil {
		t.Fatal(err)
	}
	f.waitFor("the second step to begin", func() bool { return waiting.Load() == 1 })
	rec, err := threads.Resolve(f.l, id)
	if err != nil {
		t.Fatal(err)
	}
	for _, status := range []threads.Status{threads.StatusRunning, threads.StatusPausing, threads.StatusPaused} {
		switch status {
		case threads.StatusPausing:
			if err := f.client.Pause(id); err != nil {
				t.Fatal(err)
			}
		case threads.StatusPaused:
			close(release)
			f.waitFor("the thread to be held", func() bool {
				list, _ := f.client.List()
				return len(list) == 1 && list[0].Status == threads.StatusPaused
			})
		}
		err := RemoveLines(f.l, rec, false)
		if err == nil || !strings.Contains(err.Error(), "is "+string(status)) || !strings.Contains(err.Error(), "--force") {
			t.Fatalf("removing a %s thread = %v", status, err)
		}
		if _, err := threads.Resolve(f.l, id); err != nil {
			t.Fatalf("a refused removal took the %s thread's line: %v", status, err)
		}
		if list, _ := f.client.List(); len(list) != 1 || list[0].Status != status {
			t.Fatalf("after a refused removal the host lists %+v", list)
		}
	}
	if err := RemoveLines(f.l, rec, true); err != nil {
		t.Fatal(err)
	}
	if r, err := threads.Resolve(f.l, id); !errors.Is(err, threads.ErrNotFound) {
		t.Fatalf("after a forced removal the thread is still there: %+v, %v", r, err)
	}
	if list, _ := f.client.List(); len(list) != 0 {
		t.Fatalf("after a forced removal the host still runs %+v", list)
	}
	if err := f.client.Resume(id); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Fatalf("resuming a removed thread = %v", err)
	}
}

// A resume that is starting an interrupted thread when a removal arrives
// is waited for; the removal then finds the thread running and refuses.
// Checking first and removing after would take the lines of a thread that
// runs.
func TestARemovalArrivingWhileAResumeStartsTheThreadRefuses(t *testing.T) {
	release := make(chan struct{})
	var starts atomic.Int32
	f := newFixture(t, 0, map[string]goFlow{"linear": {roles: []string{"a", "wait", "b"}, release: release, starts: &starts}})
	id, _ := f.client.Run(RunRequest{Workflow: "linear"})
	f.waitFor("first step", func() bool {
		r, _ := threads.Resolve(f.l, id)
		return r.Head != r.Start
	})
	f.stopHost()
	f.startHost(0)
	rec, err := threads.Resolve(f.l, id)
	if err != nil {
		t.Fatal(err)
	}
	// Serial: sets the package-level hook.
	waits := make(chan struct{}, 1)
	testHookRemoveWaits = func() { waits <- struct{}{} }
	defer func() { testHookRemoveWaits = nil }()
	removed := make(chan error, 1)
	var nested atomic.Bool
	f.onLoad = func() {
		if nested.Swap(true) {
			return
		}
		// The resume has found the thread idle and loads its workflow:
		// the removal comes now, and either waits or returns.
		go func() { removed <- f.host.Remove(id, RemoveRequest{BundleHash: rec.BundleHash}) }()
		select {
		case <-waits:
		case err := <-removed:
			removed <- err
		}
	}
	if err := f.host.Resume(id, ResumeRequest{}); err != nil {
		t.Fatal(err)
	}
	if err := <-removed; !errors.Is(err, ErrLive) {
		t.Fatalf("a removal racing the resume = %v; want a refusal", err)
	}
	if _, err := threads.Resolve(f.l, id); err != nil {
		t.Fatalf("the resumed thread lost its line: %v", err)
	}
	close(release)
	if got := f.chainRoles(f.finished(id).Head); got != "a,wait,b,__end__" {
		t.Fatalf("resumed chain = %s", got)
	}
}

// Without a host, an interrupted thread is removed under the root's host
// lock, a running marker left by a host that died notwithstanding (one
// the original engine's worker runs: TestOriginalsRunningThread).
func TestRemoveWithoutAHost(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 0, map[string]goFlow{"linear": {roles: []string{"a", "wait"}, release: make(chan struct{})}})
	id, _ := f.client.Run(RunRequest{Workflow: "linear"})
	f.waitFor("first step", func() bool {
		r, _ := threads.Resolve(f.l, id)
		return r.Head != r.Start
	})
	f.stopHost()
	rec, _ := threads.Resolve(f.l, id)
	if err := os.WriteFile(f.l.RunningMarker(rec.BundleHash, id), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := RemoveLines(f.l, rec, false); err != nil {
		t.Fatal(err)
	}
	if _, err := threads.Resolve(f.l, id); !errors.Is(err, threads.ErrNotFound) {
		t.Fatalf("the interrupted thread is still there: %v", err)
	}
	if Running(f.l) {
		t.Fatal("the removal left the host lock held")
	}
}
