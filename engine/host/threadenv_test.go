package host

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/uncaged/workflow/engine/storage"
	"github.com/uncaged/workflow/engine/threadenv"
	"github.com/uncaged/workflow/engine/threads"
	"github.com/uncaged/workflow/engine/workflow"
)

// caller is a Caller with one variable, K=value, working in dir.
func caller(value, dir string) *Caller {
	return &Caller{Env: []string{"K=" + value, "PATH=/caller/bin"}, Dir: dir, Origin: "that of test " + value}
}

// recv takes the next environment an "env" role saw.
func recv(t *testing.T, envs <-chan *threadenv.Env) *threadenv.Env {
	t.Helper()
	e := <-envs
	if e == nil {
		t.Fatal("the role saw no thread environment")
	}
	return e
}

func TestThreadsRunWithTheirCallersEnvironment(t *testing.T) {
	t.Parallel()
	envs := make(chan *threadenv.Env, 8)
	f := newFixture(t, 0, map[string]goFlow{"e": {roles: []string{"env"}, envs: envs}})

	id, err := f.client.Run(RunRequest{Workflow: "e", Caller: caller("run", "/run/dir")})
	if err != nil {
		t.Fatal(err)
	}
	e := recv(t, envs)
	f.finished(id)
	if e.Getenv("K") != "run" || e.Getenv("PATH") != "/caller/bin" || e.Dir() != "/run/dir" || e.Origin() != "that of test run" {
		t.Fatalf("run: K=%q PATH=%q dir %q origin %q", e.Getenv("K"), e.Getenv("PATH"), e.Dir(), e.Origin())
	}
	// The root's variable names this host's root, whatever the caller had.
	if e.Getenv(storage.EnvRoot) != f.l.Root {
		t.Fatalf("%s = %q, want %s", storage.EnvRoot, e.Getenv(storage.EnvRoot), f.l.Root)
	}

	// A fork is its caller's, not the forked thread's. (Fork wants the
	// bundle's file; the fixture's workflows live in memory.)
	if err := os.WriteFile(f.l.BundleFile("E000000000000"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	forkID, err := f.client.Fork(id, ForkRequest{Caller: caller("fork", "/fork/dir")})
	if err != nil {
		t.Fatal(err)
	}
	if e := recv(t, envs); e.Getenv("K") != "fork" || e.Dir() != "/fork/dir" {
		t.Fatalf("fork: K=%q dir %q", e.Getenv("K"), e.Dir())
	}
	f.finished(forkID)

	// A client with a caller fills it into requests that name none.
	f.client.SetCaller(func() *Caller { return caller("client", "/client/dir") })
	id, err = f.client.Run(RunRequest{Workflow: "e"})
	if err != nil {
		t.Fatal(err)
	}
	if e := recv(t, envs); e.Getenv("K") != "client" {
		t.Fatalf("client's caller: K=%q", e.Getenv("K"))
	}
	f.finished(id)

	// No caller at all: the host's own environment, and it says so.
	f.client.SetCaller(nil)
	id, err = f.client.Run(RunRequest{Workflow: "e"})
	if err != nil {
		t.Fatal(err)
	}
	e = recv(t, envs)
	f.finished(id)
	if want := fmt.Sprintf("the engine host's own (pid %d)", os.Getpid()); e.Origin() != want || e.Getenv(storage.EnvRoot) != f.l.Root {
		t.Fatalf("no caller: origin %q, root %q", e.Origin(), e.Getenv(storage.EnvRoot))
	}
}

func TestResumeHandsAPausedThreadTheResumersEnvironment(t *testing.T) {
	t.Parallel()
	envs := make(chan *threadenv.Env, 8)
	release := make(chan struct{})
	var waiting atomic.Int32
	f := newFixture(t, 0, map[string]goFlow{
		"paused": {roles: []string{"env", "wait", "env"}, envs: envs, release: release, waiting: &waiting},
		"parent": {roles: []string{"child:kid"}},
		"kid":    {roles: []string{"env"}, envs: envs},
	})
	id, err := f.client.Run(RunRequest{Workflow: "paused", Caller: caller("first", "/first")})
	if err != nil {
		t.Fatal(err)
	}
	if e := recv(t, envs); e.Getenv("K") != "first" {
		t.Fatalf("before the pause: K=%q", e.Getenv("K"))
	}
	f.waitFor("the second step to begin", func() bool { return waiting.Load() == 1 })
	// Resuming a thread that is not paused fails and leaves its environment.
	f.client.SetCaller(func() *Caller { return caller("intruder", "/x") })
	if err := f.client.Resume(id); err == nil || err.Error() != "thread not paused: "+id+" is running" {
		t.Fatalf("resume of a running thread: %v", err)
	}
	if hd, _ := f.host.get(id); hd.env.Load().Getenv("K") != "first" {
		t.Fatalf("a failed resume changed the environment to K=%q", hd.env.Load().Getenv("K"))
	}
	if err := f.client.Pause(id); err != nil {
		t.Fatal(err)
	}
	close(release)
	f.waitFor("the step in flight to be written", func() bool {
		r, _ := threads.Resolve(f.l, id)
		return f.chainRoles(r.Head) == "env,wait"
	})
	f.client.SetCaller(func() *Caller { return caller("second", "/second") })
	if err := f.client.Resume(id); err != nil {
		t.Fatal(err)
	}
	if e := recv(t, envs); e.Getenv("K") != "second" || e.Dir() != "/second" {
		t.Fatalf("after the resume: K=%q dir %q", e.Getenv("K"), e.Dir())
	}
	f.finished(id)

	// A child thread runs with its parent's environment.
	id, err = f.client.Run(RunRequest{Workflow: "parent", Caller: caller("parent", "/parent")})
	if err != nil {
		t.Fatal(err)
	}
	if e := recv(t, envs); e.Getenv("K") != "parent" || e.Dir() != "/parent" {
		t.Fatalf("child: K=%q dir %q", e.Getenv("K"), e.Dir())
	}
	f.finished(id)
}

func TestABadCallerStartsNothing(t *testing.T) {
	t.Parallel()
	envs := make(chan *threadenv.Env, 1)
	f := newFixture(t, 0, map[string]goFlow{"e": {roles: []string{"env"}, envs: envs}})
	for _, tc := range []struct {
		caller Caller
		want   string
	}{
		{Caller{Env: []string{"GOOD=1", "bad"}}, "the caller's environment: environment entry 1 is not NAME=value"},
		{Caller{Env: []string{"K=a\x00b"}}, `the caller's environment: environment variable "K" holds a NUL byte`},
		{Caller{Dir: "relative"}, `the caller's environment: working directory "relative" is not an absolute path`},
	} {
		if _, err := f.client.Run(RunRequest{Workflow: "e", Caller: &tc.caller}); err == nil || err.Error() != tc.want {
			t.Errorf("run with %+v: %v, want %q", tc.caller, err, tc.want)
		}
	}
	if _, err := os.Stat(filepath.Join(f.l.Root, "bundles")); !os.IsNotExist(err) {
		t.Fatalf("a refused run wrote to the root: %v", err)
	}
	if _, err := f.client.Fork("01J0000000000000000000000A", ForkRequest{Caller: &Caller{Dir: "rel"}}); err == nil || !strings.Contains(err.Error(), "not an absolute path") {
		t.Fatalf("fork with a bad caller: %v", err)
	}
}

func TestStopRefusesWhileThreadsRunUnlessForced(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	defer close(release)
	f := newFixture(t, 0, map[string]goFlow{"w": {roles: []string{"a", "wait"}, release: release}})
	id, err := f.client.Run(RunRequest{Workflow: "w"})
	if err != nil {
		t.Fatal(err)
	}
	f.waitFor("first step", func() bool {
		r, _ := threads.Resolve(f.l, id)
		return r.Head != r.Start
	})
	if _, err := f.client.Stop(false); err == nil || !strings.Contains(err.Error(), "1 thread(s) running ("+id+")") {
		t.Fatalf("stop with a thread running: %v", err)
	}
	if list, _ := f.client.List(); len(list) != 1 {
		t.Fatalf("a refused stop stopped the thread: %+v", list)
	}

	ans, err := f.client.Stop(true)
	if err != nil {
		t.Fatal(err)
	}
	if ans.PID != os.Getpid() || len(ans.Stopped) != 1 || ans.Stopped[0].ThreadID != id {
		t.Fatalf("stop answer = %+v", ans)
	}
	if err := WaitStopped(f.l, 10e9); err != nil {
		t.Fatal(err)
	}
	if err := <-f.done; err != nil {
		t.Fatalf("Serve after Stop: %v", err)
	}
	f.cancel()
	f.cancel = nil
	// The thread is left as it was, for a later resume.
	rec, _ := threads.Resolve(f.l, id)
	if end, _ := threads.HeadEnd(f.host.exec.CAS, rec.Head); rec.Source != threads.SourceActive || end != nil {
		t.Fatalf("after a forced stop: %+v, end %v", rec, end)
	}
	if _, err := f.host.Run(RunRequest{Workflow: "w"}); err != ErrStopping {
		t.Fatalf("run after stop: %v", err)
	}
	if _, err := Dial(f.l); err == nil {
		t.Fatal("the host still answers after Stop")
	}
}

func TestStopAnIdleHost(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 0, map[string]goFlow{"x": {roles: []string{"a"}}})
	ans, err := f.client.Stop(false)
	if err != nil || len(ans.Stopped) != 0 {
		t.Fatalf("stop: %+v, %v", ans, err)
	}
	if err := WaitStopped(f.l, 10e9); err != nil {
		t.Fatal(err)
	}
	if err := <-f.done; err != nil {
		t.Fatal(err)
	}
	f.cancel()
	f.cancel = nil
	if Running(f.l) {
		t.Fatal("the lock is held after the host stopped")
	}
}

// A caller's environment holds its keys: it is neither logged (not even
// at debug level) nor written anywhere under the root, and the nodes of a
// thread do not depend on it.
func TestTheCallersEnvironmentIsNeitherLoggedNorStored(t *testing.T) {
	t.Parallel()
	envs := make(chan *threadenv.Env, 2)
	f := newFixture(t, 0, map[string]goFlow{"e": {roles: []string{"env"}, envs: envs}})
	f.stopHost()
	var logs bytes.Buffer
	var mu sync.Mutex
	h, err := Open(Options{Layout: f.l, Load: func(string) (workflow.Workflow, error) { return f.flows["E000000000000"], nil },
		Logger: slog.New(slog.NewTextHandler(lockedWriter{&mu, &logs}, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.Serve(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	var c *Client
	f.waitFor("the host to answer", func() bool { c, err = Dial(f.l); return err == nil })
	defer c.Close()

	var starts []string
	for _, secret := range []string{"sk-first-secret", "sk-second-secret"} {
		id, err := c.Run(RunRequest{Workflow: "e", Prompt: "same", Caller: &Caller{Env: []string{"API_KEY=" + secret}, Dir: "/d", Origin: "that of a test"}})
		if err != nil {
			t.Fatal(err)
		}
		if got := recv(t, envs).Getenv("API_KEY"); got != secret {
			t.Fatalf("API_KEY = %q", got)
		}
		f.waitFor("thread "+id+" to finish", func() bool {
			r, err := threads.Resolve(f.l, id)
			return err == nil && r.Source == threads.SourceHistory
		})
		rec, _ := threads.Resolve(f.l, id)
		starts = append(starts, rec.Start)
	}
	if starts[0] != starts[1] {
		t.Fatalf("the start node depends on the environment: %s, %s", starts[0], starts[1])
	}
	mu.Lock()
	logged := logs.String()
	mu.Unlock()
	if !strings.Contains(logged, "thread environment") || strings.Contains(logged, "sk-") || strings.Contains(logged, "API_KEY") {
		t.Fatalf("the host's log:\n%s", logged)
	}
	// The host tidies up after a thread (its running marker) a moment
	// after the history names it: a file that goes while the root is
	// walked held nothing to find.
	f.waitFor("the host to run nothing", func() bool { l, err := c.List(); return err == nil && len(l) == 0 })
	err = filepath.WalkDir(f.l.Root, func(p string, d os.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(p)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err == nil && bytes.Contains(b, []byte("sk-")) {
			t.Errorf("%s holds a caller's key", p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
