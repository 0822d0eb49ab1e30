package cluster

import (
	"context"
	"time"
)

// Catching up. A replica that has just (re)connected to NATS knows none of
// the others' connectors until their snapshots, which its hello asks for,
// arrive: a few milliseconds, in which a request for a connector held
// elsewhere would find it unknown and fail. Each snapshot names the
// replicas its sender hears, so until a snapshot of each replica named
// has arrived, or CatchUpWindow has passed
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
	// heard says the snapshots of every replica known to be alive have
	// arrived since: each snapshot names the replicas its sender hears
	// (expect), and heard is set once each of those has sent one (got).
	heard       bool
	expect, got map[string]bool
	// once says the replica has caught up at least once.
	once bool
	// lastHeard is when a signed message, this replica's own echo
	// included, last arrived: a silence of the others after it is this
	// replica's deafness (a NATS outage, a partition), not theirs
	// (Cluster.heardNow).
	lastHeard time.Time
	// wake is closed, and replaced, whenever the table changes.
	wake chan struct{}
}

// began marks a (re)connection to NATS: the others' snapshots are asked
// for again.
func (c *Cluster) began() {
	c.mu.Lock()
	c.catch.since, c.catch.heard = c.now(), false
	c.catch.expect, c.catch.got = map[string]bool{}, map[string]bool{}
	// What the others said before a deafness still holds until their
	// snapshots come again: as if they had spoken when it ended.
	if gap := c.catch.since.Sub(c.heardNow(c.catch.since)); gap > 0 {
		for _, p := range c.peers {
			p.lastSeen = p.lastSeen.Add(gap)
		}
	}
	c.mu.Unlock()
}

// heard notes a signed message's arrival; c.mu is held.
func (c *Cluster) heard(at time.Time) {
	if at.After(c.catch.lastHeard) {
		c.catch.lastHeard = at
	}
}

// heardNow is now as far as the others' silence goes: no later than an
// interval after this replica last heard anything. It publishes its own
// snapshot every interval and hears it back, so while it hears at all
// that is now; once it hears nothing (NATS down, or a partition that
// NATS's own pings take minutes to notice) the others' clocks stop with
// its hearing. c.mu is held.
func (c *Cluster) heardNow(now time.Time) time.Time {
	if c.catch.lastHeard.IsZero() {
		return now
	}
	if until := c.catch.lastHeard.Add(c.o.Interval); now.After(until) {
		return until
	}
	return now
}

// tableChanged notes what m taught of the others, and wakes the waiters
// of AwaitOnline; c.mu is held.
func (c *Cluster) tableChanged(m message) {
	if c.catch.expect != nil {
		switch {
		case m.Kind == kindSnapshot && !m.More:
			c.catch.got[m.Replica] = true
			for _, id := range m.Peers {
				if id != c.o.ReplicaID {
					c.catch.expect[id] = true
				}
			}
		case m.Kind == kindLeave:
			delete(c.catch.expect, m.Replica)
		}
		if len(c.catch.got) > 0 {
			all := true
			for id := range c.catch.expect {
				all = all && c.catch.got[id]
			}
			c.catch.heard = all
		}
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

// Changed is closed the next time the table of the others' connectors
// changes: a waiter takes it, looks, and waits on it.
func (c *Cluster) Changed() <-chan struct{} {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.catch.wake
}

// AwaitOnline is Lookup, except that while this replica is catching up a
// name not online anywhere it knows is waited for: until another replica
// announces it online, the replica has caught up, or ctx ends.
func (c *Cluster) AwaitOnline(ctx context.Context, name string) (r Route, known bool) {
	for {
		// The route and whether this replica has caught up are read under
		// one lock: read apart, the snapshots that complete the catching
		// up could land in between, and a route read before them would be
		// returned as the caught-up answer.
		c.mu.RLock()
		now := c.now()
		r, known = c.lookupLocked(name, now)
		caught, wake := c.caughtUpLocked(now), c.catch.wake
		left := CatchUpWindow - now.Sub(c.catch.since)
		if c.catch.since.IsZero() {
			left = CatchUpWindow // not connected yet: the connection starts the window
		}
		c.mu.RUnlock()
		if r.Online || caught {
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
