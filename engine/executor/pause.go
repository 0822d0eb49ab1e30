package executor

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/uncaged/workflow/engine/threads"
)

// Errors of PauseGate. The first two are worded as the original's.
var (
	ErrAlreadyPaused = errors.New("thread already paused")
	ErrNotPaused     = errors.New("thread not paused")
	// ErrAlreadyPausing: a pause was asked for and waits for the role in
	// flight to finish its step.
	ErrAlreadyPausing = errors.New("thread already pausing: it stops once the role in flight has finished its step")
)

// Debug-log tags of pausing, written as words: a person reading the log,
// and the dashboard's timeline, find the paused spans by them. A "paused"
// record up to the next "resumed" one is time no step ran.
const (
	TagPausing = "pausing"
	TagPaused  = "paused"
	TagResumed = "resumed"
)

// Debug-log tags of a human role: the thread waits from a "waiting"
// record to the "answered" one (or its end, when the wait ran out).
const (
	TagWaiting  = "waiting"
	TagAnswered = "answered"
)

// PauseGate holds a thread between steps. A pause takes effect only where
// the executor waits at the gate, after the step in flight is persisted:
// until then the thread is pausing (threads.StatusPausing), and a resume
// cancels the pause. Its zero value is an open gate that logs nothing.
type PauseGate struct {
	// Log, when set, receives the thread's pause records (TagPausing,
	// TagPaused, TagResumed); the engine host sets it to the thread's
	// debug log. Set it before the gate is used.
	Log func(tag, content string)
	// Now is the clock (nil: time.Now).
	Now func() time.Time

	mu sync.Mutex
	// opened is non-nil while a pause is asked for or in force, and is
	// closed when the gate opens again.
	opened chan struct{}
	// held is set while the executor waits at the closed gate, since
	// heldAt.
	held   bool
	heldAt time.Time
	// role is the role in flight, as the workflow announced it ("" when
	// none runs or the workflow does not say).
	role string
}

func (g *PauseGate) now() time.Time {
	if g.Now != nil {
		return g.Now()
	}
	return time.Now()
}

func (g *PauseGate) log(tag, content string) {
	if g.Log != nil {
		g.Log(tag, content)
	}
}

// Status is what the gate means for the thread: StatusRunning while open,
// StatusPausing while a pause waits for the role in flight, StatusPaused
// while the executor is held.
func (g *PauseGate) Status() threads.Status {
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case g.held:
		return threads.StatusPaused
	case g.opened != nil:
		return threads.StatusPausing
	}
	return threads.StatusRunning
}

// Pause asks the thread to stop at the gate once the step in flight is
// persisted.
func (g *PauseGate) Pause() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case g.held:
		return ErrAlreadyPaused
	case g.opened != nil:
		return ErrAlreadyPausing
	}
	g.opened = make(chan struct{})
	what := "the step in flight finishes first"
	if g.role != "" {
		what = "role " + g.role + " finishes its step first"
	}
	g.log(TagPausing, "pause requested; "+what)
	return nil
}

// Resume opens the gate: a held thread goes on, and a pause that has not
// taken effect yet is cancelled.
func (g *PauseGate) Resume() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.opened == nil {
		return ErrNotPaused
	}
	if g.held {
		g.log(TagResumed, fmt.Sprintf("resumed after %s paused", pausedFor(g.now().Sub(g.heldAt))))
	} else {
		g.log(TagResumed, "resumed after 0s paused: the pause was cancelled before it took effect")
	}
	close(g.opened)
	g.opened, g.held = nil, false
	return nil
}

// pausedFor rounds a paused span for a person: tenths of a second under a
// minute, whole seconds above.
func pausedFor(d time.Duration) time.Duration {
	if d < time.Minute {
		return d.Round(100 * time.Millisecond)
	}
	return d.Round(time.Second)
}

// Paused reports whether the executor is held at the gate.
func (g *PauseGate) Paused() bool { return g.Status() == threads.StatusPaused }

// roleBegins notes the role the workflow runs now ("" between steps).
func (g *PauseGate) roleBegins(role string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.role = role
}

// Wait is where the executor stops after persisting step: it returns at
// once while no pause is asked for, else when the gate opens or ctx ends.
func (g *PauseGate) Wait(ctx context.Context, step int) error {
	g.mu.Lock()
	g.role = ""
	ch := g.opened
	if ch != nil && !g.held {
		g.held, g.heldAt = true, g.now()
		g.log(TagPaused, fmt.Sprintf("paused after step %d", step))
	}
	g.mu.Unlock()
	if ch == nil {
		return ctx.Err()
	}
	select {
	case <-ch:
		return ctx.Err()
	case <-ctx.Done():
		return ctx.Err()
	}
}
