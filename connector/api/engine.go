package api

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/uncaged/workflow/engine/host"
	"github.com/uncaged/workflow/engine/host/wake"
	"github.com/uncaged/workflow/engine/storage"
)

// HostEngine is the Engine of a storage root's engine host, reached through
// its control socket. Reads (Running) and Pause never start a host: with
// none running, nothing runs and there is nothing to pause. Run, Fork, Kill
// and Resume start one with the spawn function given to NewHostEngine when
// none runs, as the CLI does.
//
// One client is kept and reused while the host answers (each host.Dial
// makes a new HTTP transport, and the live route asks what runs at each
// change); it is dropped when the host stops answering. The host's change
// stream (host.Client.Changes) is opened through it too: HostEngine is
// the API's changeSource (wake.go).
//
// Threads it runs, forks and resumes get the connector's own environment
// and working directory (connectorCaller), whichever command started the
// host: what `connect` and `serve` were started with, less the credential
// variables `connect` takes out of its environment before serving.
type HostEngine struct {
	layout storage.Layout
	spawn  func() error
	// appeared holds a token once a client is made to a host, which may
	// be one that has just started: whoever waits to subscribe to a host
	// (wakeHub) then tries at once instead of at its next turn.
	appeared chan struct{}

	mu     sync.Mutex
	client *host.Client
}

var _ Engine = (*HostEngine)(nil)

// NewHostEngine returns the Engine of l's host. spawn starts a host in the
// background (host.SpawnSelf in production); nil never starts one, so the
// actions fail while no host runs.
func NewHostEngine(l storage.Layout, spawn func() error) *HostEngine {
	return &HostEngine{layout: l, spawn: spawn, appeared: make(chan struct{}, 1)}
}

// get returns the cached client or dials one; ensure starts a host first
// when none answers and spawn is set.
func (e *HostEngine) get(ensure bool) (*host.Client, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.client != nil {
		return e.client, nil
	}
	var c *host.Client
	var err error
	if ensure && e.spawn != nil {
		c, err = host.Ensure(e.layout, e.spawn)
	} else {
		c, err = host.Dial(e.layout)
	}
	if err != nil {
		return nil, err
	}
	c.SetCaller(connectorCaller)
	e.client = c
	select {
	case e.appeared <- struct{}{}:
	default: // a token waits already
	}
	return c, nil
}

// connectorCaller is this process — the connector — as the caller of a
// thread, its environment read at each request.
func connectorCaller() *host.Caller {
	c := host.CommandCaller("connector")
	c.Origin = fmt.Sprintf("the connector's environment (pid %d)", os.Getpid())
	// Whoever asked the API (the dashboard, a script) is not known here.
	c.Requester = fmt.Sprintf("the connector's API (the dashboard or another client of it; pid %d)", os.Getpid())
	return c
}

// dropIfGone drops the cached client c after a failed call when the host
// no longer answers, so the next call dials (or starts) a fresh one, and
// reports whether it did. An error the host itself answered (thread not
// running, unknown role) keeps the client.
func (e *HostEngine) dropIfGone(c *host.Client) bool {
	if _, err := c.Status(); err == nil {
		return false
	}
	c.Close()
	e.mu.Lock()
	if e.client == c {
		e.client = nil
	}
	e.mu.Unlock()
	return true
}

// call runs op on a client. When the cached client turns out to talk to a
// host that is gone, it is dropped, and op is tried once more on a fresh
// one if retry says op is safe to repeat (Run and Fork are not: the first
// attempt may have started a thread).
func (e *HostEngine) call(ensure, retry bool, op func(*host.Client) error) error {
	for attempt := 0; ; attempt++ {
		c, err := e.get(ensure)
		if err != nil {
			return err
		}
		if err = op(c); err == nil || !e.dropIfGone(c) || !retry || attempt > 0 {
			return err
		}
	}
}

// Run implements Engine.
func (e *HostEngine) Run(workflow, prompt string) (string, error) {
	var id string
	err := e.call(true, false, func(c *host.Client) (err error) {
		id, err = c.Run(host.RunRequest{Workflow: workflow, Prompt: prompt})
		return err
	})
	return id, err
}

// Fork implements Engine.
func (e *HostEngine) Fork(id string, req host.ForkRequest) (string, error) {
	var newID string
	err := e.call(true, false, func(c *host.Client) (err error) {
		newID, err = c.Fork(id, req)
		return err
	})
	return newID, err
}

// Kill implements Engine.
func (e *HostEngine) Kill(id string) error {
	return e.call(true, true, func(c *host.Client) error { return c.Kill(id) })
}

// Resume implements Engine.
func (e *HostEngine) Resume(id string) error {
	return e.call(true, true, func(c *host.Client) error { return c.Resume(id) })
}

// Pause implements Engine. With no host running, the thread is not running.
func (e *HostEngine) Pause(id string) error {
	err := e.call(false, true, func(c *host.Client) error { return c.Pause(id) })
	if errors.Is(err, host.ErrNoHost) {
		return fmt.Errorf("thread not running: %s", id)
	}
	return err
}

// Answer implements Engine. It starts a host when none runs: the thread
// waits with no host, and the answer starts it again.
func (e *HostEngine) Answer(id string, req host.AnswerRequest) (out host.Answered, err error) {
	// Not retried: the first attempt may have recorded the answer.
	err = e.call(true, false, func(c *host.Client) (err error) {
		out, err = c.Answer(id, req)
		return err
	})
	return out, err
}

// Running implements Engine: no host means nothing runs.
func (e *HostEngine) Running() ([]host.RunningThread, error) {
	var out []host.RunningThread
	err := e.call(false, true, func(c *host.Client) (err error) {
		out, err = c.List()
		return err
	})
	if errors.Is(err, host.ErrNoHost) {
		return nil, nil
	}
	return out, err
}

// Changes implements wake.Source: the host's change stream, through the
// cached client. A host that turns out to be gone (one stopping refuses
// connections before its socket goes) has its client dropped, as after
// any other call, and is ErrNoHost.
func (e *HostEngine) Changes(ctx context.Context) (*host.ChangeStream, error) {
	c, err := e.get(false)
	if err != nil {
		return nil, err
	}
	stream, err := c.Changes(ctx)
	if err != nil && !errors.Is(err, host.ErrNoChangeStream) && ctx.Err() == nil && e.dropIfGone(c) {
		return nil, fmt.Errorf("%w (%v)", host.ErrNoHost, err)
	}
	return stream, err
}

// HostAppeared implements wake.Source.
func (e *HostEngine) HostAppeared() <-chan struct{} { return e.appeared }

var _ wake.Source = (*HostEngine)(nil)

// OnceEngine is an Engine that can start a thread at most once per
// idempotency key (host.RunRequest.IdempotencyKey), the key kept where
// every start of the storage root is decided: its engine host. An Engine
// that is not one refuses runs with a key (501) rather than ignore it.
type OnceEngine interface {
	RunOnce(req host.RunRequest) (host.RunOutcome, error)
}

var _ OnceEngine = (*HostEngine)(nil)

// RunOnce implements OnceEngine. Unlike Run, it is sent again to a fresh
// host when the one it reached turns out to be gone: with the key, a
// repeat cannot start a second thread.
func (e *HostEngine) RunOnce(req host.RunRequest) (host.RunOutcome, error) {
	var out host.RunOutcome
	err := e.call(true, req.IdempotencyKey != "", func(c *host.Client) (err error) {
		out, err = c.RunOnce(req)
		return err
	})
	return out, err
}
