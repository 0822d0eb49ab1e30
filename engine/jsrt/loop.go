package jsrt

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/dop251/goja"

	"github.com/uncaged/workflow/engine/membudget"
)

// loop is a run's event loop. goja is not goroutine-safe, so everything
// that touches the runtime — evaluating the bundle, stepping the generator,
// timer callbacks, settling promises for Go work — happens inside
// runUntil, which only ever runs under the run's mutex: one goroutine at a
// time, and the JavaScript world stands still between steps. Go work
// (HTTP, processes, child workflows, timers) runs on its own goroutines and
// hands its result back with post; the result is applied the next time the
// loop runs.
type loop struct {
	vm         *goja.Runtime
	bundleName string // for locating exceptions

	// ctx is cancelled when the run is killed or closed: in-flight Go work
	// (requests, child processes, child workflows) watches it.
	ctx    context.Context
	cancel context.CancelFunc

	mu     sync.Mutex
	queue  []func() error // posted by any goroutine, run on the loop
	closed bool
	wake   chan struct{} // capacity 1: "the queue may be non-empty"

	// refs counts what can still post work: pending Go calls, ref'd timers,
	// live child processes. Loop-only, like everything below.
	refs int
	// fatal is an exception no JavaScript caught (a throwing timer
	// callback): the run is over, as a Node process would be.
	fatal error

	killed atomic.Bool // set before the interrupt, read after it lands
	// exceeded is why the memory watchdog stopped the run, if it did; set
	// before killed.
	exceeded atomic.Pointer[membudget.ExceededError]
	// acct is the run's standing with the memory watchdog: the loop tells
	// it when its goroutine executes, so that what is allocated meanwhile
	// is charged to this run and not to threads waiting on agents.
	acct     *membudget.Account
	workers  sync.WaitGroup
	cleanups []func() // resources to release on kill and close, in order

	timers      map[int64]*timer
	nextTimerID int64
}

// errKilled is the interrupt value; Next turns it into ctx.Err().
var errKilled = errors.New("workflow run killed")

func newLoop(vm *goja.Runtime, bundleName string) *loop {
	ctx, cancel := context.WithCancel(context.Background())
	return &loop{
		vm:         vm,
		bundleName: bundleName,
		ctx:        ctx,
		cancel:     cancel,
		wake:       make(chan struct{}, 1),
		timers:     map[int64]*timer{},
	}
}

// post queues fn to run on the loop. It never blocks and may be called
// from any goroutine; after close the job is dropped.
func (l *loop) post(fn func() error) {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return
	}
	l.queue = append(l.queue, fn)
	l.mu.Unlock()
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

func (l *loop) take() []func() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	q := l.queue
	l.queue = nil
	return q
}

// goWork runs work on a new goroutine and applies its result on the loop.
// The loop stays alive (refs) until the result is applied. work must
// return promptly once ctx is cancelled; finish runs on the loop and is
// skipped when the loop has closed.
func (l *loop) goWork(work func(ctx context.Context) (finish func() error)) {
	l.refs++
	l.workers.Add(1)
	go func() {
		defer l.workers.Done()
		finish := work(l.ctx)
		l.post(func() error {
			l.refs--
			if finish == nil {
				return nil
			}
			return finish()
		})
	}()
}

// hold keeps the loop alive until the returned release is called (on the
// loop), for resources like child processes whose end is posted later.
func (l *loop) hold() (release func()) {
	l.refs++
	done := false
	return func() {
		if !done {
			done = true
			l.refs--
		}
	}
}

// onCleanup registers fn to run when the run is killed or closed.
func (l *loop) onCleanup(fn func()) {
	l.mu.Lock()
	l.cleanups = append(l.cleanups, fn)
	l.mu.Unlock()
}

// kill stops the run from any goroutine: JavaScript is interrupted even in
// the middle of `while (true) {}`, and Go work is cancelled.
func (l *loop) kill() {
	if l.killed.Swap(true) {
		return
	}
	l.vm.Interrupt(errKilled)
	l.cancel()
	l.runCleanups()
}

// exceed stops the run because it holds more memory than its budget: a
// kill whose error is e. The watchdog calls it from its own goroutine.
func (l *loop) exceed(e *membudget.ExceededError) {
	l.exceeded.Store(e)
	if l.killed.Swap(true) {
		return
	}
	l.vm.Interrupt(e)
	l.cancel()
	l.runCleanups()
}

// killedErr is what a killed run reports when its caller did not cancel
// it: the memory budget it exceeded, or errKilled.
func (l *loop) killedErr() error {
	if e := l.exceeded.Load(); e != nil {
		return e
	}
	return errKilled
}

func (l *loop) runCleanups() {
	l.mu.Lock()
	cs := l.cleanups
	l.cleanups = nil
	l.mu.Unlock()
	for _, c := range cs {
		c()
	}
}

// close kills the run and waits for its goroutines. Loop-only.
func (l *loop) close() {
	l.kill()
	l.mu.Lock()
	l.closed = true
	l.queue = nil
	l.mu.Unlock()
	l.stopTimers()
	l.workers.Wait()
}

// runUntil runs JavaScript — first start, then posted jobs — until done
// reports true, an exception escapes, or ctx is cancelled, in which case
// the run is killed and the error wraps ctx.Err(). It must be called with
// the run's mutex held.
func (l *loop) runUntil(ctx context.Context, start func() error, done func() bool) error {
	if l.killed.Load() {
		return l.killedErr()
	}
	if ctx.Err() != nil {
		l.kill()
	}
	stop := context.AfterFunc(ctx, l.kill)
	l.acct.Enter()
	err := l.drive(ctx, start, done)
	l.acct.Leave()
	if !stop() && ctx.Err() != nil {
		l.kill() // the context fired; make sure the kill is complete before reporting it
	}
	if l.killed.Load() {
		l.stopTimers()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return l.killedErr()
	}
	return err
}

func (l *loop) drive(ctx context.Context, start func() error, done func() bool) error {
	if start != nil {
		if err := l.guard(start); err != nil {
			return err
		}
	}
	for {
		if l.fatal != nil {
			return l.fatal
		}
		if done() {
			return nil
		}
		jobs := l.take()
		if len(jobs) == 0 {
			if l.refs <= 0 {
				return ErrStalled
			}
			// Waiting for Go work is not executing: nothing allocated
			// meanwhile is this run's doing.
			l.acct.Leave()
			select {
			case <-l.wake:
			case <-ctx.Done():
				return ctx.Err()
			case <-l.ctx.Done():
				// Killed from another goroutine (Close, the memory
				// watchdog) while only timers were pending: nothing would
				// wake the loop.
				return errKilled
			}
			l.acct.Enter()
			continue
		}
		for i, job := range jobs {
			if err := l.guard(job); err != nil {
				l.requeue(jobs[i+1:])
				return err
			}
			if l.fatal != nil {
				l.requeue(jobs[i+1:])
				return l.fatal
			}
		}
	}
}

// requeue puts jobs that were taken but not run back at the front.
func (l *loop) requeue(jobs []func() error) {
	if len(jobs) == 0 {
		return
	}
	l.mu.Lock()
	l.queue = append(append([]func() error(nil), jobs...), l.queue...)
	l.mu.Unlock()
}

// guard runs Go code that touches JavaScript values. Reading a property
// can run a getter, which can throw or be interrupted; goja reports that
// by panicking, which here becomes an error instead of a crash.
func (l *loop) guard(f func() error) (err error) {
	defer func() {
		if x := recover(); x != nil {
			if ie, ok := x.(*goja.InterruptedError); ok {
				err = ie
				return
			}
			panic(x)
		}
	}()
	if ex := l.vm.Try(func() { err = f() }); ex != nil {
		return ex
	}
	return err
}

// call invokes a JavaScript function from a loop job. An exception no
// JavaScript catches becomes fatal for the run (as an uncaught exception
// ends a Node process); an interrupt is returned so the loop stops.
func (l *loop) call(fn goja.Callable, this goja.Value, args ...goja.Value) error {
	_, err := fn(this, args...)
	if err == nil {
		return nil
	}
	var ie *goja.InterruptedError
	if errors.As(err, &ie) {
		return err
	}
	if l.fatal == nil {
		l.fatal = &uncaughtError{exceptionError(err, l.bundleName)}
	}
	return nil
}

// uncaughtError marks an exception thrown by a callback (timer, event
// handler) rather than by the generator itself.
type uncaughtError struct{ err error }

func (e *uncaughtError) Error() string { return "uncaught exception: " + e.err.Error() }
func (e *uncaughtError) Unwrap() error { return e.err }
