package cluster

import (
	"context"
	"time"
)

// Catching up. A replica that has just (re)connected to NATS knows none of
// the others' connectors until their snapshots, which its hello asks for,
// arrive: a few milliseconds, in which a request for a connector held
// elsewhere would find it unknown and fail. So until the first complete
// snapshot of another replica has arrived, or CatchUpWindow has passed
// since the connection (there may be no other replica), the replica is
// catching up: it is not ready (the gateway's /readyz), and a request for
// a connector it does not know online waits for the snapshots
// (AwaitOnline).

// CatchUpWindow bounds how long a replica that has (re)connected to NATS
// waits for the others' snapshots before it takes what it knows as the
// world.
const CatchUpWindow = 2 * time.Second

// catchUp is the state of catching up: guarded by Cluster.mu.
type catchUp struct {
	// since is when the NATS connection was last (re)made; zero before.
	since time.Time
	// heard says a complete snapshot of another replica arrived since.
	heard bool
	// once says the replica has caught up at least once.
	once bool
	// deafSince is when the NATS connection broke, zero while it is up:
	// the others' silence since then is not theirs (Cluster.alive).
	deafSince time.Time
	// wake is closed, and replaced, whenever the table changes.
	wake chan struct{}
}

// began marks a (re)connection to NATS: the others' snapshots are asked
// for again.
func (c *Cluster) began() {
	c.mu.Lock()
	c.catch.since, c.catch.heard = c.now(), false
	if !c.catch.deafSince.IsZero() {
		// What the others said before the break still holds until their
		// snapshots come again: as if they had spoken when it ended.
		gap := c.catch.since.Sub(c.catch.deafSince)
		for _, p := range c.peers {
			if p.lastSeen.Before(c.catch.deafSince) {
				p.lastSeen = p.lastSeen.Add(gap)
			}
		}
		c.catch.deafSince = time.Time{}
	}
	c.mu.Unlock()
}

// wentDeaf marks the NATS connection broken.
func (c *Cluster) wentDeaf() {
	c.mu.Lock()
	if c.catch.deafSince.IsZero() {
		c.catch.deafSince = c.now()
	}
	c.mu.Unlock()
}

// tableChanged wakes the waiters of AwaitOnline; c.mu is held.
func (c *Cluster) tableChanged(completeSnapshot bool) {
	if completeSnapshot {
		c.catch.heard = true
	}
	close(c.catch.wake)
	c.catch.wake = make(chan struct{})
}

// CaughtUp says whether this replica has known the others' connectors
// since it started: a snapshot of another replica arrived after its
// first connection to NATS, or CatchUpWindow passed. It stays true across
// reconnections, whose catching up only requests wait for
// (AwaitOnline): readiness that every replica lost at once on a NATS
// blip would take them all out of their balancer together.
func (c *Cluster) CaughtUp() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.catch.once && c.caughtUpLocked(c.now()) {
		c.catch.once = true
	}
	return c.catch.once
}

func (c *Cluster) caughtUpLocked(now time.Time) bool {
	return !c.catch.since.IsZero() && (c.catch.heard || now.Sub(c.catch.since) >= CatchUpWindow)
}

// AwaitOnline is Lookup, except that while this replica is catching up a
// name not online anywhere it knows is waited for: until another replica
// announces it online, the replica has caught up, or ctx ends.
func (c *Cluster) AwaitOnline(ctx context.Context, name string) (r Route, known bool) {
	for {
		r, known = c.Lookup(name)
		if r.Online {
			return r, known
		}
		c.mu.RLock()
		now := c.now()
		caught, wake := c.caughtUpLocked(now), c.catch.wake
		left := CatchUpWindow - now.Sub(c.catch.since)
		if c.catch.since.IsZero() {
			left = CatchUpWindow // not connected yet: the connection starts the window
		}
		c.mu.RUnlock()
		if caught {
			return r, known
		}
		t := time.NewTimer(left)
		select {
		case <-wake:
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return r, known
		}
		t.Stop()
	}
}
