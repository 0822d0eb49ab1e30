package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/uncaged/workflow/engine/cas"
	"github.com/uncaged/workflow/engine/executor"
	"github.com/uncaged/workflow/engine/host"
	"github.com/uncaged/workflow/engine/node"
	"github.com/uncaged/workflow/engine/threads"
	"github.com/uncaged/workflow/engine/usage"
	"github.com/uncaged/workflow/shared/fleet"
	"github.com/uncaged/workflow/shared/testkit"
)

// runGated starts a thread of slow.esm.js whose every step after the first
// waits until the file gate exists (SLOW_GATE in the thread's
// environment), through the engine host as the CLI would.
func (f *fixture) runGated(workflow, gate string) string {
	f.t.Helper()
	c, err := host.Dial(f.l)
	if err != nil {
		f.t.Fatal(err)
	}
	defer c.Close()
	c.SetCaller(func() *host.Caller { return &host.Caller{Env: append(os.Environ(), "SLOW_GATE="+gate)} })
	id, err := c.Run(host.RunRequest{Workflow: workflow, Prompt: "gated"})
	if err != nil {
		f.t.Fatal(err)
	}
	return id
}

// waitAtGate waits until step of a runGated thread is in flight, waiting
// at gate: the role is announced and the step not yet written, which is
// not the case between steps.
func (f *fixture) waitAtGate(gate string, step int) {
	f.t.Helper()
	testkit.WaitUntil(f.t, fmt.Sprintf("step %d to wait at the gate", step), func() bool {
		_, err := os.Stat(fmt.Sprintf("%s.waiting-%d", gate, step))
		return err == nil
	})
}

// listed is thread id as GET /api/threads lists it.
func (f *fixture) listed(q, id string) ThreadSummary {
	f.t.Helper()
	return f.listedAfter(q, func() string { return id })
}

// pauseRecords are the thread's debug-log records of pausing, "tag: content".
func (f *fixture) pauseRecords(bundle, id string) []string {
	f.t.Helper()
	b, err := os.ReadFile(f.l.InfoLog(bundle, id))
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

// A pause asked while a role runs: the list, the thread's view and the
// running list say "pausing", and the debug log names the role, until the
// role's step is written; then "paused", and the log says after which
// step; a resume is logged and the thread completes.
func TestAPausedThreadIsPausingUntilItsRoleFinishes(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	bundle := f.register("slow", "slow.esm.js")
	f.startHost()
	gate := filepath.Join(t.TempDir(), "gate")
	id := f.runGated("slow", gate)
	// The second role waits for the gate: it is in flight (not merely
	// step 1 written), so the pause waits for it to finish its step.
	f.waitAtGate(gate, 2)
	f.want(http.MethodPost, "/api/threads/"+id+"/pause", "", http.StatusOK, nil)
	if got := f.detail(id).status(); got != "pausing" {
		t.Fatalf("view: %s, want pausing", got)
	}
	if got := f.listed("", id).Status; got != threads.StatusPausing {
		t.Fatalf("list: %s, want pausing", got)
	}
	if got := f.listed("?status=pausing", id).Status; got != threads.StatusPausing {
		t.Fatalf("list of pausing threads: %s", got)
	}
	var run struct{ Threads []RunningSummary }
	f.want(http.MethodGet, "/api/threads/running", "", http.StatusOK, &run)
	if len(run.Threads) != 1 || run.Threads[0].Status != threads.StatusPausing {
		t.Fatalf("running: %+v", run)
	}
	if got := f.pauseRecords(bundle, id); len(got) != 1 || got[0] != "pausing: pause requested; role two finishes its step first" {
		t.Fatalf("pause records while pausing: %q", got)
	}

	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	d := f.waitStatus(id, "paused")
	if len(d.roles()) != 2 {
		t.Fatalf("paused after %v, want after the role that was running", d.roles())
	}
	if got := f.listed("", id).Status; got != threads.StatusPaused {
		t.Fatalf("list: %s, want paused", got)
	}
	if got := f.pauseRecords(bundle, id); len(got) != 2 || got[1] != "paused: paused after step 2" {
		t.Fatalf("pause records while paused: %q", got)
	}
	f.want(http.MethodPost, "/api/threads/"+id+"/resume", "", http.StatusOK, nil)
	f.waitStatus(id, "completed")
	if got := f.pauseRecords(bundle, id); len(got) != 3 || !strings.HasPrefix(got[2], "resumed: resumed after ") {
		t.Fatalf("pause records after the resume: %q", got)
	}
}

// A thread the original engine's worker runs on this root is listed and
// shown as running, and the API refuses to resume or kill it.
func TestTheOriginalsRunningThreadIsRunning(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	bundle := f.register("slow", "slow.esm.js")
	f.startHost()
	th := executor.Thread{ID: "06EZJ3QM9Q4S5XWA0R1C7D8E2G", BundleHash: bundle, WorkflowName: "slow", Prompt: "the original's"}
	if err := executor.New(f.l).Begin(&th); err != nil {
		t.Fatal(err)
	}
	worker := f.originalRuns(bundle, th.ID)
	if got := f.listed("", th.ID).Status; got != threads.StatusRunning {
		t.Fatalf("list: %s, want running", got)
	}
	if got := f.detail(th.ID).status(); got != "running" {
		t.Fatalf("view: %s, want running", got)
	}
	for _, verb := range []string{"resume", "kill"} {
		f.wantError(http.MethodPost, "/api/threads/"+th.ID+"/"+verb, "", http.StatusBadRequest,
			fmt.Sprintf("the original engine's worker (pid %d) is running it", worker))
	}
	if d := f.detail(th.ID); d.status() != "running" || len(d.roles()) != 0 {
		t.Fatalf("after the refusals: %s with %v", d.status(), d.roles())
	}
}

// The list's items carry the prompt as the fleet's list shows it (cut
// the same way) and the thread's usage, absent when it made no call.
func TestThreadListHasPromptAndUsage(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	hash := f.register("linear", "linear.esm.js")
	f.priceModel()
	f.startHost()
	long := strings.Repeat("long prompt ", fleet.PromptMaxRunes)
	spent := f.run("linear", long)
	idle := f.run("linear", "short")
	gone := f.run("linear", "a prompt that goes")
	for _, id := range []string{spent, idle, gone} {
		f.waitStatus(id, "completed")
	}
	// One thread's prompt is not in the CAS any more.
	rec, err := threads.Resolve(f.l, gone)
	if err != nil {
		t.Fatal(err)
	}
	n, err := cas.Open(f.l.CASDir()).GetNode(rec.Start)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(f.l.CASDir(), n.(node.Start).Refs[0]+".txt")); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UnixMilli()
	appendUsage(t, usage.Path(f.l, hash, spent),
		usage.Record{Time: now, Thread: spent, Workflow: "linear", Step: 1, Source: usage.SourceRole, Model: "p/m", PromptTokens: 1000, CompletionTokens: 100})

	s := f.listed("", spent)
	if s.Prompt == nil || *s.Prompt != fleet.TruncatePrompt(long) || utf8.RuneCountInString(*s.Prompt) != fleet.PromptMaxRunes {
		t.Fatalf("long prompt listed as %v", s.Prompt)
	}
	if s.Usage == nil || s.Usage.Calls != 1 || s.Usage.TotalTokens != 1100 || s.Usage.CostUSD == nil || *s.Usage.CostUSD != (1000+100*2)/1e6 {
		t.Fatalf("usage listed as %+v", s.Usage)
	}
	var d ThreadDetail
	f.want(http.MethodGet, "/api/threads/"+spent, "", http.StatusOK, &d)
	if !reflect.DeepEqual(d.Usage, *s.Usage) {
		t.Fatalf("the list's usage %+v is not the thread view's %+v", *s.Usage, d.Usage)
	}
	if s := f.listed("", idle); s.Prompt == nil || *s.Prompt != "short" || s.Usage != nil {
		t.Fatalf("short prompt, no usage: %+v", s)
	}
	// On the wire: usage absent, and prompt null when it is not in the CAS.
	var raw struct {
		Threads []map[string]json.RawMessage `json:"threads"`
	}
	f.want(http.MethodGet, "/api/threads?limit=1", "", http.StatusOK, &raw)
	if _, ok := raw.Threads[0]["usage"]; ok || string(raw.Threads[0]["prompt"]) != "null" || string(raw.Threads[0]["threadId"]) != `"`+gone+`"` {
		t.Fatalf("wire form of a thread without usage or prompt: %s", raw.Threads[0])
	}
}

// A thread killed through the API says so in its result: the step and
// role it was killed in, and that the API killed it.
func TestAKilledThreadsResultSaysWhereAndWho(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.register("slow", "slow.esm.js")
	f.startHost()
	gate := filepath.Join(t.TempDir(), "never")
	id := f.runGated("slow", gate)
	// Step 2 in flight, not only step 1 written: between the two the
	// thread is "after step 1", which is what a kill then says.
	f.waitAtGate(gate, 2)
	f.want(http.MethodPost, "/api/threads/"+id+"/kill", "", http.StatusOK, nil)
	res := f.waitStatus(id, "killed").result()
	want := fmt.Sprintf("thread aborted: killed during step 2 (role two) by the connector's API (the dashboard or another client of it; pid %d)", os.Getpid())
	if res == nil || res["returnCode"] != float64(130) || res["content"] != want {
		t.Fatalf("result = %v, want content %q", res, want)
	}
}

// originalRuns lays out what the original engine leaves while its worker
// runs thread id of bundle: a live process whose arguments name the
// bundle (a shell sleeping in the worker's stead), the worker record
// naming its pid, and the thread's running marker. It returns the pid.
func (f *fixture) originalRuns(bundle, id string) (worker int) {
	t := f.t
	t.Helper()
	cmd := exec.Command("sh", "-c", "sleep 600; exit 0", "worker.js", f.l.BundleFile(bundle), f.l.Root, bundle)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	for p, b := range map[string]string{
		f.l.RunningMarker(bundle, id): "",
		f.l.WorkerFile(bundle):        fmt.Sprintf(`{"pid":%d,"port":%d}`+"\n", cmd.Process.Pid, 40123),
	} {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(b), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return cmd.Process.Pid
}
