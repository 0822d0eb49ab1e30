// Package executor runs one thread: it writes the start node, drives a
// workflow step by step, writes a state node per step and the __end__ node,
// and keeps threads.json and history in step. It is the only writer of a
// running thread's nodes, so a thread's chain in the CAS is always a valid
// prefix of its run — which is what makes resume and fork possible.
package executor

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/uncaged/workflow/engine/agents"
	"github.com/uncaged/workflow/engine/agents/llm"
	"github.com/uncaged/workflow/engine/canonyaml"
	"github.com/uncaged/workflow/engine/cas"
	"github.com/uncaged/workflow/engine/ids"
	"github.com/uncaged/workflow/engine/membudget"
	"github.com/uncaged/workflow/engine/node"
	"github.com/uncaged/workflow/engine/registry"
	"github.com/uncaged/workflow/engine/storage"
	"github.com/uncaged/workflow/engine/threadenv"
	"github.com/uncaged/workflow/engine/threads"
	"github.com/uncaged/workflow/engine/workflow"
)

// Causes for cancelling a running thread's context.
var (
	// ErrKilled: a person killed the thread; it ends with return code 130.
	ErrKilled = errors.New("thread killed")
	// ErrShutdown: the engine host is stopping; the thread is left as it is
	// (interrupted) so a later resume continues it.
	ErrShutdown = errors.New("engine host shutting down")
)

// killCause is ErrKilled with who asked for the kill.
type killCause struct{ by string }

func (k *killCause) Error() string        { return "thread killed by " + k.by }
func (k *killCause) Is(target error) bool { return target == ErrKilled }

// KilledBy is the cause to cancel a thread's context with to kill it on
// behalf of who (e.g. "`uncaged-workflow thread kill` (pid 4242)"), which
// its summary then names; "" is plain ErrKilled.
func KilledBy(who string) error {
	if who == "" {
		return ErrKilled
	}
	return &killCause{by: who}
}

// Summaries of threads the executor ends itself.
const (
	// SummaryKilled begins a killed thread's summary, as the original's
	// whole summary was; what follows says where the thread was and who
	// killed it (run.killedHow).
	SummaryKilled = "thread aborted"
	// failedPrefix starts the summary of a thread whose workflow threw.
	failedPrefix = "failed: "
)

// Executor runs threads over one storage root.
type Executor struct {
	Layout storage.Layout
	CAS    *cas.Store
	// Now is the clock (nil: time.Now).
	Now func() time.Time
}

// New returns an executor for a storage root.
func New(l storage.Layout) *Executor {
	return &Executor{Layout: l, CAS: cas.Open(l.CASDir())}
}

func (e *Executor) now() time.Time {
	if e.Now != nil {
		return e.Now()
	}
	return time.Now()
}

// Thread says which thread to run and from where.
type Thread struct {
	ID           string
	BundleHash   string
	WorkflowName string
	Depth        int
	// ParentState is the parent's head for a child thread, else "".
	ParentState string
	// Prompt is the thread's prompt text.
	Prompt string
	// StartHash is the thread's start node, written by Begin.
	StartHash string
	// Resume continues an existing chain (a fork or an interrupted
	// thread); nil starts from the start node.
	Resume *Chain
}

// Chain is the tail of a thread's chain to continue from.
type Chain struct {
	// Head is the last state to build on: its hash and ancestors.
	Head          string
	HeadAncestors []string
	// Steps are the role steps already done, oldest first, as the workflow
	// will see them.
	Steps []workflow.RoleStep
}

// Begin writes a fresh thread's prompt and start node and lists it in
// threads.json, so the thread is visible (and resolvable) before it runs.
func (e *Executor) Begin(t *Thread) error {
	// Both nodes share one directory sync, made before the index names
	// the start node.
	store := e.CAS.Batched()
	promptNode, err := node.NewContent(t.Prompt, nil).Marshal()
	if err != nil {
		return err
	}
	startNode, err := node.NewStart(node.StartPayload{
		Name: t.WorkflowName, Hash: t.BundleHash, Depth: int64(t.Depth), ParentState: t.ParentState,
	}, ids.HashBytes(promptNode)).Marshal()
	if err != nil {
		return err
	}
	// The start node names the prompt by its hash, known before either is
	// stored: they are written side by side.
	promptStored := putAsync(store, promptNode)
	start, err := store.PutBytes(startNode)
	if perr := <-promptStored; err == nil {
		err = perr
	}
	if err != nil {
		return err
	}
	t.StartHash = start
	// Their names are synced by the index's group, shared with the steps
	// of other threads committed with it.
	return threads.UpsertAfter(e.Layout.BundleDir(t.BundleHash), t.ID, threads.Entry{Head: start, Start: start, UpdatedAt: e.now().UnixMilli()}, nil, store.Dir())
}

// putAsync stores b in a goroutine of its own and reports the outcome on
// the channel it returns, so that the fsyncs of nodes whose hashes are
// known in advance overlap.
func putAsync(store *cas.Store, b []byte) <-chan error {
	done := make(chan error, 1)
	go func() {
		_, err := store.PutBytes(b)
		done <- err
	}()
	return done
}

// Env is what a run needs from its engine host.
type Env struct {
	// Thread returns the thread's environment: the variables and working
	// directory of the command that started or last resumed it. It is
	// asked at each use, as a resume may hand a paused thread a newer one.
	Thread func() *threadenv.Env
	// Getenv supplies the variables alone when Thread is nil (tests,
	// embedders with no working directory to give).
	Getenv func(string) string
	// RunChild runs a child workflow of parent (see workflow.Host.RunChild).
	RunChild func(ctx context.Context, parent ChildParent, name, prompt string) (workflow.ChildResult, error)
	// Pause is the thread's pause gate (nil: never paused).
	Pause *PauseGate
	// OnStep, when set, is told each head the thread publishes.
	OnStep func(head string)
	// Ask puts a human role's question to a person and waits for the
	// answer (agents.HumanHost); nil: this host cannot, and such a role
	// fails saying so.
	Ask func(ctx context.Context, req AskRequest) (agents.HumanAnswer, error)
}

// AskRequest is a question a thread's human role asks at the thread's
// current head.
type AskRequest struct {
	ThreadID   string
	BundleHash string
	Workflow   string
	// Head is the thread's head: the question belongs to this point of the
	// chain, and an answer to it makes the next step.
	Head     string
	Question agents.HumanQuestion
}

// ChildParent identifies the thread that spawns a child.
type ChildParent struct {
	ThreadID string
	Depth    int
	Head     string // the parent's head when the child starts
}

// Result is how a run ended.
type Result struct {
	ReturnCode int
	Summary    string
	RootHash   string // the __end__ node
	// Failure is the error of a workflow that threw (the thread ended
	// failed), "" otherwise.
	Failure string
}

// ErrLeftRunning is returned when the run stopped without ending the thread
// (the host shut down); the thread stays active and can be resumed.
var ErrLeftRunning = errors.New("thread left unfinished")

// Run drives wf over t until it completes, fails, is killed, or ctx is
// cancelled with ErrShutdown. Every outcome but the last writes an __end__
// node and moves the thread to history; a workflow that throws ends as
// failed with the error in its summary and the debug log. When
// workflow.yaml configures them, a supervisor model may end the thread
// (return code 1) and a summarizer model rewrites the final summary.
func (e *Executor) Run(ctx context.Context, wf workflow.Workflow, t Thread, env Env) (Result, error) {
	if t.StartHash == "" {
		return Result{}, errors.New("executor: thread has no start node; call Begin first")
	}
	logPath := e.Layout.InfoLog(t.BundleHash, t.ID)
	dlog := NewDebugLog(logPath, e.now)
	r := &run{e: e, cas: e.CAS.Batched(), t: t, env: env, log: dlog, head: t.StartHash, ancestors: nil}
	// A context ended before the run began is a kill of a thread no
	// engine was running (an interrupted one): nothing was in flight.
	r.idle = ctx.Err() != nil
	if t.Resume != nil {
		r.head, r.ancestors = t.Resume.Head, t.Resume.HeadAncestors
	}
	dlog.Write(TagStarted, fmt.Sprintf("thread %s started (workflow %s, depth %d, %d steps already done)", t.ID, t.WorkflowName, t.Depth, len(r.steps())))
	r.loadOversight()

	tc := workflow.ThreadContext{
		ThreadID: t.ID, Depth: t.Depth, BundleHash: t.BundleHash,
		Start: workflow.StartStep{Role: node.RoleStart, Content: t.Prompt, Timestamp: e.now().UnixMilli(), ParentState: t.ParentState},
		Steps: r.steps(),
	}
	wrun, err := wf.Start(ctx, tc, r)
	if err != nil {
		return r.stopped(ctx, err)
	}
	defer func() {
		// By now the thread's outcome is recorded; a run that cannot be
		// released is worth a line in its debug log, not a different result.
		if err := wrun.Close(); err != nil {
			dlog.Write(TagError, fmt.Sprintf("thread %s: releasing the workflow run: %v", t.ID, err))
		}
	}()
	for {
		if ctx.Err() != nil {
			return r.stopped(ctx, ctx.Err())
		}
		r.inStep = true
		out, done, err := wrun.Next(ctx)
		if err != nil {
			return r.stopped(ctx, err)
		}
		r.inStep = false
		if done != nil {
			summary := r.summarize(ctx, done.Summary)
			if ctx.Err() != nil {
				return r.stopped(ctx, ctx.Err())
			}
			return r.finish(done.ReturnCode, summary)
		}
		if err := r.appendStep(out); err != nil {
			return r.stopped(ctx, err)
		}
		r.stepDone(out)
		r.role.Store(nil)
		if env.Pause != nil {
			r.atGate = true
			if err := env.Pause.Wait(ctx, r.stepCount()); err != nil {
				return r.stopped(ctx, err)
			}
			r.atGate = false
		}
		if r.supervise(ctx) {
			return r.finish(1, SummarySupervisorKilled)
		}
	}
}

// run is the state of one thread's execution; it is also the workflow's
// Host.
type run struct {
	e *Executor
	// cas is the executor's store batched for this run: the nodes of a
	// step (the agent's content, the executor's content and state) share
	// one directory sync, made in publish before the index names them.
	cas       *cas.Store
	t         Thread
	env       Env
	log       *DebugLog
	head      string
	ancestors []string // of head when head is a state; nil for the start node
	over      oversight
	// Where the run is, for a killed thread's summary (killedHow): idle
	// is a run that began killed; inStep is set while the workflow runs a
	// step, atGate while the run is at the pause gate (held there when the
	// gate says paused); role is the role in flight when the workflow
	// announced it (RoleBegins, from the workflow's goroutine).
	idle, inStep, atGate bool
	role                 atomic.Pointer[string]
}

// RoleBegins implements workflow.RoleAnnouncer: the pause records and a
// killed thread's summary name the role in flight.
func (r *run) RoleBegins(role string) {
	r.role.Store(&role)
	if r.env.Pause != nil {
		r.env.Pause.roleBegins(role)
	}
}

// stepCount is how many role steps the thread has, those of a resumed
// chain included.
func (r *run) stepCount() int { return int(r.over.stepCount.Load()) }

// killedHow completes "killed ..." in a killed thread's summary: where it
// was, and who killed it when cause says.
func (r *run) killedHow(cause error) string {
	n := r.stepCount()
	var how string
	switch {
	case r.idle:
		how = fmt.Sprintf("after step %d (it was not running)", n)
	case r.atGate && r.env.Pause.Paused():
		how = fmt.Sprintf("while paused after step %d", n)
	case r.inStep:
		how = fmt.Sprintf("during step %d", n+1)
		if role := r.role.Load(); role != nil && *role != "" {
			how += fmt.Sprintf(" (role %s)", *role)
		}
	default:
		how = fmt.Sprintf("after step %d", n)
	}
	var k *killCause
	if errors.As(cause, &k) {
		how += " by " + k.by
	}
	return how
}

func (r *run) steps() []workflow.RoleStep {
	if r.t.Resume == nil {
		return nil
	}
	return r.t.Resume.Steps
}

// CAS implements workflow.Host.
func (r *run) CAS() *cas.Store {
	if r.cas == nil {
		// A run that Run did not build (a test's) batches too.
		r.cas = r.e.CAS.Batched()
	}
	return r.cas
}

// Log implements workflow.Host.
func (r *run) Log(tag, content string) { r.log.Write(tag, content) }

// Getenv implements workflow.Host.
func (r *run) Getenv(name string) string {
	if r.env.Thread != nil {
		return r.env.Thread().Getenv(name)
	}
	if r.env.Getenv == nil {
		return ""
	}
	return r.env.Getenv(name)
}

// ThreadEnv implements threadenv.Carrier: nil without Env.Thread, for the
// runtimes and agents to fall back on the host's own environment.
func (r *run) ThreadEnv() *threadenv.Env {
	if r.env.Thread == nil {
		return nil
	}
	return r.env.Thread()
}

// MemoryBudget implements membudget.Budgeted: the budget of the thread's
// JavaScript, from the host's --memory-budget, else workflow.yaml's
// config.memoryBudget as read when the run began, else the default.
func (r *run) MemoryBudget() int64 {
	configured := ""
	if r.over.cfg != nil {
		configured = r.over.cfg.MemoryBudget
	}
	return membudget.Resolve(configured)
}

// ResolveModel implements agents.Host: a scene or "provider/model"
// reference resolved through workflow.yaml's config, read at use so that
// `setup` takes effect without restarting the host.
func (r *run) ResolveModel(ref string) (registry.Model, error) {
	reg, err := registry.Load(r.e.Layout.RegistryFile())
	if err != nil {
		return registry.Model{}, err
	}
	cfg := reg.Config()
	if cfg == nil {
		return registry.Model{}, errors.New("workflow registry has no global config section (run `uncaged-workflow setup`)")
	}
	m, err := cfg.ResolveRef(ref, r.Getenv)
	return m, r.ThreadEnv().Explain(err)
}

// Extract implements workflow.Host with the LLM extractor of package llm
// and the "extract" model (falling back to models.default) of workflow.yaml.
func (r *run) Extract(ctx context.Context, schema []byte, contentHash string) (workflow.ExtractResult, error) {
	model, err := r.ResolveModel("extract")
	if err != nil {
		return workflow.ExtractResult{}, err
	}
	res, err := llm.Extract(ctx, r.extractClient(model), r.CAS(), schema, contentHash, r.log.Write)
	if err != nil {
		return workflow.ExtractResult{}, err
	}
	tree, err := canonyaml.FromJSON(res.Meta)
	if err != nil {
		return workflow.ExtractResult{}, fmt.Errorf("extract: %w", err)
	}
	meta, ok := tree.(canonyaml.Map)
	if !ok {
		return workflow.ExtractResult{}, errors.New("extract: the model's metadata is not a JSON object")
	}
	return workflow.ExtractResult{Meta: meta, ContentPayload: res.ContentPayload}, nil
}

// RunChild implements workflow.Host.
func (r *run) RunChild(ctx context.Context, name, prompt string) (workflow.ChildResult, error) {
	if r.env.RunChild == nil {
		return workflow.ChildResult{}, errors.New("child workflows are not available here")
	}
	return r.env.RunChild(ctx, ChildParent{ThreadID: r.t.ID, Depth: r.t.Depth, Head: r.head}, name, prompt)
}

// AskHuman implements agents.HumanHost through the engine host (Env.Ask).
func (r *run) AskHuman(ctx context.Context, q agents.HumanQuestion) (agents.HumanAnswer, error) {
	if r.env.Ask == nil {
		return agents.HumanAnswer{}, errors.New("this engine cannot wait for a person's answer (a human role runs only under the engine host)")
	}
	r.log.Write(TagWaiting, fmt.Sprintf("thread %s waits for an answer to role %s", r.t.ID, q.Role))
	a, err := r.env.Ask(ctx, AskRequest{ThreadID: r.t.ID, BundleHash: r.t.BundleHash, Workflow: r.t.WorkflowName, Head: r.head, Question: q})
	if err == nil {
		r.log.Write(TagAnswered, fmt.Sprintf("thread %s: role %s answered by %s", r.t.ID, q.Role, a.By))
	}
	return a, err
}

// link returns the ancestors of the state that follows the head.
func (r *run) link() []string {
	if r.head == r.t.StartHash {
		return node.Ancestors("", nil)
	}
	return node.Ancestors(r.head, r.ancestors)
}

func (r *run) appendStep(out *workflow.Output) error {
	text, err := r.contentText(out.ContentHash)
	if err != nil {
		return fmt.Errorf("role step %s: %w", out.Role, err)
	}
	var artifacts []string
	for _, ref := range out.Refs {
		if ref != out.ContentHash {
			artifacts = append(artifacts, ref)
		}
	}
	content, err := node.NewContent(text, artifacts).Marshal()
	if err != nil {
		return err
	}
	meta := out.Meta
	if meta == nil {
		meta = canonyaml.Map{}
	}
	// The content node and the state node that names it are stored side
	// by side, as __end__'s are (finish): the content's fsync no longer
	// comes before the state's, and publish syncs both names at once.
	contentStored := putAsync(r.CAS(), content)
	return r.publish(node.StatePayload{
		Role: out.Role, Meta: meta, Start: r.t.StartHash, Content: ids.HashBytes(content),
		Ancestors: r.link(), Timestamp: r.e.now().UnixMilli(), ChildThread: out.ChildThread,
	}, fmt.Sprintf("thread %s wrote role %s", r.t.ID, out.Role), contentStored)
}

func (r *run) contentText(hash string) (string, error) {
	n, err := r.CAS().GetNode(hash)
	if errors.Is(err, cas.ErrNotFound) {
		return "", fmt.Errorf("CAS blob missing for contentHash %s", hash)
	}
	if err != nil {
		return "", err
	}
	c, ok := n.(node.Content)
	if !ok {
		return "", fmt.Errorf("contentHash %s is a %s node, not content", hash, n.Type())
	}
	return c.Payload, nil
}

// publish writes a state node and makes it the thread's head. The node is
// written and synced while the thread's new entry waits for threads.json
// to be rewritten; the entry is written only once the node is in place
// (the ready function handed to threads.UpsertAfter) and the CAS
// directory synced after it, so a head that a reader sees is one a power
// cut cannot take back. The threads of a workflow that step at the same
// moment share one rewrite of their index and one sync of the CAS
// directory for all their nodes' names.
//
// beside, when not nil, reports a node the state names that is being
// stored at the same time (its content node); the directory sync
// waits for it.
func (r *run) publish(p node.StatePayload, logLine string, beside <-chan error) error {
	b, err := node.NewState(p).Marshal()
	if err != nil {
		return err
	}
	h := ids.HashBytes(b)
	blobs := r.CAS()
	stored := make(chan error, 1)
	store := func() {
		_, err := blobs.PutBytes(b)
		if beside != nil {
			if berr := <-beside; err == nil {
				err = berr
			}
		}
		stored <- err
	}
	if p.Role == node.RoleEnd {
		// The history, not the index, names an __end__ node, after it is
		// stored and its name synced.
		store()
		err := <-stored
		if err == nil {
			err = blobs.Sync()
		}
		if err != nil {
			return err
		}
	} else {
		// The nodes' names are synced by the index's group, once for
		// every thread whose step it commits.
		go store()
		waited := false
		err := threads.UpsertAfter(r.e.Layout.BundleDir(r.t.BundleHash), r.t.ID,
			threads.Entry{Head: h, Start: r.t.StartHash, UpdatedAt: r.e.now().UnixMilli()},
			func() error { waited = true; return <-stored }, blobs.Dir())
		if !waited {
			// The index was not written: the node's outcome still has to
			// be collected, and reported if it is the first failure.
			if serr := <-stored; err == nil {
				err = serr
			}
		}
		if err != nil {
			return err
		}
	}
	r.head, r.ancestors = h, p.Ancestors
	r.log.Write(TagStep, logLine)
	if r.env.OnStep != nil {
		r.env.OnStep(h)
	}
	return nil
}

// finish writes the __end__ node and moves the thread to history.
func (r *run) finish(code int, summary string) (Result, error) {
	content, err := node.NewContent(summary, nil).Marshal()
	if err != nil {
		return Result{}, err
	}
	// The summary and the __end__ node that names it are stored side by
	// side; publish syncs their names once both are written.
	contentStored := putAsync(r.CAS(), content)
	meta := canonyaml.Map{{Key: "returnCode", Value: code}, {Key: "summary", Value: summary}}
	p := node.StatePayload{Role: node.RoleEnd, Meta: meta, Start: r.t.StartHash, Content: ids.HashBytes(content), Ancestors: r.link(), Timestamp: r.e.now().UnixMilli()}
	if err := r.publish(p, fmt.Sprintf("thread %s finished: returnCode=%d — %s", r.t.ID, code, summary), contentStored); err != nil {
		return Result{}, err
	}
	dir := r.e.Layout.BundleDir(r.t.BundleHash)
	// History first, then the index: a crash in between leaves the thread in
	// both, which readers resolve as finished, instead of in neither.
	if err := threads.AppendHistory(dir, threads.HistoryEntry{ThreadID: r.t.ID, Head: r.head, Start: r.t.StartHash, CompletedAt: p.Timestamp}); err != nil {
		return Result{}, err
	}
	if _, err := threads.Remove(dir, r.t.ID); err != nil {
		return Result{}, err
	}
	return Result{ReturnCode: code, Summary: summary, RootHash: r.head}, nil
}

// stopped ends a run that did not complete normally: a kill ends the thread
// with 130, a host shutdown leaves it resumable, anything else is a failure
// recorded in the __end__ node and the debug log.
func (r *run) stopped(ctx context.Context, err error) (Result, error) {
	cause := context.Cause(ctx)
	switch {
	case ctx.Err() != nil && errors.Is(cause, ErrShutdown):
		r.log.Write(TagKilled, fmt.Sprintf("thread %s left unfinished: %v", r.t.ID, cause))
		return Result{}, ErrLeftRunning
	case ctx.Err() != nil:
		how := r.killedHow(cause)
		r.log.Write(TagKilled, fmt.Sprintf("thread %s killed %s", r.t.ID, how))
		return r.finish(threads.ReturnCodeKilled, SummaryKilled+": killed "+how)
	}
	r.log.Write(TagError, fmt.Sprintf("thread %s failed: %v", r.t.ID, err))
	res, ferr := r.finish(1, failedPrefix+err.Error())
	res.Failure = err.Error()
	if ferr != nil {
		return res, fmt.Errorf("%v (and recording the failure failed: %w)", err, ferr)
	}
	return res, nil
}

var (
	_ agents.Host            = (*run)(nil)
	_ membudget.Budgeted     = (*run)(nil)
	_ threadenv.Carrier      = (*run)(nil)
	_ workflow.RoleAnnouncer = (*run)(nil)
)
