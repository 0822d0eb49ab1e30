package host

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/uncaged/workflow/engine/atomicfile"
	"github.com/uncaged/workflow/engine/executor"
	"github.com/uncaged/workflow/engine/ids"
	"github.com/uncaged/workflow/engine/procgroup"
	"github.com/uncaged/workflow/engine/questions"
	"github.com/uncaged/workflow/engine/registry"
	"github.com/uncaged/workflow/engine/storage"
	"github.com/uncaged/workflow/engine/threadenv"
	"github.com/uncaged/workflow/engine/threads"
	"github.com/uncaged/workflow/engine/workflow"
)

// ErrHostRunning is returned by Open when another process hosts the root.
var ErrHostRunning = errors.New("an engine host is already running for this storage root")

// DefaultMaxThreads is how many top-level threads run at once by default.
const DefaultMaxThreads = 8

// DefaultMaxDepth limits child-workflow nesting when workflow.yaml sets no
// config.maxDepth.
const DefaultMaxDepth = 3

// Options configure a host.
type Options struct {
	Layout storage.Layout
	// Load returns the workflow of a bundle hash (package jsrt in
	// production). It should cache: it is called for every thread.
	Load func(bundleHash string) (workflow.Workflow, error)
	// Getenv is the host's own environment, which threads run with when
	// their request names no Caller (nil: os.Getenv). Requests from the
	// CLI and the connector's API name one.
	Getenv func(string) string
	// MaxThreads caps concurrently running top-level threads; more wait
	// their turn (0: DefaultMaxThreads). Child threads do not count: their
	// parent already holds a slot.
	MaxThreads int
	// IdleExit stops Serve after this long with no thread running (0: never).
	IdleExit time.Duration
	// Logger receives the host's own log (nil: discard).
	Logger *slog.Logger
}

// Host executes the threads of one storage root.
type Host struct {
	opts      Options
	exec      *executor.Executor
	lock      *os.File
	procs     *procgroup.Tracker // records the agents' process groups
	owner     int                // the uid the host serves: its own
	startedAt time.Time

	baseCtx context.Context
	stop    context.CancelCauseFunc
	sem     chan struct{}
	wg      sync.WaitGroup

	mu       sync.Mutex
	running  map[string]*handle
	lastBusy time.Time
	// admitting holds the threads a resume is starting, or a kill is
	// ending without running them, until they are registered or ended:
	// two requests must never both find a thread idle and both run it
	// (control.go).
	admitting map[string]*claim
	// stopping is set once Stop agreed, or Close began: no thread starts after that.
	stopping bool
	// quit is closed by Stop to end Serve.
	quit     chan struct{}
	quitOnce sync.Once

	// changes are the host's subscribers (changes.go); unwatchLogs stops
	// the debug-log lines of this process reaching them, and streamsEnd is
	// closed when the control API shuts down, ending its change streams.
	changes        changeHub
	unwatchLogs    func()
	streamsEnd     chan struct{}
	streamsEndOnce sync.Once

	// questions are the root's questions; qmu orders asks and answers
	// (questions.go). deadlines counts the waits of threads no run holds
	// whose timeout this host is to act on (under mu): the host does not
	// exit idle before them.
	questions *questions.Store
	qmu       sync.Mutex
	deadlines int

	// keys are the root's idempotency keys (idempotency.go).
	keys *keyStore
}

// handle is one running thread.
type handle struct {
	info   RunningThread
	cancel context.CancelCauseFunc
	gate   *executor.PauseGate
	done   chan struct{}
	unbind func() // stops recording the thread's agents in this host's root
	// env is the thread's environment; a resume replaces it. A child
	// thread shares its parent's.
	env *atomic.Pointer[threadenv.Env]
	// killed is set by the kill that cancels the thread; resumed by a
	// resume that opened its gate, until it is paused again. Both under
	// Host.mu, for the messages of requests that lose a race (control.go).
	killed, resumed bool
	// waiting is the question the thread waits on at a human role, and
	// wake is closed by the answer to it; both nil otherwise (under
	// Host.mu; questions.go).
	waiting *questions.Record
	wake    chan struct{}
	// holdsSlot is set while the thread holds one of the host's thread
	// slots: a top-level thread does, except while it waits for a person.
	holdsSlot atomic.Bool
}

// Open takes the root's host lock. It fails with ErrHostRunning when
// another live process holds it; a lock left by a dead process is free,
// because the kernel drops flocks with their process — no pid file to go
// stale or be reused. Before it returns, whatever agents a dead host left
// running are killed (AgentsDir), so nothing this host runs can overlap
// them.
func Open(opts Options) (*Host, error) {
	if opts.MaxThreads <= 0 {
		opts.MaxThreads = DefaultMaxThreads
	}
	if opts.Getenv == nil {
		opts.Getenv = os.Getenv
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	// The host runs the root's bundles with its user's keys and answers
	// on a socket in it: a root others could change is refused here too,
	// whoever opens the host.
	if err := opts.Layout.Open(); err != nil {
		return nil, err
	}
	f, err := atomicfile.TryLock(LockFile(opts.Layout))
	if errors.Is(err, atomicfile.ErrLocked) {
		return nil, ErrHostRunning
	}
	if err != nil {
		return nil, err
	}
	// The pid is a note for a person looking at the file; the flock is what
	// guards the root, so a note that cannot be written is only logged.
	if err := f.Truncate(0); err != nil {
		opts.Logger.Warn("engine host: cannot note its pid in the lock file", "path", f.Name(), "err", err)
	} else {
		fmt.Fprintf(f, "%d\n", os.Getpid())
	}
	procs, err := procgroup.Open(AgentsDir(opts.Layout), opts.Logger)
	if err != nil {
		releaseLock(f, opts.Logger)
		return nil, err
	}
	procs.KillLeftovers()
	clearStaleMarkers(opts.Layout, opts.Logger)
	ctx, stop := context.WithCancelCause(context.Background())
	now := time.Now()
	h := &Host{
		opts: opts, exec: executor.New(opts.Layout), lock: f, procs: procs, owner: os.Geteuid(), startedAt: now,
		baseCtx: ctx, stop: stop, sem: make(chan struct{}, opts.MaxThreads),
		running: map[string]*handle{}, admitting: map[string]*claim{}, lastBusy: now,
		quit: make(chan struct{}), streamsEnd: make(chan struct{}),
	}
	h.unwatchLogs = executor.WatchAppends(h.logAppended)
	h.questions = questions.Open(opts.Layout)
	h.keys = newKeyStore(opts.Layout, opts.Logger)
	h.keys.sweep()
	h.resumeWaits()
	return h, nil
}

// Running reports whether a live host holds the root's lock.
func Running(l storage.Layout) bool { return atomicfile.Held(LockFile(l)) }

// Serve answers the control API on the root's socket until ctx ends or the
// host has been idle for IdleExit, then stops every thread (they stay
// resumable) and releases the root. Only the user the host runs as may
// use the socket: its file is mode 0600 whatever the umask, and each
// connection's peer is checked, since the socket starts threads with the
// owner's credentials and keys.
func (h *Host) Serve(ctx context.Context) error {
	sock := SocketPath(h.opts.Layout)
	if err := prepareSocketDir(h.opts.Layout, sock); err != nil {
		h.Close()
		return err
	}
	ln, err := listenOwnerOnly(sock)
	if err != nil {
		h.Close()
		return err
	}
	srv := &http.Server{Handler: h.ownerOnly(h.routes()), ReadHeaderTimeout: 10 * time.Second, ConnContext: h.peerContext}
	srv.RegisterOnShutdown(h.endStreams)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	h.opts.Logger.Info("engine host serving", "socket", sock, "pid", os.Getpid(), "maxThreads", h.opts.MaxThreads)

	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case <-h.baseCtx.Done():
			break loop
		case <-h.quit:
			h.opts.Logger.Info("engine host stopping on request")
			break loop
		case err := <-errc:
			h.Close()
			return err
		case <-tick.C:
			if h.opts.IdleExit > 0 && h.idleFor() > h.opts.IdleExit {
				h.opts.Logger.Info("engine host idle, exiting", "idle", h.opts.IdleExit)
				break loop
			}
		}
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		// Connections still open when the grace period ran out; the host
		// stops all the same.
		h.opts.Logger.Warn("engine host: shutting the control API down", "err", err)
	}
	h.Close()
	if err := os.Remove(sock); err != nil && !errors.Is(err, os.ErrNotExist) {
		// Harmless for the next host, which renames its socket over it.
		h.opts.Logger.Warn("engine host: removing the socket", "socket", sock, "err", err)
	}
	return nil
}

func (h *Host) idleFor() time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.running) > 0 || h.deadlines > 0 {
		return 0
	}
	return time.Since(h.lastBusy)
}

// Close stops every running thread without ending it (a later host can
// resume it), waits for them and releases the root.
func (h *Host) Close() {
	h.mu.Lock()
	h.stopping = true // no thread starts that the wait below would miss
	h.mu.Unlock()
	h.stop(executor.ErrShutdown)
	h.wg.Wait()
	h.endStreams()
	h.unwatchLogs() // after the threads' last lines
	if h.procs != nil {
		h.procs.Close()
		h.procs = nil
	}
	if h.lock != nil {
		releaseLock(h.lock, h.opts.Logger)
		h.lock = nil
	}
}

// releaseLock unlocks and closes the host lock file. Closing drops the
// lock even if the unlock failed; a failed Close is logged, as the file
// was written to (the pid note).
func releaseLock(f *os.File, log *slog.Logger) {
	_ = unix.Flock(int(f.Fd()), unix.LOCK_UN)
	if err := f.Close(); err != nil {
		log.Warn("engine host: closing the lock file", "path", f.Name(), "err", err)
	}
}

// Status describes the host.
func (h *Host) Status() Status {
	h.mu.Lock()
	defer h.mu.Unlock()
	return Status{PID: os.Getpid(), StartedAt: h.startedAt.UnixMilli(), Root: h.opts.Layout.Root, Running: len(h.running), MaxThreads: h.opts.MaxThreads}
}

// List returns the threads being executed, oldest first.
func (h *Host) List() []RunningThread {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]RunningThread, 0, len(h.running))
	for _, hd := range h.running {
		info := hd.info
		info.Status = hd.gate.Status()
		if hd.waiting != nil && info.Status == threads.StatusRunning {
			info.Status = threads.StatusWaiting
		}
		out = append(out, info)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ThreadID < out[j].ThreadID })
	return out
}

func (h *Host) registry() (*registry.Registry, error) {
	return registry.Load(h.opts.Layout.RegistryFile())
}

// Run starts a new thread of a registered workflow and returns its id as
// soon as the thread is listed; the thread runs on in the background. A
// request whose idempotency key already started a thread gets that
// thread's id instead, and starts nothing (RunOnce tells which).
func (h *Host) Run(req RunRequest) (string, error) {
	out, err := h.RunOnce(req)
	return out.ThreadID, err
}

// RunOnce is Run that also says whether the request's idempotency key
// had already started the thread (RunOutcome.Replayed): then nothing was
// started. Without a key every run starts a thread.
func (h *Host) RunOnce(req RunRequest) (RunOutcome, error) {
	if err := registry.ValidateName(req.Workflow); err != nil {
		return RunOutcome{}, err
	}
	if req.IdempotencyKey != "" {
		if err := CheckIdempotencyKey(req.IdempotencyKey); err != nil {
			return RunOutcome{}, err
		}
		return h.runKeyed(req)
	}
	plan, err := h.planRun(req)
	if err != nil {
		return RunOutcome{}, err
	}
	id := ids.NewThreadID(time.Now())
	return RunOutcome{ThreadID: id}, h.launch(plan, req, id)
}

// runPlan is what a run needs once its request is found good.
type runPlan struct {
	wf     workflow.Workflow
	bundle string
	env    *threadenv.Env
}

// planRun checks that a thread of req may start now and loads what it
// runs, starting nothing.
func (h *Host) planRun(req RunRequest) (runPlan, error) {
	if err := h.admit(); err != nil {
		return runPlan{}, err
	}
	env, err := h.threadEnv(req.Caller)
	if err != nil {
		return runPlan{}, err
	}
	reg, err := h.registry()
	if err != nil {
		return runPlan{}, err
	}
	e, ok := reg.Get(req.Workflow)
	if !ok {
		return runPlan{}, fmt.Errorf("workflow not registered: %s", req.Workflow)
	}
	wf, err := h.opts.Load(e.Hash)
	if err != nil {
		return runPlan{}, err
	}
	return runPlan{wf: wf, bundle: e.Hash, env: env}, nil
}

// launch lists the thread id of req and runs it in the background.
func (h *Host) launch(p runPlan, req RunRequest, id string) error {
	t := executor.Thread{ID: id, BundleHash: p.bundle, WorkflowName: req.Workflow, Prompt: req.Prompt}
	return h.start(p.wf, t, p.env, false, h.exec.Begin)
}

// Fork starts a fork of thread id (see executor.PrepareFork).
func (h *Host) Fork(id string, req ForkRequest) (string, error) {
	if err := h.admit(); err != nil {
		return "", err
	}
	env, err := h.threadEnv(req.Caller)
	if err != nil {
		return "", err
	}
	rec, err := threads.Resolve(h.opts.Layout, id)
	if err != nil {
		return "", err
	}
	if !h.opts.Layout.HasBundle(rec.BundleHash) {
		return "", fmt.Errorf("bundle file missing for thread hash %s", rec.BundleHash)
	}
	wf, err := h.opts.Load(rec.BundleHash)
	if err != nil {
		return "", err
	}
	var t executor.Thread
	switch {
	case req.Step != 0 && req.FromRole != "":
		return "", errors.New("fork at a step or from a role, not both")
	case req.Step != 0:
		t, err = h.exec.PrepareForkAt(rec, ids.NewThreadID(time.Now()), req.Step)
	default:
		t, err = h.exec.PrepareFork(rec, ids.NewThreadID(time.Now()), req.FromRole)
	}
	if err != nil {
		return "", err
	}
	if err := h.start(wf, t, env, false, func(t *executor.Thread) error { return h.exec.List(*t) }); err != nil {
		return "", err
	}
	return t.ID, nil
}

// start runs t, a top-level thread, in the background under the
// concurrency cap; resumed says a resume starts it. list, for a new
// thread, writes its records (its start node, its line in threads.json):
// it is called once the host lists t as running, and an error from it
// unlists t again.
func (h *Host) start(wf workflow.Workflow, t executor.Thread, env *threadenv.Env, resumed bool, list func(*executor.Thread) error) error {
	// Counted under the lock the host is marked stopping under: a thread
	// starts only if Close will wait for it.
	h.mu.Lock()
	if h.stopping {
		h.mu.Unlock()
		return ErrStopping
	}
	h.wg.Add(1)
	h.mu.Unlock()
	ctx, cancel := context.WithCancelCause(h.baseCtx)
	shared := new(atomic.Pointer[threadenv.Env])
	shared.Store(env)
	hd := h.register(t, "", cancel, shared, resumed, list != nil)
	if list != nil {
		if err := list(&t); err != nil {
			cancel(err)
			h.unregister(t.ID, hd)
			h.wg.Done()
			return err
		}
		h.started(hd)
	}
	go func() {
		defer h.wg.Done()
		defer h.unregister(t.ID, hd)
		select {
		case h.sem <- struct{}{}:
			hd.holdsSlot.Store(true)
			// A wait for a person gives the slot back and takes it again
			// (questions.go): the run ends holding it, or not.
			defer func() {
				if hd.holdsSlot.CompareAndSwap(true, false) {
					<-h.sem
				}
			}()
		case <-ctx.Done():
		}
		res, err := h.exec.Run(ctx, wf, t, h.env(hd))
		h.logOutcome(t, res, err)
	}()
	return nil
}

func (h *Host) logOutcome(t executor.Thread, res executor.Result, err error) {
	switch {
	case errors.Is(err, executor.ErrLeftRunning):
		h.opts.Logger.Info("thread left unfinished for a later resume", "thread", t.ID)
	case err != nil:
		h.opts.Logger.Error("thread stopped with an error", "thread", t.ID, "err", err)
	default:
		h.opts.Logger.Info("thread finished", "thread", t.ID, "returnCode", res.ReturnCode, "summary", res.Summary)
	}
}

// register lists t as running. A new thread (starting) is registered
// before its records are written (start, runChild), and marked Starting
// until they are (started): a reader that reads a thread's records and
// then asks the host which threads run (Sighting) is never told that
// nobody runs a thread that has just begun.
func (h *Host) register(t executor.Thread, parent string, cancel context.CancelCauseFunc, env *atomic.Pointer[threadenv.Env], resumed, starting bool) *handle {
	// The gate writes the pause records to the thread's debug log (its
	// own writer of the file, which serialises writes with the run's).
	// Each pause record is a status change too (gateLog).
	gate := &executor.PauseGate{Log: h.gateLog(t)}
	hd := &handle{
		info: RunningThread{ThreadID: t.ID, BundleHash: t.BundleHash, Workflow: t.WorkflowName, Status: threads.StatusRunning,
			StartedAt: time.Now().UnixMilli(), Depth: t.Depth, Parent: parent, Starting: starting},
		cancel: cancel, gate: gate, done: make(chan struct{}),
		unbind: h.procs.Bind(t.ID), env: env, resumed: resumed,
	}
	// Where the environment came from and its size, never the variables:
	// they hold the caller's keys.
	h.opts.Logger.Debug("thread environment", "thread", t.ID, "from", env.Load().Origin(), "variables", len(env.Load().Names()))
	markRunning(h.opts.Layout, t.BundleHash, t.ID, h.opts.Logger)
	h.mu.Lock()
	h.running[t.ID] = hd
	h.mu.Unlock()
	if !starting {
		h.publishStarted(hd)
	}
	return hd
}

// publishStarted tells subscribers that hd's thread runs, once its
// records are there to read.
func (h *Host) publishStarted(hd *handle) {
	h.publish(Change{Kind: ChangeStarted, ThreadID: hd.info.ThreadID, BundleHash: hd.info.BundleHash, Status: threads.StatusRunning})
}

// started notes that the first records of hd's thread are written.
func (h *Host) started(hd *handle) {
	h.mu.Lock()
	hd.info.Starting = false
	h.mu.Unlock()
	h.publishStarted(hd)
}

func (h *Host) unregister(id string, hd *handle) {
	// Before the host lets go: once it has, a request may start the
	// thread again, and its marker must then be that run's.
	unmarkRunning(h.opts.Layout, hd.info.BundleHash, id, h.opts.Logger)
	h.mu.Lock()
	if h.running[id] == hd {
		delete(h.running, id)
	}
	h.lastBusy = time.Now()
	h.mu.Unlock()
	hd.unbind()
	h.publish(Change{Kind: ChangeEnded, ThreadID: id, BundleHash: hd.info.BundleHash})
	close(hd.done)
}

func (h *Host) env(hd *handle) executor.Env {
	return executor.Env{Thread: hd.env.Load, RunChild: h.runChild, Pause: hd.gate, OnStep: h.stepPublisher(hd.info.ThreadID, hd.info.BundleHash), Ask: h.ask(hd)}
}

// stepPublisher publishes each head a thread's run writes.
func (h *Host) stepPublisher(id, bundle string) func(head string) {
	return func(head string) {
		h.publish(Change{Kind: ChangeStep, ThreadID: id, BundleHash: bundle, Head: head})
	}
}

// threadEnv is the environment a thread runs with for c: the caller's,
// else the host's own. Either way the storage root's variable names this
// host's root, so that the thread's processes find the same root even
// when the command named it with --storage-root rather than the variable.
func (h *Host) threadEnv(c *Caller) (*threadenv.Env, error) {
	var env *threadenv.Env
	if c == nil {
		env = threadenv.FromGetenv(h.opts.Getenv, "", fmt.Sprintf("the engine host's own (pid %d)", os.Getpid()))
	} else {
		if err := threadenv.Check(c.Env, c.Dir); err != nil {
			return nil, fmt.Errorf("the caller's environment: %w", err)
		}
		origin := c.Origin
		if origin == "" {
			origin = "that of the command that asked for the thread"
		}
		env = threadenv.New(c.Env, c.Dir, origin)
	}
	return env.With(storage.EnvRoot, h.opts.Layout.Root), nil
}

func (h *Host) get(id string) (*handle, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	hd, ok := h.running[id]
	return hd, ok
}

// runChild runs a registered workflow as a child of parent, in the caller's
// goroutine and under the caller's context: killing the parent kills it.
func (h *Host) runChild(ctx context.Context, parent executor.ChildParent, name, prompt string) (workflow.ChildResult, error) {
	reg, err := h.registry()
	if err != nil {
		return workflow.ChildResult{}, err
	}
	maxDepth := DefaultMaxDepth
	if c := reg.Config(); c != nil {
		maxDepth = c.MaxDepth
	}
	next := parent.Depth + 1
	if next > maxDepth {
		return workflow.ChildResult{}, fmt.Errorf("%w (max %d)", workflow.ErrDepthLimit, maxDepth)
	}
	e, ok := reg.Get(name)
	if !ok {
		return workflow.ChildResult{}, fmt.Errorf("workflow %q not found in registry", name)
	}
	wf, err := h.opts.Load(e.Hash)
	if err != nil {
		return workflow.ChildResult{}, err
	}
	t := executor.Thread{ID: ids.NewThreadID(time.Now()), BundleHash: e.Hash, WorkflowName: name, Depth: next, ParentState: parent.Head, Prompt: prompt}
	cctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	hd := h.register(t, parent.ThreadID, cancel, h.parentEnv(parent.ThreadID), false, true)
	defer h.unregister(t.ID, hd)
	if err := h.exec.Begin(&t); err != nil {
		return workflow.ChildResult{}, err
	}
	h.started(hd)
	res, err := h.exec.Run(cctx, wf, t, h.env(hd))
	if err != nil {
		return workflow.ChildResult{}, err
	}
	if res.ReturnCode == threads.ReturnCodeKilled && ctx.Err() != nil {
		return workflow.ChildResult{}, context.Cause(ctx)
	}
	// A child that threw fails the role that ran it, so the cause reaches
	// the top; a child that ended with a non-zero code is a result.
	if res.Failure != "" {
		return workflow.ChildResult{}, fmt.Errorf("child workflow %q failed: %s", name, res.Failure)
	}
	return workflow.ChildResult{ReturnCode: res.ReturnCode, Summary: res.Summary, RootHash: res.RootHash, ThreadID: t.ID}, nil
}

// parentEnv is the environment a child thread shares with its parent,
// so that resuming the parent with a new one reaches the child too.
func (h *Host) parentEnv(parent string) *atomic.Pointer[threadenv.Env] {
	if hd, ok := h.get(parent); ok {
		return hd.env
	}
	// The parent always runs while its child does; this is a guard only.
	env, _ := h.threadEnv(nil)
	p := new(atomic.Pointer[threadenv.Env])
	p.Store(env)
	return p
}

// ErrStopping is returned for threads asked for once Stop agreed.
var ErrStopping = errors.New("the engine host is stopping")

// Stop makes Serve end, as a signal would, and returns the threads that
// were running. With threads running it refuses unless force, which stops
// them where they are: they stay resumable. No thread starts once Stop
// agreed.
func (h *Host) Stop(force bool) (StopAnswer, error) {
	h.mu.Lock()
	busy := len(h.running) > 0
	if !busy || force {
		h.stopping = true
	}
	h.mu.Unlock()
	// Once stopping, no thread joins the list: it is the one Close stops.
	running := h.List()
	if busy && !force {
		ids := make([]string, len(running))
		for i, r := range running {
			ids[i] = r.ThreadID
		}
		return StopAnswer{}, fmt.Errorf("%d thread(s) running (%s); stopping the host would interrupt them", len(ids), strings.Join(ids, ", "))
	}
	h.quitOnce.Do(func() { close(h.quit) })
	return StopAnswer{PID: os.Getpid(), Stopped: running}, nil
}

// admit refuses new threads once the host is stopping.
func (h *Host) admit() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stopping {
		return ErrStopping
	}
	return nil
}
