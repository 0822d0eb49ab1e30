// Package fakeclock is a clock a test drives: time stands still until the
// test advances it, and timers fire as it passes their deadline, in the
// advancing goroutine. It satisfies auth.Clock, so a test can make a
// credential expire without waiting for it.
package fakeclock

import (
	"sort"
	"sync"
	"time"
)

// Clock is a driven clock; the zero value is not ready, use New.
type Clock struct {
	mu     sync.Mutex
	now    time.Time
	timers map[*timer]struct{}
}

type timer struct {
	at time.Time
	f  func()
}

// New returns a clock standing at start.
func New(start time.Time) *Clock {
	return &Clock{now: start, timers: map[*timer]struct{}{}}
}

// Now is the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// AfterFunc runs f once the clock has been advanced by d; a d of zero or
// less runs it at the next Advance. stop cancels it and reports whether
// it had not run yet.
func (c *Clock) AfterFunc(d time.Duration, f func()) (stop func() bool) {
	t := &timer{at: c.Now().Add(d), f: f}
	c.mu.Lock()
	c.timers[t] = struct{}{}
	c.mu.Unlock()
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		_, pending := c.timers[t]
		delete(c.timers, t)
		return pending
	}
}

// Advance moves the clock on by d and runs, in deadline order, every
// timer whose deadline it reached, before returning.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	var due []*timer
	for t := range c.timers {
		if !t.at.After(c.now) {
			due = append(due, t)
			delete(c.timers, t)
		}
	}
	c.mu.Unlock()
	sort.Slice(due, func(i, j int) bool { return due[i].at.Before(due[j].at) })
	for _, t := range due {
		t.f()
	}
}

// Pending counts the timers that have not run nor been stopped.
func (c *Clock) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}
