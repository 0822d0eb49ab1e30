package api

import (
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"

	"github.com/uncaged/workflow/engine/cas"
	"github.com/uncaged/workflow/engine/host"
	"github.com/uncaged/workflow/engine/threads"
	"github.com/uncaged/workflow/engine/workflow"
	"github.com/uncaged/workflow/engine/workflow/workflowtest"
	"github.com/uncaged/workflow/shared/testkit"
)

// racingEngine is an Engine that makes something happen to a thread at
// the next question of which threads run: just before it is answered
// (the world moves between a view's reads, whichever it made first) or
// just after (between the answer and what the view reads next). The
// event happens once.
type racingEngine struct {
	Engine
	mu           sync.Mutex
	event        func()
	beforeAnswer bool
}

func (r *racingEngine) arm(event func(), beforeAnswer bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.event, r.beforeAnswer = event, beforeAnswer
}

func (r *racingEngine) Running() ([]host.RunningThread, error) {
	r.mu.Lock()
	event, before := r.event, r.beforeAnswer
	r.event = nil
	r.mu.Unlock()
	if event != nil && before {
		event()
	}
	out, err := r.Engine.Running()
	if event != nil && !before {
		event()
	}
	return out, err
}

// A view's status is one its thread had while the view's records were
// read: never a pause that names a step the records lack, never
// "interrupted" for a thread that ends, or begins, while the view is
// made. Every view of a status, for a pause taking effect, a thread
// finishing, a thread killed and a thread beginning, each happening just
// before or just after the view asks the engine what runs.
func TestAViewsStatusIsOneItsThreadHadWhenItsRecordsWereRead(t *testing.T) {
	t.Parallel()
	type view struct {
		status  threads.Status
		steps   int
		ended   bool
		records bool // the view shows the thread's records
	}
	// A view is read once the armed event may have happened: its thread's
	// id is asked for when the view needs it (a thread that begins has no
	// id before, and its view is of a list).
	views := []struct {
		name string
		read func(f *fixture, id func() string) view
	}{
		{"thread", func(f *fixture, id func() string) view {
			d := f.detail(id())
			return view{status: threads.Status(d.status()), steps: len(d.roles()), ended: d.result() != nil, records: true}
		}},
		{"list", func(f *fixture, id func() string) view { return view{status: f.listedAfter("", id).Status} }},
		{"list by status", func(f *fixture, id func() string) view {
			return view{status: f.listedAfter("?status=running,pausing,paused,completed,killed,failed,interrupted", id).Status}
		}},
	}
	// An event readies a thread of the stepped workflow (flow) and returns
	// the thread the view is of, the event, and the check of the view.
	type setup struct {
		id    string
		event func()
		check func(view) error
	}
	allowed := func(v view, statuses ...threads.Status) error {
		if !slices.Contains(statuses, v.status) {
			return fmt.Errorf("status %s, want one of %v", v.status, statuses)
		}
		return nil
	}
	events := []struct {
		name      string
		listsOnly bool // the thread has no id before the event: only lists show it
		ready     func(f *fixture, flow workflowtest.Stepped) *setup
	}{
		{name: "a pause takes effect", ready: func(f *fixture, flow workflowtest.Stepped) *setup {
			id := f.runTo(flow, 1)
			f.want(http.MethodPost, "/api/threads/"+id+"/pause", "", http.StatusOK, nil)
			return &setup{id, func() {
				flow.Next <- struct{}{}
				f.waitEngineSays(id, threads.StatusPaused)
			}, func(v view) error {
				if v.records && v.status == threads.StatusPaused && v.steps != 2 {
					return fmt.Errorf("paused with %d steps shown: the pause took effect after step 2", v.steps)
				}
				return allowed(v, threads.StatusPausing, threads.StatusPaused)
			}}
		}},
		{name: "the thread finishes", ready: func(f *fixture, flow workflowtest.Stepped) *setup {
			id := f.runTo(flow, len(flow.Roles))
			return &setup{id, func() {
				flow.Next <- struct{}{}
				f.waitEngineSays(id, "")
			}, func(v view) error {
				if v.records && v.ended != (v.status == threads.StatusCompleted) {
					return fmt.Errorf("status %s with a result shown: %v", v.status, v.ended)
				}
				return allowed(v, threads.StatusRunning, threads.StatusCompleted)
			}}
		}},
		{name: "the thread is killed", ready: func(f *fixture, flow workflowtest.Stepped) *setup {
			id := f.runTo(flow, 1)
			return &setup{id, func() {
				if err := f.eng.Kill(id); err != nil {
					f.t.Fatal(err)
				}
				f.waitEngineSays(id, "")
			}, func(v view) error {
				if v.records && v.ended != (v.status == threads.StatusKilled) {
					return fmt.Errorf("status %s with a result shown: %v", v.status, v.ended)
				}
				return allowed(v, threads.StatusRunning, threads.StatusKilled)
			}}
		}},
		{name: "a thread begins", listsOnly: true, ready: func(f *fixture, flow workflowtest.Stepped) *setup {
			s := &setup{check: func(v view) error { return allowed(v, threads.StatusRunning) }}
			s.event = func() {
				var err error
				if s.id, err = f.eng.Run("stepped", "begins"); err != nil {
					f.t.Fatal(err)
				}
				f.waitEngineSays(s.id, threads.StatusRunning)
			}
			return s
		}},
	}
	for _, ev := range events {
		for _, v := range views {
			if ev.listsOnly && v.name == "thread" {
				continue
			}
			for _, beforeAnswer := range []bool{true, false} {
				name := fmt.Sprintf("%s/%s/before answer=%v", ev.name, v.name, beforeAnswer)
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					race := &racingEngine{}
					f := newFixture(t, func(o *Options) { race.Engine = o.Engine; o.Engine = race })
					flow := workflowtest.Stepped{Roles: []string{"one", "two", "three"}, Next: make(chan struct{})}
					f.register("stepped", "slow.esm.js")
					f.startHostLoading(func(string) (workflow.Workflow, error) { return flow, nil })
					s := ev.ready(f, flow)
					race.arm(s.event, beforeAnswer)
					got := v.read(f, func() string { return s.id })
					if err := s.check(got); err != nil {
						t.Fatalf("%s: %v (%+v)", name, err, got)
					}
				})
			}
		}
	}
}

// listedAfter is thread id() as GET /api/threads lists it, the id asked
// for once the list is read.
func (f *fixture) listedAfter(q string, id func() string) ThreadSummary {
	f.t.Helper()
	var l ThreadList
	f.want(http.MethodGet, "/api/threads"+q, "", http.StatusOK, &l)
	for _, th := range l.Threads {
		if th.ThreadID == id() {
			return th
		}
	}
	f.t.Fatalf("GET /api/threads%s does not list %s: %+v", q, id(), l)
	return ThreadSummary{}
}

// runTo starts a thread of flow and lets it write steps steps; the next
// step (or, after the last, the end) waits for a token on flow.Next.
func (f *fixture) runTo(flow workflowtest.Stepped, steps int) string {
	f.t.Helper()
	id, err := f.eng.Run("stepped", "steps")
	if err != nil {
		f.t.Fatal(err)
	}
	for range steps {
		flow.Next <- struct{}{}
	}
	testkit.WaitUntil(f.t, fmt.Sprintf("thread %s to write %d steps", id, steps), func() bool {
		rec, err := threads.Resolve(f.l, id)
		if err != nil {
			return false
		}
		frames, err := threads.Walk(cas.Open(f.l.CASDir()), rec.Head)
		return err == nil && len(frames) == steps
	})
	return id
}

// waitEngineSays waits until the engine host says thread id has status
// ("": that it no longer runs it).
func (f *fixture) waitEngineSays(id string, status threads.Status) {
	f.t.Helper()
	testkit.WaitUntil(f.t, fmt.Sprintf("the engine to say %s is %q", id, status), func() bool {
		list, err := f.eng.Running()
		if err != nil {
			return false
		}
		for _, r := range list {
			if r.ThreadID == id {
				return r.Status == status
			}
		}
		return status == ""
	})
}
