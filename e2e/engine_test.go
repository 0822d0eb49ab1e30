package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/uncaged/workflow/engine/atomicfile"
	"github.com/uncaged/workflow/shared/testkit"
)

// engineRoot is a storage root whose background engine host is stopped
// when the test ends.
func engineRoot(t *testing.T) string {
	t.Helper()
	root := filepath.Join(t.TempDir(), "root")
	t.Cleanup(func() { stopHost(t, root, syscall.SIGTERM) })
	return root
}

// hostPID reads the pid the engine host wrote into its lock file.
func hostPID(root string) int {
	b, err := os.ReadFile(filepath.Join(root, "engine.lock"))
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0 // being written, or written by no host
	}
	return pid
}

// stopHost signals root's engine host, if one runs, and waits until it
// has exited. Only a host that still holds its lock is signalled: the pid
// in the lock file of one that exited may be another process's by now.
// The host was started in the background by a command and is no child of
// this process: once it exits it stays a zombie until init reaps it,
// which can take seconds; that it exited is what matters here.
func stopHost(t *testing.T, root string, sig syscall.Signal) {
	t.Helper()
	pid := hostPID(root)
	if pid <= 0 || !atomicfile.Held(filepath.Join(root, "engine.lock")) {
		return
	}
	if err := syscall.Kill(pid, sig); errors.Is(err, syscall.ESRCH) {
		return
	} else if err != nil {
		t.Fatalf("signalling the engine host %d: %v", pid, err)
	}
	testkit.WaitUntil(t, "the engine host "+strconv.Itoa(pid)+" to exit", func() bool { return testkit.ProcessGone(pid) })
}

func add(t *testing.T, root, name, file string) {
	t.Helper()
	addPath(t, root, name, filepath.Join("testdata", file))
}

// addPath registers the bundle at path (relative to e2e/).
func addPath(t *testing.T, root, name, path string) {
	t.Helper()
	r := run(t, root, "workflow", "add", name, path)
	if r.code != 0 {
		t.Fatalf("workflow add %s: %+v", name, r)
	}
}

func start(t *testing.T, root string, args ...string) string {
	t.Helper()
	return startEnv(t, root, nil, args...)
}

// startEnv starts a thread with env added to the command's environment,
// which is the thread's (its bundle's and its roles').
func startEnv(t *testing.T, root string, env []string, args ...string) string {
	t.Helper()
	r := runEnv(t, env, "", root, append([]string{"run"}, args...)...)
	id := strings.TrimSpace(r.stdout)
	if r.code != 0 || len(id) != 26 {
		t.Fatalf("run %v: %+v", args, r)
	}
	return id
}

type shown struct {
	ThreadID string
	Head     string
	Start    string
	Source   string
	Status   string
	Steps    []struct {
		Role        string
		Content     string
		ChildThread *string
	}
	Result *struct {
		ReturnCode int
		Summary    string
	}
}

func show(t *testing.T, root, id string) shown {
	t.Helper()
	r := run(t, root, "thread", "show", id)
	var s shown
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &s) != nil {
		t.Fatalf("thread show %s: %+v", id, r)
	}
	return s
}

func roles(s shown) string {
	var out []string
	for _, st := range s.Steps {
		out = append(out, st.Role)
	}
	return strings.Join(out, ",")
}

// finished waits until thread id on root has ended and returns it; when it
// does not end, the failure says where it stands (status and steps so far).
func finished(t *testing.T, root, id string) shown {
	t.Helper()
	return finishedMeanwhile(t, root, id, nil)
}

// finishedMeanwhile is finished, calling meanwhile (when not nil) with
// each look at the thread before it ends.
func finishedMeanwhile(t *testing.T, root, id string, meanwhile func(shown)) shown {
	t.Helper()
	var s shown
	testkit.WaitFor(t, "thread "+id+" to finish", func() error {
		s = show(t, root, id)
		if s.Result != nil {
			return nil
		}
		if meanwhile != nil {
			meanwhile(s)
		}
		return fmt.Errorf("thread %s still %s, steps so far: %q", id, s.Status, roles(s))
	})
	return s
}

func TestLinearThreadRunsAndStreams(t *testing.T) {
	t.Parallel()
	root := engineRoot(t)
	add(t, root, "plan-code-review", "linear.esm.js")
	id := start(t, root, "plan-code-review", "--prompt", "build the thing")
	live := run(t, root, "live", id)
	if live.code != 0 {
		t.Fatalf("live: %+v", live)
	}
	for _, want := range []string{"▶ planner", "  meta: {\"plan\":\"1. write it\\n2. test it\",\"task\":\"build the thing\"}", "▶ coder", "▶ reviewer", "completed: returnCode=0 — completed: moderator returned END"} {
		if !strings.Contains(live.stdout, want) {
			t.Errorf("live output lacks %q:\n%s", want, live.stdout)
		}
	}
	s := finished(t, root, id)
	if roles(s) != "planner,coder,reviewer" || s.Status != "completed" || s.Source != "history" {
		t.Fatalf("show = %+v", s)
	}
	if r := run(t, root, "thread", "list", "-o", "table", "plan-code-review"); !strings.Contains(r.stdout, "\n"+id+"  plan-code-review  completed  ") {
		t.Fatalf("thread list = %+v", r)
	}
	if r := run(t, root, "live", "--latest"); r.code != 0 || !strings.Contains(r.stdout, "completed: returnCode=0") {
		t.Fatalf("live --latest = %+v", r)
	}
}

func TestReviewerSendsBackTwice(t *testing.T) {
	t.Parallel()
	root := engineRoot(t)
	// The runtime's own review-loop fixture, run here through the binary.
	addPath(t, root, "review-loop", filepath.Join("..", "engine", "jsrt", "testdata", "review_loop.esm.js"))
	id := start(t, root, "review-loop")
	s := finished(t, root, id)
	if roles(s) != "coder,reviewer,coder,reviewer,coder,reviewer" || s.Result.ReturnCode != 0 {
		t.Fatalf("show = %+v", s)
	}
}

func TestThrowingBundleFailsVisibly(t *testing.T) {
	t.Parallel()
	root := engineRoot(t)
	add(t, root, "explode", "throws.esm.js")
	id := start(t, root, "explode")
	s := finished(t, root, id)
	if s.Status != "failed" || s.Result.ReturnCode != 1 || !strings.Contains(s.Result.Summary, "compiler exploded") {
		t.Fatalf("show = %+v", s)
	}
	if roles(s) != "planner" {
		t.Fatalf("steps = %s", roles(s))
	}
}

func TestKillStopsASpinningRole(t *testing.T) {
	t.Parallel()
	root := engineRoot(t)
	add(t, root, "spin", "spin.esm.js")
	id := start(t, root, "spin")
	testkit.WaitUntil(t, "the thread to be running", func() bool {
		return strings.Contains(run(t, root, "thread", "ps").stdout, id)
	})
	began := time.Now()
	if r := run(t, root, "thread", "kill", id); r.code != 0 || r.stdout != "kill sent for thread "+id+"\n" {
		t.Fatalf("kill: %+v", r)
	}
	t.Logf("kill of a spinning role took %s", time.Since(began))
	s := finished(t, root, id)
	if s.Status != "killed" || s.Result.ReturnCode != 130 {
		t.Fatalf("show = %+v", s)
	}
	if r := run(t, root, "thread", "ps"); r.stdout != "(no running threads)\n" {
		t.Fatalf("ps after kill = %+v", r)
	}
}

func TestPauseHoldsAndResumeCompletes(t *testing.T) {
	t.Parallel()
	root := engineRoot(t)
	add(t, root, "slow", "slow.esm.js")
	id := start(t, root, "slow")
	testkit.WaitUntil(t, "the first step", func() bool { return len(show(t, root, id).Steps) >= 1 })
	// Paused at once: the thread's remaining steps are the only window, and
	// a loaded machine must not let it finish first.
	if r := run(t, root, "thread", "pause", id); r.code != 0 || r.stdout != "pause sent for thread "+id+"\n" {
		t.Fatalf("pause: %+v", r)
	}
	// A second thread of the same workflow in the same host is the clock:
	// once it has taken two steps, the step in flight at the pause has
	// landed; while it takes its last three, the paused thread must stay.
	// Held at its gate after its first step, it is also the running thread
	// ps lists and resume refuses.
	gate := filepath.Join(t.TempDir(), "gate")
	clock := startEnv(t, root, []string{"SLOW_GATE=" + gate}, "slow")
	testkit.WaitUntil(t, "the other thread's first step", func() bool { return len(show(t, root, clock).Steps) >= 1 })
	if r := run(t, root, "thread", "ps"); !strings.Contains(r.stdout, clock+"\t") || !strings.Contains(r.stdout, "\tslow\n") {
		t.Fatalf("ps while running: %+v", r)
	}
	if r := run(t, root, "thread", "resume", clock); r.code != 1 || !strings.Contains(r.stderr, "thread not paused") {
		t.Fatalf("resume of a running thread: %+v", r)
	}
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	testkit.WaitUntil(t, "two steps of another thread", func() bool { return len(show(t, root, clock).Steps) >= 2 })
	held := show(t, root, id)
	if c := finished(t, root, clock); c.Status != "completed" {
		t.Fatalf("the other thread: %+v", c)
	}
	if again := show(t, root, id); again.Head != held.Head || again.Status != "paused" {
		t.Fatalf("paused thread moved or status wrong: %+v then %+v", held, again)
	}
	if r := run(t, root, "thread", "pause", id); r.code != 1 || !strings.Contains(r.stderr, "thread already paused") {
		t.Fatalf("second pause: %+v", r)
	}
	if r := run(t, root, "thread", "resume", id); r.code != 0 {
		t.Fatalf("resume: %+v", r)
	}
	s := finished(t, root, id)
	if roles(s) != "one,two,three,four,five" {
		t.Fatalf("steps = %s", roles(s))
	}
	if r := run(t, root, "thread", "resume", id); r.code != 1 || !strings.Contains(r.stderr, "thread not running") {
		t.Fatalf("resume of a finished thread: %+v", r)
	}
}

func TestHostKilledMidThreadResumesWithoutRepeating(t *testing.T) {
	t.Parallel()
	root := engineRoot(t)
	add(t, root, "slow", "slow.esm.js")
	id := start(t, root, "slow")
	testkit.WaitUntil(t, "two steps", func() bool { return len(show(t, root, id).Steps) >= 2 })
	stopHost(t, root, syscall.SIGKILL)
	s := show(t, root, id)
	if s.Status != "interrupted" || s.Result != nil {
		t.Fatalf("after kill -9 of the host: %+v", s)
	}
	done := len(s.Steps)
	if r := run(t, root, "thread", "resume", id); r.code != 0 {
		t.Fatalf("resume: %+v", r)
	}
	s = finished(t, root, id)
	if roles(s) != "one,two,three,four,five" || s.Result.ReturnCode != 0 {
		t.Fatalf("resumed thread = %s (had %d steps before)", roles(s), done)
	}
}

func TestForkFromRole(t *testing.T) {
	t.Parallel()
	root := engineRoot(t)
	add(t, root, "plan-code-review", "linear.esm.js")
	src := finished(t, root, start(t, root, "plan-code-review"))
	r := run(t, root, "thread", "fork", src.ThreadID, "--from-role", "coder")
	forkID := strings.TrimSpace(r.stdout)
	if r.code != 0 || len(forkID) != 26 {
		t.Fatalf("fork: %+v", r)
	}
	fork := finished(t, root, forkID)
	if fork.Start != src.Start || roles(fork) != "planner,coder,reviewer" {
		t.Fatalf("fork = %+v", fork)
	}
	if r := run(t, root, "thread", "fork", src.ThreadID, "--from-role", "tester"); r.code != 1 || !strings.Contains(r.stderr, "role not found in thread: tester (available: planner, coder, reviewer)") {
		t.Fatalf("fork unknown role: %+v", r)
	}
	// --step forks after that role step: the first is kept, the rest run again.
	r = run(t, root, "thread", "fork", src.ThreadID, "--step", "1")
	atStep := finished(t, root, strings.TrimSpace(r.stdout))
	if r.code != 0 || roles(atStep) != "planner,coder,reviewer" {
		t.Fatalf("fork --step 1: %+v\n%+v", r, atStep)
	}
	if r := run(t, root, "thread", "fork", src.ThreadID, "--step", "9"); r.code != 1 || !strings.Contains(r.stderr, "step 9 not in thread: it has steps 1 to 3") {
		t.Fatalf("fork --step 9: %+v", r)
	}
}

func TestChildWorkflowAndDepthLimit(t *testing.T) {
	t.Parallel()
	root := engineRoot(t)
	add(t, root, "leaf", "leaf.esm.js")
	add(t, root, "parent", "parent.esm.js")
	add(t, root, "recurse", "recurse.esm.js")
	p := finished(t, root, start(t, root, "parent", "--prompt", "do it"))
	if roles(p) != "plan,delegate,wrap" || p.Steps[1].ChildThread == nil {
		t.Fatalf("parent = %+v", p)
	}
	deep := finished(t, root, start(t, root, "recurse"))
	if deep.Status != "failed" || !strings.Contains(deep.Result.Summary, "workflow adapter depth limit exceeded (max 3)") {
		t.Fatalf("recurse = %+v", deep)
	}
}

func TestUnsupportedImportIsRefusedAtAdd(t *testing.T) {
	t.Parallel()
	root := engineRoot(t)
	r := run(t, root, "workflow", "add", "bad", filepath.Join("testdata", "bad-import.esm.js"))
	if r.code != 1 || !strings.Contains(r.stderr, `"lodash"`) {
		t.Fatalf("add: %+v", r)
	}
	if r := run(t, root, "workflow", "list"); r.stdout != "(no workflows registered)\n" {
		t.Fatalf("a refused bundle was registered: %+v", r)
	}
}
