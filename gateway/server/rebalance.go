package server

import (
	"context"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/uncaged/workflow/gateway/metrics"
	"github.com/uncaged/workflow/gateway/presence"
)

// Rebalancing. Connectors stay where they land: after a rolling restart
// the last replica restarted holds none and the one restarted first may
// hold them all, so the next failure of that one takes every machine away
// at once. So every Options.RebalanceEvery a replica that holds more than
// its share of the cluster's connectors — the number online divided by
// the replicas alive, rounded up — asks a few of the excess to move
// (move.go), the ones that joined it last first. While one moves, this
// replica refuses its new tunnel, so the balancer sends it elsewhere; the
// balancer's own choice (least connections, in the shipped
// configurations) then fills the replicas that hold the fewest.

// DefaultRebalanceEvery is how often a replica of a cluster compares what
// it holds with its share, when Options.RebalanceEvery is zero.
const DefaultRebalanceEvery = 30 * time.Second

// movesPerRebalance bounds the connectors one round asks to move: a few
// at a time, so the cluster never sees a wave of reconnections.
const movesPerRebalance = 4

// rebalanceLoop runs the rounds until ctx ends.
func (g *Gateway) rebalanceLoop(ctx context.Context, every time.Duration) {
	for {
		// Jittered, so replicas that started together do not all judge
		// the same stale counts at once.
		wait := every/2 + time.Duration(rand.Int64N(int64(every)))
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		g.rebalance(ctx)
	}
}

// rebalance is one round: the connectors this replica holds beyond its
// share, up to movesPerRebalance, are asked to move.
func (g *Gateway) rebalance(ctx context.Context) {
	cl := g.opts.Cluster
	if cl == nil || g.stopping.Load() || !cl.Connected() || !cl.CaughtUp() || cl.Peers() == 0 {
		return // alone, or not seeing the others: no share to judge by
	}
	local := g.movable()
	total := 0
	for _, e := range cl.Endpoints(g.presence.List()) {
		if e.Status == presence.Online {
			total++
		}
	}
	excess := len(local) - fairShare(total, cl.Peers()+1)
	if excess <= 0 {
		return
	}
	picked := local[:min(excess, movesPerRebalance)]
	g.opts.Logger.Info("rebalancing: asking connectors to move to the other replicas", "held", len(local), "online_in_cluster", total, "replicas", cl.Peers()+1, "moving", len(picked))
	for _, m := range picked {
		go g.moveAway(ctx, m.name, m.t)
	}
}

// fairShare is one replica's share of total connectors over replicas.
func fairShare(total, replicas int) int {
	return (total + replicas - 1) / replicas
}

// movableConn is a connector this replica could ask to move.
type movableConn struct {
	name        string
	t           *tracked
	connectedAt int64
}

// movable lists the connectors here over a tunnel that can move, the
// ones connected last first: they are the ones a rebalance moves.
func (g *Gateway) movable() []movableConn {
	var out []movableConn
	for _, e := range g.presence.List() {
		if e.Status != presence.Online {
			continue
		}
		conn, online, _ := g.presence.Get(e.Name)
		t, ok := conn.(*tracked)
		if !online || !ok || t.protocol != metrics.ProtocolH2 || t.moving.Load() {
			continue
		}
		out = append(out, movableConn{name: e.Name, t: t, connectedAt: e.ConnectedAt})
	}
	slices.SortFunc(out, func(a, b movableConn) int {
		return int(b.connectedAt - a.connectedAt)
	})
	return out
}

// moveAway asks one connector to move, refusing its new tunnel here
// meanwhile so that it lands on another replica.
func (g *Gateway) moveAway(ctx context.Context, name string, t *tracked) {
	g.movingOut.Store(name, true)
	defer g.movingOut.Delete(name)
	ctx, cancel := context.WithTimeout(ctx, moveTimeout)
	defer cancel()
	if g.moveOne(ctx, name, t) {
		return
	}
	t.moving.Store(false) // it stayed: a later round may ask again
}
