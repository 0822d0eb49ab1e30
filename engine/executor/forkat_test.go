package executor

import (
	"context"
	"strings"
	"testing"

	"github.com/uncaged/workflow/engine/threads"
)

// A role that ran twice is forked from its second run: the fork replays
// both of its runs, where PrepareFork(role) stops at the first.
func TestForkAtStep(t *testing.T) {
	t.Parallel()
	e := newExec(t)
	src := runToEnd(t, e, "SRC", "planner", "writer", "writer", "reviewer")

	f, err := e.PrepareForkAt(src, "AT3", 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Resume.Steps) != 3 || f.Resume.Steps[2].Role != "writer" {
		t.Fatalf("fork at step 3 replays %+v", f.Resume.Steps)
	}
	res, err := e.Run(context.Background(), linear{roles: []string{"planner", "writer", "writer", "reviewer"}}, f, Env{})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(roles(t, e, res.RootHash), ","); got != "planner,writer,writer,__fork__,reviewer,__end__" {
		t.Fatalf("fork chain = %s", got)
	}
	byRole, err := e.PrepareFork(src, "ROLE", "writer")
	if err != nil || len(byRole.Resume.Steps) != 2 {
		t.Fatalf("fork from the role writer replays %+v (%v), want its first run", byRole.Resume.Steps, err)
	}

	// The last step: nothing is re-run, the fork goes on from there.
	last, err := e.PrepareForkAt(src, "AT4", 4)
	if err != nil || len(last.Resume.Steps) != 4 {
		t.Fatalf("fork at the last step: %+v %v", last.Resume.Steps, err)
	}
}

func TestForkAtStepRefusesStepsNotInTheThread(t *testing.T) {
	t.Parallel()
	e := newExec(t)
	src := runToEnd(t, e, "SRC", "planner", "coder")
	before, err := threads.List(e.Layout)
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range []int{0, -1, 3, 1 << 30} {
		if _, err := e.PrepareForkAt(src, "BAD", step); err == nil || !strings.Contains(err.Error(), "it has steps 1 to 2") {
			t.Errorf("step %d: %v", step, err)
		}
	}
	after, err := threads.List(e.Layout)
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != len(before) {
		t.Errorf("a refused fork listed a thread: %d threads, was %d", len(after), len(before))
	}
	begin(t, e, "EMPTY")
	empty, _ := threads.Resolve(e.Layout, "EMPTY")
	if _, err := e.PrepareForkAt(empty, "F", 1); err == nil || err.Error() != "thread has no completed role steps to fork from" {
		t.Errorf("fork of a thread without steps: %v", err)
	}
}
