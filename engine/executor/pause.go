package executor

import (
	"context"
	"errors"
	"sync"
)

// Errors of PauseGate, worded as the original's.
var (
	ErrAlreadyPaused = errors.New("thread already paused")
	ErrNotPaused     = errors.New("thread not paused")
)

// PauseGate holds a thread between steps. Pausing takes effect after the
// step in flight is persisted, before the workflow is resumed again.
type PauseGate struct {
	mu     sync.Mutex
	paused chan struct{} // non-nil while paused; closed on resume
}

// Pause closes the gate.
func (g *PauseGate) Pause() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.paused != nil {
		return ErrAlreadyPaused
	}
	g.paused = make(chan struct{})
	return nil
}

// Resume opens the gate.
func (g *PauseGate) Resume() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.paused == nil {
		return ErrNotPaused
	}
	close(g.paused)
	g.paused = nil
	return nil
}

// Paused reports whether the gate is closed.
func (g *PauseGate) Paused() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.paused != nil
}

// Wait returns when the gate is open or ctx ends.
func (g *PauseGate) Wait(ctx context.Context) error {
	g.mu.Lock()
	ch := g.paused
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
