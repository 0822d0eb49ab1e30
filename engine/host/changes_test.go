package host

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/uncaged/workflow/engine/node"
	"github.com/uncaged/workflow/engine/storage"
	"github.com/uncaged/workflow/engine/threads"
	"github.com/uncaged/workflow/shared/testkit"
)

// observer records the changes one subscriber receives, each checked as
// it arrives against what a reader sees at that moment: a change is
// published only once what it tells of is visible.
type observer struct {
	f *fixture
	// checks says whether changes are checked as they arrive: in the
	// process only, where they arrive as they are published; over the
	// socket they may arrive once the test has moved the thread on.
	checks bool
	mu     sync.Mutex
	got    []Change
	errs   []string
	closed chan struct{} // closed when the subscription's source ends
}

func newObserver(f *fixture, checks bool) *observer {
	return &observer{f: f, checks: checks, closed: make(chan struct{})}
}

// follow records the changes of an in-process subscription until it is
// closed.
func (o *observer) follow(sub *Subscription, stop <-chan struct{}) {
	defer close(o.closed)
	for {
		select {
		case <-stop:
			return
		case <-sub.Ready():
		}
		changes, lost := sub.Take()
		if lost {
			o.fail("changes lost")
		}
		for _, c := range changes {
			o.see(c)
		}
	}
}

// stream records the changes a change stream delivers until it ends.
func (o *observer) stream(s *ChangeStream) {
	defer close(o.closed)
	for {
		c, err := s.Next()
		if err != nil {
			return
		}
		o.see(c)
	}
}

func (o *observer) fail(format string, args ...any) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.errs = append(o.errs, fmt.Sprintf(format, args...))
}

// see checks c against the files and the host's list, then records it.
func (o *observer) see(c Change) {
	switch {
	case c.At == 0:
		o.fail("change without a time: %+v", c)
	case !o.checks:
	case c.Kind == ChangeStep:
		o.seeStep(c)
	default:
		o.seeOther(c)
	}
	o.mu.Lock()
	o.got = append(o.got, c)
	o.mu.Unlock()
}

// seeStep checks that a step is on the chain the thread's index names, or
// for the __end__ node (which the history will name), that it is stored.
func (o *observer) seeStep(c Change) {
	f := o.f
	if n, err := f.host.exec.CAS.GetNode(c.Head); err == nil {
		if st, ok := n.(node.State); ok && st.Payload.Role == node.RoleEnd {
			return
		}
	}
	rec, err := threads.Resolve(f.l, c.ThreadID)
	frames, _ := threads.Walk(f.host.exec.CAS, rec.Head)
	if err != nil || !slices.ContainsFunc(frames, func(fr threads.Frame) bool { return fr.Hash == c.Head }) {
		o.fail("step %s of %s: not on the chain of the thread's head (%v)", c.Head, c.ThreadID, err)
	}
}

// seeOther checks the other kinds of change against the host's list and
// the files.
func (o *observer) seeOther(c Change) {
	f := o.f
	listed := func() map[string]RunningThread { return ByThread(f.host.List()) }
	switch c.Kind {
	case ChangeStarted:
		if _, ok := listed()[c.ThreadID]; !ok {
			o.fail("started %s: not listed", c.ThreadID)
		}
	case ChangeStatus:
		// Pausing and paused hold until the test moves the thread on;
		// running may be over (the thread finished) by now.
		if got := listed()[c.ThreadID].Status; c.Status != threads.StatusRunning && got != c.Status {
			o.fail("status %s of %s: listed as %q", c.Status, c.ThreadID, got)
		}
	case ChangeLog:
		b, err := os.ReadFile(f.l.InfoLog(c.BundleHash, c.ThreadID))
		if err != nil || len(b) == 0 || b[len(b)-1] != '\n' {
			o.fail("log line of %s: the log holds %q (%v)", c.ThreadID, b, err)
		}
	case ChangeEnded:
		if _, ok := listed()[c.ThreadID]; ok {
			o.fail("ended %s: still listed", c.ThreadID)
		}
	case ChangeRemoved:
		if _, err := threads.Resolve(f.l, c.ThreadID); !errors.Is(err, threads.ErrNotFound) {
			o.fail("removed %s: it resolves (%v)", c.ThreadID, err)
		}
	default:
		o.fail("unexpected change %+v", c)
	}
}

// waitFor waits until a change of thread id of kind (and status, when
// given) has been recorded.
func (o *observer) waitFor(id string, kind ChangeKind, status threads.Status) {
	o.f.t.Helper()
	testkit.WaitUntil(o.f.t, fmt.Sprintf("a %s %s change of %s", kind, status, id), func() bool {
		o.mu.Lock()
		defer o.mu.Unlock()
		return slices.ContainsFunc(o.got, func(c Change) bool {
			return c.ThreadID == id && c.Kind == kind && (status == "" || c.Status == status)
		})
	})
}

// story is what changed for thread id, debug-log lines left out, as
// "kind" or "kind:status" or "step:<role>".
func (o *observer) story(id string) (story []string, logs int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, c := range o.got {
		switch {
		case c.ThreadID != id:
		case c.Kind == ChangeLog:
			logs++
		case c.Kind == ChangeStep:
			role := "?"
			if n, err := o.f.host.exec.CAS.GetNode(c.Head); err == nil {
				if st, ok := n.(node.State); ok {
					role = st.Payload.Role
				}
			}
			story = append(story, "step:"+role)
		case c.Status != "":
			story = append(story, string(c.Kind)+":"+string(c.Status))
		default:
			story = append(story, string(c.Kind))
		}
	}
	return story, logs
}

func (o *observer) check(t *testing.T, what string) {
	t.Helper()
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, e := range o.errs {
		t.Errorf("%s: %s", what, e)
	}
}

// Every kind of change is told, in the process and over the socket alike,
// in the order it happened, and only once readers can see it: a thread
// started, its steps, its pausing, pause and resume, its debug-log lines,
// its end; a kill of an interrupted thread; a removal. A stream ends when
// the host stops.
func TestEveryChangeIsToldWhereverItIsSubscribedTo(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	var waiting atomic.Int32
	f := newFixture(t, 0, map[string]goFlow{
		"linear":  {roles: []string{"a", "wait", "b"}, release: release, waiting: &waiting},
		"blocked": {roles: []string{"a", "wait"}, release: make(chan struct{})}, // never released
	})
	follow := func() (local, remote *observer, stop func()) {
		local, remote = newObserver(f, true), newObserver(f, false)
		sub := f.host.Subscribe()
		quit := make(chan struct{})
		go local.follow(sub, quit)
		stream, err := f.client.Changes(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		go remote.stream(stream)
		return local, remote, func() {
			close(quit)
			<-local.closed
			sub.Close()
			stream.Close()
			<-remote.closed
		}
	}

	local, remote, stop := follow()
	id, err := f.client.Run(RunRequest{Workflow: "linear"})
	if err != nil {
		t.Fatal(err)
	}
	f.waitFor("the second step to begin", func() bool { return waiting.Load() == 1 })
	if err := f.client.Pause(id); err != nil {
		t.Fatal(err)
	}
	local.waitFor(id, ChangeStatus, threads.StatusPausing)
	close(release)
	local.waitFor(id, ChangeStatus, threads.StatusPaused)
	if err := f.client.Resume(id); err != nil {
		t.Fatal(err)
	}
	local.waitFor(id, ChangeEnded, "")
	remote.waitFor(id, ChangeEnded, "")

	blocked, err := f.client.Run(RunRequest{Workflow: "blocked"})
	if err != nil {
		t.Fatal(err)
	}
	local.waitFor(blocked, ChangeStep, "")
	f.stopHost()
	select {
	case <-remote.closed:
	case <-time.After(testkit.WaitBound):
		t.Fatal("the change stream did not end when the host stopped")
	}
	stop()
	for _, o := range []*observer{local, remote} {
		o.check(t, "before the restart")
	}
	want := []string{"started:running", "step:a", "status:pausing", "step:wait", "status:paused", "status:running", "step:b", "step:__end__", "ended"}
	for what, o := range map[string]*observer{"in the process": local, "over the socket": remote} {
		story, logs := o.story(id)
		if !slices.Equal(story, want) || logs == 0 {
			t.Errorf("%s: %v and %d log lines, want %v and some", what, story, logs, want)
		}
	}
	// The same changes in the same order, up to the end of the stream,
	// which comes before the host stops its threads (the process's
	// subscriber hears of those too).
	if len(remote.got) > len(local.got) || !slices.EqualFunc(local.got[:len(remote.got)], remote.got, func(a, b Change) bool {
		a.At, b.At = 0, 0
		return a == b
	}) {
		t.Errorf("the socket's changes are not the process's:\n%+v\n%+v", remote.got, local.got)
	}
	if story, _ := local.story(blocked); !slices.Equal(story, []string{"started:running", "step:a", "ended"}) {
		t.Errorf("a thread the host left unfinished as it stopped: %v", story)
	}

	// On a new host: the interrupted thread killed, the finished one
	// removed.
	f.startHost(0)
	local, remote, stop = follow()
	defer stop()
	if err := f.client.Kill(blocked); err != nil {
		t.Fatal(err)
	}
	rec, err := threads.Resolve(f.l, id)
	if err != nil {
		t.Fatal(err)
	}
	if err := RemoveLines(f.l, rec, false); err != nil {
		t.Fatal(err)
	}
	for _, o := range []*observer{local, remote} {
		o.waitFor(id, ChangeRemoved, "")
		o.check(t, "after the restart")
		if story, _ := o.story(blocked); !slices.Equal(story, []string{"step:__end__", "ended"}) {
			t.Errorf("kill of an interrupted thread: %v", story)
		}
	}
}

// A client of a host older than the change stream is told so, and can
// poll instead.
func TestAHostWithoutTheChangeStreamSaysSo(t *testing.T) {
	t.Parallel()
	l := storage.Layout{Root: privateDir(t)}
	ln, err := listenOwnerOnly(SocketPath(l))
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux() // the control API as it was before the stream
	mux.HandleFunc("GET /v1/status", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, Status{PID: os.Getpid(), Root: l.Root})
	})
	mux.HandleFunc("GET /v1/threads", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, []RunningThread{})
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	c, err := Dial(l)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Changes(context.Background()); !errors.Is(err, ErrNoChangeStream) {
		t.Fatalf("changes from an old host: %v, want ErrNoChangeStream", err)
	}
	if list, err := c.List(); err != nil || len(list) != 0 {
		t.Fatalf("the old host's list: %v %v", list, err)
	}
}

// A subscriber that falls behind is told it lost changes, and receives
// those that follow.
func TestASubscriberTooFarBehindIsToldItLostChanges(t *testing.T) {
	t.Parallel()
	h := &Host{}
	sub := h.Subscribe()
	defer sub.Close()
	for i := range maxQueued + 3 {
		h.publish(Change{Kind: ChangeLog, ThreadID: fmt.Sprint(i)})
	}
	select {
	case <-sub.Ready():
	default:
		t.Fatal("not ready with changes waiting")
	}
	got, lost := sub.Take()
	if !lost || len(got) != 2 || got[0].ThreadID != fmt.Sprint(maxQueued+1) {
		t.Fatalf("after %d changes: lost %v, %d kept (%+v)", maxQueued+3, lost, len(got), got)
	}
	h.publish(Change{Kind: ChangeStep, ThreadID: "next"})
	if got, lost := sub.Take(); lost || len(got) != 1 || got[0].ThreadID != "next" {
		t.Fatalf("the change after: lost %v, %+v", lost, got)
	}
	sub.Close()
	h.publish(Change{Kind: ChangeStep, ThreadID: "after close"})
	if got, _ := sub.Take(); len(got) != 0 {
		t.Fatalf("a closed subscription received %+v", got)
	}
	if len(h.changes.subs) != 0 {
		t.Fatal("a closed subscription is still listed")
	}
}
