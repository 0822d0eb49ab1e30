package host

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/uncaged/workflow/engine/canonyaml"
	"github.com/uncaged/workflow/engine/registry"
	"github.com/uncaged/workflow/engine/storage"
	"github.com/uncaged/workflow/engine/threadenv"
	"github.com/uncaged/workflow/engine/threads"
	"github.com/uncaged/workflow/engine/workflow"
	"github.com/uncaged/workflow/shared/testkit"
)

// goFlow is a workflow written in Go: its roles run in order; "wait" roles
// block until released (or the run is cancelled); a "child:<name>" role runs
// a child workflow.
type goFlow struct {
	roles   []string
	release chan struct{}
	starts  *atomic.Int32         // counts runs started, when set
	waiting *atomic.Int32         // counts turns of "wait" begun, when set
	envs    chan<- *threadenv.Env // an "env" role sends the thread's environment here
}

func (f goFlow) Descriptor() workflow.Descriptor { return workflow.Descriptor{} }

func (f goFlow) Start(ctx context.Context, tc workflow.ThreadContext, h workflow.Host) (workflow.Run, error) {
	if f.starts != nil {
		f.starts.Add(1)
	}
	return &goRun{f: f, h: h, i: len(tc.Steps), prompt: tc.Start.Content}, nil
}

type goRun struct {
	f      goFlow
	h      workflow.Host
	i      int
	prompt string
}

func (r *goRun) Next(ctx context.Context) (*workflow.Output, *workflow.Completion, error) {
	if r.i >= len(r.f.roles) {
		return nil, &workflow.Completion{Summary: "done"}, nil
	}
	role := r.f.roles[r.i]
	if a, ok := r.h.(workflow.RoleAnnouncer); ok {
		a.RoleBegins(role)
	}
	out := &workflow.Output{Role: role, Meta: canonyaml.Map{}}
	switch {
	case role == "wait":
		if r.f.waiting != nil {
			r.f.waiting.Add(1)
		}
		select {
		case <-r.f.release:
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
	case role == "env":
		r.f.envs <- threadenv.Of(r.h)
	case strings.HasPrefix(role, "child:"):
		res, err := r.h.RunChild(ctx, strings.TrimPrefix(role, "child:"), r.prompt)
		if err != nil {
			return nil, nil, err
		}
		out.ChildThread = res.RootHash
	}
	h, err := r.h.CAS().Put(fmt.Sprintf("%s #%d", role, r.i))
	if err != nil {
		return nil, nil, err
	}
	out.ContentHash = h
	r.i++
	return out, nil, nil
}

func (r *goRun) Close() error { return nil }

type fixture struct {
	t      *testing.T
	l      storage.Layout
	flows  map[string]goFlow // by bundle hash
	onLoad func()            // called as the host loads a workflow, when set
	// load, when set, loads every workflow instead of flows.
	load   func(hash string) (workflow.Workflow, error)
	host   *Host
	client *Client
	cancel context.CancelFunc
	done   chan error
}

func newFixture(t *testing.T, maxThreads int, flows map[string]goFlow) *fixture {
	f := &fixture{t: t, l: storage.Layout{Root: privateDir(t)}, flows: map[string]goFlow{}}
	err := registry.Update(f.l.RegistryFile(), func(r *registry.Registry) error {
		for name, flow := range flows {
			hash := strings.ToUpper(strings.ReplaceAll(name, "-", "") + "0000000000000")[:13]
			f.flows[hash] = flow
			r.Register(name, hash, 1)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	f.startHost(maxThreads)
	return f
}

// privateDir is a new directory only its owner may use, as a root the
// CLI makes is, whatever the umask (t.TempDir's follows it).
func privateDir(t *testing.T) string {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	return dir
}

func (f *fixture) startHost(maxThreads int) {
	h, err := Open(Options{Layout: f.l, MaxThreads: maxThreads, Load: func(hash string) (workflow.Workflow, error) {
		if f.onLoad != nil {
			f.onLoad()
		}
		if f.load != nil {
			return f.load(hash)
		}
		flow, ok := f.flows[hash]
		if !ok {
			return nil, fmt.Errorf("no bundle %s", hash)
		}
		return flow, nil
	}})
	if err != nil {
		f.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	f.host, f.cancel, f.done = h, cancel, make(chan error, 1)
	go func() { f.done <- h.Serve(ctx) }()
	testkit.WaitUntil(f.t, "the host's socket to answer", func() bool {
		c, err := Dial(f.l)
		f.client = c
		return err == nil
	})
	f.t.Cleanup(f.stopHost)
}

func (f *fixture) stopHost() {
	if f.cancel != nil {
		f.cancel()
		if err := <-f.done; err != nil {
			f.t.Errorf("host.Serve: %v", err)
		}
		f.cancel = nil
	}
}

// waitFor polls until cond holds.
func (f *fixture) waitFor(what string, cond func() bool) {
	f.t.Helper()
	testkit.WaitUntil(f.t, what, cond)
}

func (f *fixture) finished(id string) threads.Record {
	var rec threads.Record
	f.waitFor("thread "+id+" to finish", func() bool {
		r, err := threads.Resolve(f.l, id)
		rec = r
		return err == nil && r.Source == threads.SourceHistory
	})
	// The history line is written before the host lets go of the thread;
	// until it has, the host still answers for it as running.
	f.waitFor("the host to let go of thread "+id, func() bool {
		list, err := f.client.List()
		if err != nil {
			return false
		}
		for _, r := range list {
			if r.ThreadID == id {
				return false
			}
		}
		return true
	})
	return rec
}

func (f *fixture) chainRoles(head string) string {
	frames, _ := threads.Walk(f.host.exec.CAS, head)
	var out []string
	for _, fr := range frames {
		out = append(out, fr.State.Payload.Role)
	}
	return strings.Join(out, ",")
}

func TestRunListPauseResumeKill(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	var waiting atomic.Int32
	f := newFixture(t, 0, map[string]goFlow{"linear": {roles: []string{"a", "wait", "b"}, release: release, waiting: &waiting}})
	id, err := f.client.Run(RunRequest{Workflow: "linear", Prompt: "go"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := threads.Resolve(f.l, id); err != nil {
		t.Fatalf("thread not listed right after run: %v", err)
	}
	list, _ := f.client.List()
	if len(list) != 1 || list[0].ThreadID != id || list[0].Workflow != "linear" || list[0].Status != threads.StatusRunning {
		t.Fatalf("list = %+v", list)
	}
	// Paused while its second step is in flight, the thread is pausing
	// until that step is written, and held then.
	f.waitFor("the second step to begin", func() bool { return waiting.Load() == 1 })
	if err := f.client.Pause(id); err != nil {
		t.Fatal(err)
	}
	if err := f.client.Pause(id); err == nil || !strings.HasPrefix(err.Error(), "thread already pausing") {
		t.Fatalf("second pause: %v", err)
	}
	list, _ = f.client.List()
	if list[0].Status != threads.StatusPausing {
		t.Fatalf("status while the role runs on = %s", list[0].Status)
	}
	close(release)
	var held string
	f.waitFor("the step in flight to be written", func() bool {
		r, _ := threads.Resolve(f.l, id)
		held = r.Head
		return f.chainRoles(held) == "a,wait"
	})
	f.waitFor("the thread to be held", func() bool {
		list, _ := f.client.List()
		return len(list) == 1 && list[0].Status == threads.StatusPaused
	})
	if err := f.client.Pause(id); err == nil || err.Error() != "thread already paused" {
		t.Fatalf("pause of a paused thread: %v", err)
	}
	// Not a wait for something but the span of a negative check: a paused
	// thread that took its next step would most likely have done so by now.
	time.Sleep(300 * time.Millisecond)
	if rec, _ := threads.Resolve(f.l, id); rec.Head != held || rec.Source != threads.SourceActive {
		t.Fatal("paused thread moved")
	}
	if err := f.client.Resume(id); err != nil {
		t.Fatal(err)
	}
	done := f.finished(id)
	if got := f.chainRoles(done.Head); got != "a,wait,b,__end__" {
		t.Fatalf("chain = %s", got)
	}
	if err := f.client.Pause(id); err == nil || !strings.Contains(err.Error(), "thread not running") {
		t.Fatalf("pause of a finished thread: %v", err)
	}
	if err := f.client.Resume(id); err == nil || !strings.Contains(err.Error(), "thread not running") {
		t.Fatalf("resume of a finished thread: %v", err)
	}

	// Kill a blocked thread: it ends with 130 and leaves the host's list.
	f.flows[strings.ToUpper("linear0000000")] = goFlow{roles: []string{"a", "wait"}, release: make(chan struct{})}
	id2, _ := f.client.Run(RunRequest{Workflow: "linear"})
	f.waitFor("first step", func() bool {
		r, _ := threads.Resolve(f.l, id2)
		return r.Head != r.Start
	})
	if err := f.client.Kill(id2); err != nil {
		t.Fatal(err)
	}
	killed := f.finished(id2)
	end, _ := threads.HeadEnd(f.host.exec.CAS, killed.Head)
	if end == nil || end.ReturnCode() != 130 {
		t.Fatalf("killed end = %+v", end)
	}
	if list, _ := f.client.List(); len(list) != 0 {
		t.Fatalf("killed thread still listed: %+v", list)
	}
	if _, err := f.client.Run(RunRequest{Workflow: "ghost"}); err == nil || err.Error() != "workflow not registered: ghost" {
		t.Fatalf("unknown workflow: %v", err)
	}
	if _, err := f.client.Run(RunRequest{Workflow: "Bad Name"}); err == nil || !strings.Contains(err.Error(), "invalid workflow name") {
		t.Fatalf("bad name: %v", err)
	}
	if err := f.client.Kill("not-an-id"); err == nil || !strings.Contains(err.Error(), "invalid thread id") {
		t.Fatalf("bad id: %v", err)
	}
}

func TestSecondHostIsRefused(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 0, map[string]goFlow{"x": {roles: []string{"a"}}})
	if _, err := Open(Options{Layout: f.l}); !errors.Is(err, ErrHostRunning) {
		t.Fatalf("second host: %v", err)
	}
	if !Running(f.l) {
		t.Fatal("Running = false while a host serves")
	}
	f.stopHost()
	if Running(f.l) {
		t.Fatal("Running = true after the host stopped")
	}
	if _, err := Dial(f.l); !errors.Is(err, ErrNoHost) {
		t.Fatalf("dial without host: %v", err)
	}
}

func TestHostDeathLeavesThreadResumable(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	f := newFixture(t, 0, map[string]goFlow{"linear": {roles: []string{"a", "wait", "b"}, release: release}})
	id, _ := f.client.Run(RunRequest{Workflow: "linear"})
	f.waitFor("first step", func() bool {
		r, _ := threads.Resolve(f.l, id)
		return r.Head != r.Start
	})
	f.stopHost() // the host goes away mid-thread
	rec, _ := threads.Resolve(f.l, id)
	if end, _ := threads.HeadEnd(f.host.exec.CAS, rec.Head); rec.Source != threads.SourceActive || end != nil {
		t.Fatalf("thread after host death: %+v", rec)
	}
	close(release)
	f.startHost(0)
	if err := f.client.Resume(id); err != nil {
		t.Fatal(err)
	}
	done := f.finished(id)
	if got := f.chainRoles(done.Head); got != "a,wait,b,__end__" {
		t.Fatalf("resumed chain = %s (a step repeated or lost)", got)
	}
}

// A resume that arrives while another is starting the same interrupted
// thread does not start it again: a second run would run its roles twice
// at once.
func TestASecondResumeWhileTheFirstStartsRunsNothing(t *testing.T) {
	t.Parallel()
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
	starts.Store(0)
	// The second request comes at the worst moment: the first has found
	// the thread idle and is loading its workflow.
	var second error
	var nested atomic.Bool
	f.onLoad = func() {
		if !nested.Swap(true) {
			second = f.host.Resume(id, ResumeRequest{})
		}
	}
	if err := f.host.Resume(id, ResumeRequest{}); err != nil {
		t.Fatal(err)
	}
	if second == nil || !strings.Contains(second.Error(), "already being resumed") {
		t.Fatalf("the second resume: %v", second)
	}
	close(release)
	if got := f.chainRoles(f.finished(id).Head); got != "a,wait,b,__end__" {
		t.Fatalf("resumed chain = %s", got)
	}
	f.stopHost() // waits for every run it started
	if n := starts.Load(); n != 1 {
		t.Fatalf("two resumes started %d runs, want 1", n)
	}
}

func TestChildWorkflowsAndDepthLimit(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 1, map[string]goFlow{
		"parent": {roles: []string{"plan", "child:leaf", "wrap"}},
		"leaf":   {roles: []string{"work"}},
		"deep":   {roles: []string{"child:deep"}},
	})
	id, _ := f.client.Run(RunRequest{Workflow: "parent", Prompt: "task"})
	done := f.finished(id)
	frames, _ := threads.Walk(f.host.exec.CAS, done.Head)
	child := frames[1].State.Payload.ChildThread
	if frames[1].State.Payload.Role != "child:leaf" || child == "" {
		t.Fatalf("parent step = %+v", frames[1].State.Payload)
	}
	if got := f.chainRoles(child); got != "work,__end__" {
		t.Fatalf("child chain = %s", got)
	}
	childFrames, _ := threads.Walk(f.host.exec.CAS, child)
	start, _ := f.host.exec.CAS.GetNode(childFrames[0].State.Payload.Start)
	if sp := start.References(); len(sp) != 2 || sp[1] != frames[0].Hash {
		t.Fatalf("child's parentState must be the parent's head when it started: refs %v, parent head %s", sp, frames[0].Hash)
	}
	// A workflow that recurses hits the depth limit with a clear error.
	id, _ = f.client.Run(RunRequest{Workflow: "deep"})
	deep := f.finished(id)
	end, _ := threads.HeadEnd(f.host.exec.CAS, deep.Head)
	if end == nil || end.ReturnCode() != 1 || !strings.Contains(end.Summary(), "workflow adapter depth limit exceeded (max 3)") {
		t.Fatalf("deep end = %+v", end)
	}
}

func TestKillingTheParentKillsTheChild(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 0, map[string]goFlow{
		"parent": {roles: []string{"child:slow"}},
		"slow":   {roles: []string{"wait"}, release: make(chan struct{})},
	})
	id, _ := f.client.Run(RunRequest{Workflow: "parent"})
	var childID string
	f.waitFor("child to start", func() bool {
		list, _ := f.client.List()
		for _, r := range list {
			if r.Parent == id {
				childID = r.ThreadID
			}
		}
		return childID != ""
	})
	if err := f.client.Kill(id); err != nil {
		t.Fatal(err)
	}
	child := f.finished(childID)
	end, _ := threads.HeadEnd(f.host.exec.CAS, child.Head)
	if end == nil || end.ReturnCode() != 130 {
		t.Fatalf("child end = %+v", end)
	}
	parent := f.finished(id)
	pend, _ := threads.HeadEnd(f.host.exec.CAS, parent.Head)
	if pend == nil || pend.ReturnCode() != 130 {
		t.Fatalf("parent end = %+v", pend)
	}
}

func TestConcurrencyCapQueuesThreads(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	f := newFixture(t, 2, map[string]goFlow{"w": {roles: []string{"wait"}, release: release}})
	var ids []string
	for i := 0; i < 4; i++ {
		id, err := f.client.Run(RunRequest{Workflow: "w"})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	f.waitFor("two threads to hold the two slots", func() bool { return len(f.host.sem) == 2 })
	if list, _ := f.client.List(); len(list) != 4 {
		t.Fatalf("%d threads listed, want all 4 (2 running, 2 waiting)", len(list))
	}
	close(release)
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Add(1)
		go func(id string) { defer wg.Done(); f.finished(id) }(id)
	}
	wg.Wait()
}

func TestIdleExit(t *testing.T) {
	t.Parallel()
	l := storage.Layout{Root: t.TempDir()}
	h, err := Open(Options{Layout: l, IdleExit: 300 * time.Millisecond, Load: func(string) (workflow.Workflow, error) { return nil, errors.New("none") }})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	go func() { done <- h.Serve(context.Background()) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(testkit.WaitBound):
		t.Fatal("idle host did not exit")
	}
}

func TestADeepRootsSocketLivesInAPrivateDirectory(t *testing.T) {
	// Serial: sets XDG_RUNTIME_DIR and TMPDIR (t.Setenv).
	tmp := t.TempDir()
	t.Setenv("XDG_RUNTIME_DIR", "")
	t.Setenv("TMPDIR", tmp)
	f := newFixture(t, 1, map[string]goFlow{})
	f.l = storage.Layout{Root: filepath.Join(t.TempDir(), strings.Repeat("deep/", 20), "root")}
	sock := SocketPath(f.l)
	dir := filepath.Join(tmp, fmt.Sprintf("uncaged-workflow-%d", os.Getuid()))
	if filepath.Dir(sock) != dir {
		t.Fatalf("socket %s, want it in %s", sock, dir)
	}
	f.startHost(1)
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("socket directory: %v %v, want mode 0700", fi, err)
	}
	c, err := Dial(f.l)
	if err != nil {
		t.Fatalf("dial the host on %s: %v", sock, err)
	}
	c.Close()
	f.stopHost()

	// A directory others may write to (as if another user had made it
	// first) is refused by both sides.
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if _, err := Dial(f.l); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "not this user's private directory") {
		t.Fatalf("dial through a shared directory: %v", err)
	}
	h, err := Open(Options{Layout: f.l, Load: func(string) (workflow.Workflow, error) { return nil, errors.New("none") }})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Serve(context.Background()); err == nil || !strings.Contains(err.Error(), "not this user's private directory") {
		t.Fatalf("serve in a shared directory: %v", err)
	}
}

func TestASocketInTheRootNeedsNoPrivateDirectory(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, r := range []string{root, root + "/", root + "/."} {
		l := storage.Layout{Root: r}
		if why, _, err := socketDirProblem(l, SocketPath(l)); why != "" || err != nil {
			t.Errorf("root %q: %s %v", r, why, err)
		}
	}
}

// The socket is its owner's alone even when the host runs under umask 000
// (which would leave a plain bind's socket file open to everyone).
func TestTheSocketIsOwnerOnlyWhateverTheUmask(t *testing.T) {
	// Serial: changes the process-wide umask.
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	f := newFixture(t, 1, map[string]goFlow{})
	fi, err := os.Stat(SocketPath(f.l))
	if err != nil || fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket: %v %v, want mode 0600", fi.Mode(), err)
	}
	if ents, _ := filepath.Glob(filepath.Join(f.l.Root, ".sock*")); len(ents) != 0 {
		t.Fatalf("the private directory it was made in is left: %v", ents)
	}
	if _, err := f.client.Status(); err != nil {
		t.Fatalf("the owner is refused: %v", err)
	}
}
