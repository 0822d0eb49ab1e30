package executor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/uncaged/workflow/engine/canonyaml"
	"github.com/uncaged/workflow/engine/node"
	"github.com/uncaged/workflow/engine/storage"
	"github.com/uncaged/workflow/engine/threads"
	"github.com/uncaged/workflow/engine/workflow"
	"github.com/uncaged/workflow/shared/testkit"
)

// linear is a workflow written in Go for these tests: it runs its roles in
// order, skipping those already in the thread's steps (as createWorkflow's
// routing does), and can fail, block or record what it saw.
type linear struct {
	roles   []string
	failAt  string // role whose turn throws
	blockAt string // role whose turn waits for ctx
	// blocked, when set, is closed once the blockAt role's turn waits: a
	// kill after it lands during that step, not between two steps.
	blocked chan struct{}
	stepped chan string // receives each role as it is produced (optional)
	seen    *[]int      // len(thread.Steps) at start, per run
	// silent does not announce its roles (workflow.RoleAnnouncer), as a
	// bundle with a generator of its own does not.
	silent bool
}

func (w linear) Descriptor() workflow.Descriptor { return workflow.Descriptor{} }

func (w linear) Start(ctx context.Context, tc workflow.ThreadContext, host workflow.Host) (workflow.Run, error) {
	if w.seen != nil {
		*w.seen = append(*w.seen, len(tc.Steps))
	}
	return &linearRun{w: w, host: host, done: len(tc.Steps), prompt: tc.Start.Content}, nil
}

type linearRun struct {
	w      linear
	host   workflow.Host
	done   int
	prompt string
}

func (r *linearRun) Next(ctx context.Context) (*workflow.Output, *workflow.Completion, error) {
	if r.done >= len(r.w.roles) {
		return nil, &workflow.Completion{ReturnCode: 0, Summary: "completed: moderator returned END"}, nil
	}
	role := r.w.roles[r.done]
	if a, ok := r.host.(workflow.RoleAnnouncer); ok && !r.w.silent {
		a.RoleBegins(role)
	}
	if role == r.w.failAt {
		return nil, nil, errors.New("boom in " + role)
	}
	if role == r.w.blockAt {
		if r.w.blocked != nil {
			close(r.w.blocked)
		}
		<-ctx.Done()
		return nil, nil, ctx.Err()
	}
	h, err := r.host.CAS().Put(fmt.Sprintf(`{"role":%q,"n":%d}`, role, r.done))
	if err != nil {
		return nil, nil, err
	}
	r.done++
	if r.w.stepped != nil {
		r.w.stepped <- role
	}
	return &workflow.Output{Role: role, ContentHash: h, Meta: canonyaml.Map{{Key: "n", Value: r.done}}, Refs: []string{h}}, nil, nil
}

func (r *linearRun) Close() error { return nil }

func newExec(t *testing.T) *Executor {
	return New(storage.Layout{Root: t.TempDir()})
}

func begin(t *testing.T, e *Executor, id string) Thread {
	t.Helper()
	th := Thread{ID: id, BundleHash: "BUNDLEHASHAAA", WorkflowName: "demo", Prompt: "hello"}
	if err := e.Begin(&th); err != nil {
		t.Fatal(err)
	}
	return th
}

func roles(t *testing.T, e *Executor, head string) []string {
	t.Helper()
	frames, err := threads.Walk(e.CAS, head)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range frames {
		out = append(out, f.State.Payload.Role)
	}
	return out
}

func TestLinearRunWritesChainAndHistory(t *testing.T) {
	t.Parallel()
	e := newExec(t)
	th := begin(t, e, "T1")
	// The start node: refs[0] is the prompt's content node.
	n, _ := e.CAS.GetNode(th.StartHash)
	start := n.(node.Start)
	if len(start.Refs) != 1 || start.Payload.Name != "demo" || start.Payload.Hash != "BUNDLEHASHAAA" {
		t.Fatalf("start = %+v", start)
	}
	p, _ := e.CAS.GetNode(start.Refs[0])
	if p.(node.Content).Payload != "hello" {
		t.Fatalf("prompt = %+v", p)
	}
	idx, _ := threads.ReadIndex(e.Layout.BundleDir("BUNDLEHASHAAA"))
	if idx["T1"].Head != th.StartHash {
		t.Fatalf("index before run = %+v", idx)
	}
	var heads []string
	res, err := e.Run(context.Background(), linear{roles: []string{"planner", "coder", "reviewer"}}, th, Env{OnStep: func(h string) { heads = append(heads, h) }})
	if err != nil {
		t.Fatal(err)
	}
	if res.ReturnCode != 0 || res.Summary != "completed: moderator returned END" {
		t.Fatalf("result = %+v", res)
	}
	if got := roles(t, e, res.RootHash); strings.Join(got, ",") != "planner,coder,reviewer,__end__" {
		t.Fatalf("chain = %v", got)
	}
	frames, _ := threads.Walk(e.CAS, res.RootHash)
	if len(frames[0].State.Payload.Ancestors) != 0 || frames[1].State.Payload.Ancestors[0] != frames[0].Hash || frames[1].State.Payload.Start != th.StartHash {
		t.Fatalf("ancestors/start wrong: %+v", frames[1].State.Payload)
	}
	if len(heads) != 4 || heads[0] == heads[1] {
		t.Fatalf("published heads = %v", heads)
	}
	idx, _ = threads.ReadIndex(e.Layout.BundleDir("BUNDLEHASHAAA"))
	if len(idx) != 0 {
		t.Fatalf("finished thread still active: %v", idx)
	}
	hist, _ := threads.ReadHistory(e.Layout.BundleDir("BUNDLEHASHAAA"))
	if len(hist) != 1 || hist[0].Head != res.RootHash || hist[0].ThreadID != "T1" || hist[0].Start != th.StartHash {
		t.Fatalf("history = %+v", hist)
	}
	end, _ := threads.HeadEnd(e.CAS, res.RootHash)
	if end == nil || end.ReturnCode() != 0 || end.Summary() != res.Summary {
		t.Fatalf("end = %+v", end)
	}
	if _, err := os.Stat(e.Layout.InfoLog("BUNDLEHASHAAA", "T1")); err != nil {
		t.Fatal("no debug log")
	}
	// No legacy .data.jsonl anywhere.
	if matches, _ := findFiles(e.Layout.Root, ".data.jsonl"); len(matches) != 0 {
		t.Fatalf("legacy files written: %v", matches)
	}
}

func findFiles(root, suffix string) ([]string, error) {
	var out []string
	err := walk(root, func(p string) {
		if strings.HasSuffix(p, suffix) {
			out = append(out, p)
		}
	})
	return out, err
}

func walk(dir string, fn func(string)) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		p := dir + "/" + e.Name()
		if e.IsDir() {
			if err := walk(p, fn); err != nil {
				return err
			}
		} else {
			fn(p)
		}
	}
	return nil
}

func TestThrowEndsFailedWithTheError(t *testing.T) {
	t.Parallel()
	e := newExec(t)
	th := begin(t, e, "T1")
	res, err := e.Run(context.Background(), linear{roles: []string{"planner", "coder"}, failAt: "coder"}, th, Env{})
	if err != nil {
		t.Fatal(err)
	}
	if res.ReturnCode != 1 || res.Summary != "failed: boom in coder" {
		t.Fatalf("result = %+v", res)
	}
	end, _ := threads.HeadEnd(e.CAS, res.RootHash)
	if threads.DeriveStatus(threads.SourceHistory, end, threads.NotExecuting) != threads.StatusFailed {
		t.Fatal("status not failed")
	}
	log, _ := os.ReadFile(e.Layout.InfoLog("BUNDLEHASHAAA", "T1"))
	if !strings.Contains(string(log), "boom in coder") || !strings.Contains(string(log), TagError) {
		t.Fatalf("debug log lacks the error:\n%s", log)
	}
}

// waitSteps waits until thread id's head has n role steps behind it.
func waitSteps(t *testing.T, e *Executor, id string, n int) {
	t.Helper()
	testkit.WaitUntil(t, fmt.Sprintf("thread %s to reach %d steps", id, n), func() bool {
		rec, err := threads.Resolve(e.Layout, id)
		if err != nil {
			return false
		}
		frames, _ := threads.Walk(e.CAS, rec.Head)
		return len(frames) >= n
	})
}

func TestKillEndsWith130(t *testing.T) {
	t.Parallel()
	e := newExec(t)
	th := begin(t, e, "T1")
	ctx, cancel := context.WithCancelCause(context.Background())
	done := make(chan Result)
	blocked := make(chan struct{})
	go func() {
		res, _ := e.Run(ctx, linear{roles: []string{"planner", "coder"}, blockAt: "coder", blocked: blocked}, th, Env{})
		done <- res
	}()
	<-blocked
	cancel(ErrKilled)
	res := <-done
	if res.ReturnCode != 130 || res.Summary != SummaryKilled+": killed during step 2 (role coder)" {
		t.Fatalf("result = %+v", res)
	}
	if got := roles(t, e, res.RootHash); strings.Join(got, ",") != "planner,__end__" {
		t.Fatalf("chain = %v", got)
	}
}

func TestShutdownLeavesThreadResumableWithoutRepeatingSteps(t *testing.T) {
	t.Parallel()
	e := newExec(t)
	th := begin(t, e, "T1")
	ctx, cancel := context.WithCancelCause(context.Background())
	var seen []int
	errc := make(chan error)
	go func() {
		_, err := e.Run(ctx, linear{roles: []string{"a", "b", "c"}, blockAt: "c", seen: &seen}, th, Env{})
		errc <- err
	}()
	waitSteps(t, e, "T1", 2)
	cancel(ErrShutdown)
	if err := <-errc; !errors.Is(err, ErrLeftRunning) {
		t.Fatalf("err = %v", err)
	}
	rec, err := threads.Resolve(e.Layout, "T1")
	if err != nil || rec.Source != threads.SourceActive {
		t.Fatalf("thread after shutdown: %+v %v", rec, err)
	}
	resumed, err := e.ResumeThread(rec)
	if err != nil {
		t.Fatal(err)
	}
	if resumed.Prompt != "hello" || len(resumed.Resume.Steps) != 2 {
		t.Fatalf("resumed = %+v", resumed)
	}
	res, err := e.Run(context.Background(), linear{roles: []string{"a", "b", "c"}, seen: &seen}, resumed, Env{})
	if err != nil {
		t.Fatal(err)
	}
	if got := roles(t, e, res.RootHash); strings.Join(got, ",") != "a,b,c,__end__" {
		t.Fatalf("resumed chain = %v (a step was repeated or lost)", got)
	}
	if seen[1] != 2 {
		t.Fatalf("workflow did not see the done steps: %v", seen)
	}
	if _, err := e.ResumeThread(threads.Record{ThreadID: "T1", Head: res.RootHash, Start: th.StartHash}); err == nil {
		t.Fatal("resuming a finished thread must fail")
	}
}

func TestPauseHoldsTheHead(t *testing.T) {
	t.Parallel()
	e := newExec(t)
	th := begin(t, e, "T1")
	gate := &PauseGate{Log: NewDebugLog(e.Layout.InfoLog(th.BundleHash, th.ID), time.Now).Write}
	stepped := make(chan string, 10)
	done := make(chan Result)
	if err := gate.Pause(); err != nil {
		t.Fatal(err)
	}
	if err := gate.Pause(); !errors.Is(err, ErrAlreadyPausing) {
		t.Fatalf("double pause: %v", err)
	}
	if got := gate.Status(); got != threads.StatusPausing {
		t.Fatalf("status before the step in flight is written = %s, want pausing", got)
	}
	go func() {
		res, _ := e.Run(context.Background(), linear{roles: []string{"a", "b"}, stepped: stepped}, th, Env{Pause: gate})
		done <- res
	}()
	<-stepped // "a" produced; it is written, then the gate holds
	waitSteps(t, e, "T1", 1)
	testkit.WaitUntil(t, "the run to stop at the gate", func() bool { return gate.Status() == threads.StatusPaused })
	if err := gate.Pause(); !errors.Is(err, ErrAlreadyPaused) {
		t.Fatalf("pause of a paused thread: %v", err)
	}
	rec, _ := threads.Resolve(e.Layout, "T1")
	headWhilePaused := rec.Head
	// Not a wait for something but the span of a negative check: a paused
	// thread that moved would most likely have done so by now.
	time.Sleep(200 * time.Millisecond)
	rec, _ = threads.Resolve(e.Layout, "T1")
	if rec.Head != headWhilePaused || len(stepped) != 0 {
		t.Fatal("thread moved while paused")
	}
	if err := gate.Resume(); err != nil {
		t.Fatal(err)
	}
	if err := gate.Resume(); !errors.Is(err, ErrNotPaused) {
		t.Fatalf("double resume: %v", err)
	}
	res := <-done
	if got := roles(t, e, res.RootHash); strings.Join(got, ",") != "a,b,__end__" {
		t.Fatalf("chain = %v", got)
	}
	got := pauseRecords(t, e, th)
	want := []string{"pausing: pause requested; the step in flight finishes first", "paused: paused after step 1", "resumed: resumed after"}
	if len(got) != len(want) {
		t.Fatalf("pause records = %q, want %q", got, want)
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Fatalf("pause records = %q, want %q", got, want)
		}
	}
}

// pauseRecords are thread th's debug-log records of pausing, as
// "tag: content".
func pauseRecords(t *testing.T, e *Executor, th Thread) []string {
	t.Helper()
	b, err := os.ReadFile(e.Layout.InfoLog(th.BundleHash, th.ID))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var rec struct {
			Tag, Content string
			Timestamp    int64
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if rec.Timestamp <= 0 {
			t.Fatalf("log line without a timestamp: %q", line)
		}
		switch rec.Tag {
		case TagPausing, TagPaused, TagResumed:
			out = append(out, rec.Tag+": "+rec.Content)
		}
	}
	return out
}

// A killed thread's summary says where it was and who killed it, and its
// debug log says the same.
func TestKilledThreadsSummarySaysWhereAndWho(t *testing.T) {
	t.Parallel()
	const cli = "`uncaged-workflow thread kill` (pid 42)"
	cases := []struct {
		name string
		flow linear
		// paused holds the thread at the gate after its first step;
		// idle kills it before the run begins (an interrupted thread).
		paused, idle bool
		cause        error
		want         string
	}{
		{name: "during a role that was announced", flow: linear{roles: []string{"planner", "reviewer"}, blockAt: "reviewer"},
			cause: KilledBy(cli), want: "killed during step 2 (role reviewer) by " + cli},
		{name: "during a role nobody announced", flow: linear{roles: []string{"planner", "reviewer"}, blockAt: "reviewer", silent: true},
			cause: ErrKilled, want: "killed during step 2"},
		{name: "while paused", flow: linear{roles: []string{"planner", "reviewer"}}, paused: true,
			cause: KilledBy("the connector's API"), want: "killed while paused after step 1 by the connector's API"},
		{name: "while not running", flow: linear{roles: []string{"planner", "reviewer"}}, idle: true,
			cause: KilledBy(cli), want: "killed after step 1 (it was not running) by " + cli},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := newExec(t)
			th := begin(t, e, "K1")
			gate := &PauseGate{}
			if c.paused {
				if err := gate.Pause(); err != nil {
					t.Fatal(err)
				}
			}
			if c.idle {
				// One step written by a run that then stopped, as a host
				// that died would leave it.
				sctx, stop := context.WithCancelCause(context.Background())
				left := make(chan error)
				go func() {
					_, err := e.Run(sctx, linear{roles: c.flow.roles, blockAt: c.flow.roles[1]}, th, Env{})
					left <- err
				}()
				waitSteps(t, e, th.ID, 1)
				stop(ErrShutdown)
				if err := <-left; !errors.Is(err, ErrLeftRunning) {
					t.Fatalf("setting up the interrupted thread: %v", err)
				}
				rec, err := threads.Resolve(e.Layout, th.ID)
				if err != nil {
					t.Fatal(err)
				}
				if th, err = e.ResumeThread(rec); err != nil {
					t.Fatal(err)
				}
			}
			ctx, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil) // a first cause stays: this one is never seen
			if c.idle {
				cancel(c.cause)
			}
			done := make(chan Result)
			flow := c.flow
			if flow.blockAt != "" {
				flow.blocked = make(chan struct{})
			}
			go func() {
				res, _ := e.Run(ctx, flow, th, Env{Pause: gate})
				done <- res
			}()
			if !c.idle {
				waitSteps(t, e, th.ID, 1)
				if flow.blocked != nil {
					<-flow.blocked // in the step, not between two
				}
				if c.paused {
					testkit.WaitUntil(t, "the run to stop at the gate", func() bool { return gate.Status() == threads.StatusPaused })
				}
				cancel(c.cause)
			}
			res := <-done
			if want := SummaryKilled + ": " + c.want; res.ReturnCode != threads.ReturnCodeKilled || res.Summary != want {
				t.Fatalf("result = %+v, want summary %q", res, want)
			}
			if end, _ := threads.HeadEnd(e.CAS, res.RootHash); end == nil || end.Summary() != res.Summary {
				t.Fatalf("__end__ = %+v", end)
			}
			if log := debugLog(t, e, th.ID); !strings.Contains(log, "thread K1 "+c.want) {
				t.Fatalf("debug log lacks %q:\n%s", c.want, log)
			}
		})
	}
}

func runToEnd(t *testing.T, e *Executor, id string, roleNames ...string) threads.Record {
	t.Helper()
	th := begin(t, e, id)
	if _, err := e.Run(context.Background(), linear{roles: roleNames}, th, Env{}); err != nil {
		t.Fatal(err)
	}
	rec, err := threads.Resolve(e.Layout, id)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

func TestForkFromRoleAndRetryLast(t *testing.T) {
	t.Parallel()
	e := newExec(t)
	src := runToEnd(t, e, "SRC", "planner", "coder", "reviewer")
	wf := linear{roles: []string{"planner", "coder", "reviewer"}}

	f1, err := e.PrepareFork(src, "F1", "planner")
	if err != nil {
		t.Fatal(err)
	}
	if f1.StartHash != src.Start || len(f1.Resume.Steps) != 1 {
		t.Fatalf("fork from planner = %+v", f1)
	}
	// A prepared fork is listed by List only: whoever runs it says so first.
	if _, err := threads.Resolve(e.Layout, "F1"); !errors.Is(err, threads.ErrNotFound) {
		t.Fatalf("a prepared fork is listed before List: %v", err)
	}
	if err := e.List(f1); err != nil {
		t.Fatal(err)
	}
	if rec, err := threads.Resolve(e.Layout, "F1"); err != nil || rec.Head != f1.Resume.Head || rec.Start != src.Start || rec.Source != threads.SourceActive {
		t.Fatalf("listed fork: %+v %v", rec, err)
	}
	res, err := e.Run(context.Background(), wf, f1, Env{})
	if err != nil {
		t.Fatal(err)
	}
	if got := roles(t, e, res.RootHash); strings.Join(got, ",") != "planner,__fork__,coder,reviewer,__end__" {
		t.Fatalf("fork chain = %v", got)
	}
	rec, _ := threads.Resolve(e.Layout, "F1")
	if rec.Start != src.Start {
		t.Fatal("fork does not share the start node")
	}

	f2, err := e.PrepareFork(src, "F2", "")
	if err != nil {
		t.Fatal(err)
	}
	if len(f2.Resume.Steps) != 2 || f2.Resume.Steps[1].Role != "coder" {
		t.Fatalf("retry-last fork steps = %+v", f2.Resume.Steps)
	}
	res, _ = e.Run(context.Background(), wf, f2, Env{})
	if got := roles(t, e, res.RootHash); strings.Join(got, ",") != "planner,coder,__fork__,reviewer,__end__" {
		t.Fatalf("retry-last chain = %v", got)
	}

	if _, err := e.PrepareFork(src, "F3", "tester"); err == nil || err.Error() != "role not found in thread: tester (available: planner, coder, reviewer)" {
		t.Fatalf("unknown role: %v", err)
	}
	one := runToEnd(t, e, "ONE", "solo")
	f4, err := e.PrepareFork(one, "F4", "")
	if err != nil || len(f4.Resume.Steps) != 0 || f4.Resume.Head != one.Start {
		t.Fatalf("single-step fork re-runs the thread: %+v %v", f4, err)
	}
	empty := begin(t, e, "EMPTY")
	rec, _ = threads.Resolve(e.Layout, "EMPTY")
	_ = empty
	if _, err := e.PrepareFork(rec, "F5", ""); err == nil || err.Error() != "thread has no completed role steps to fork from" {
		t.Fatalf("empty fork: %v", err)
	}
}
