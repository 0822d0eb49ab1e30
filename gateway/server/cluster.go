package server

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/uncaged/workflow/gateway/cluster"
	"github.com/uncaged/workflow/gateway/legacy"
	"github.com/uncaged/workflow/gateway/metrics"
	"github.com/uncaged/workflow/gateway/presence"
)

// The gateway's side of cluster mode (Options.Cluster): its connectors
// are announced to the other replicas, a request for a connector another
// replica holds is forwarded there, the endpoints list is cluster-wide and
// /readyz follows the NATS connection. Without a cluster none of this runs
// and the request path is unchanged.

// joinCluster hooks the presence registry and the metrics to the cluster.
func (g *Gateway) joinCluster() {
	cl := g.opts.Cluster
	logChange := g.presence.OnChange
	g.presence.OnChange = func(name, status string) {
		if logChange != nil {
			logChange(name, status)
		}
		cl.LocalChanged(name)
	}
	g.metrics.Registry().MustRegister(cl.Collectors()...)
}

// StartCluster joins the cluster of Options.Cluster (a no-op without one).
// Call it once the gateway is built, before serving.
func (g *Gateway) StartCluster() error {
	if g.opts.Cluster == nil {
		return nil
	}
	return g.opts.Cluster.Start(clusterLocal{g})
}

// clusterLocal is this replica's connectors as the cluster sees them.
type clusterLocal struct{ g *Gateway }

func (l clusterLocal) List() []presence.Endpoint { return l.g.presence.List() }

// Replace lets go of the local connection a newer one on another replica
// replaces: a tunnel is retired (move.go), so what is in flight on it
// finishes; an original client's socket is closed. The reason starts
// with "replaced", as for a replacement here, or with "moved" when this
// replica asked the connector to move.
func (l clusterLocal) Replace(name, replica, reason string) {
	conn, online, _ := l.g.presence.Get(name)
	if !online {
		return
	}
	t, ok := conn.(*tracked)
	if !ok || t.protocol != metrics.ProtocolH2 {
		l.g.opts.Logger.Info("connector replaced on another replica", "connector", name, "reason", reason)
		_ = conn.Close(reason) // the connection is dropped either way
		return
	}
	if t.moving.Load() {
		reason = movedReason(replica)
	} else {
		l.g.opts.Logger.Info("connector replaced on another replica", "connector", name, "reason", reason)
	}
	go l.g.retire(name, t, reason)
}

// Registered applies an original client's registration made on another
// replica: this one may hold (or get) the client's socket.
func (l clusterLocal) Registered(r legacy.Registration) {
	l.g.registrations.Apply(r, time.Now())
}

// shareRegistration tells the other replicas of an original client's
// registration (or, Removed, of its end).
func (g *Gateway) shareRegistration(r legacy.Registration) {
	if g.opts.Cluster != nil {
		g.opts.Cluster.ShareRegistration(r)
	}
}

// forwardInCluster handles a dashboard request in cluster mode when the
// connector is not here: it forwards it to the replica holding the
// connector, or answers 503 when the cluster knows it only offline.
// handled is false when the local path is to serve the request: the
// connector is here, nobody knows it (404 follows), or the request was
// already forwarded once (it is never forwarded again).
func (g *Gateway) forwardInCluster(c echo.Context, name string, timed *deadlineBody) (handled bool, err error) {
	cl := g.opts.Cluster
	r := c.Request()
	if r.Header.Get(cluster.HopHeader) != "" {
		if _, err := cl.VerifyHop(r); err != nil {
			g.metrics.AuthFailure(metrics.AuthInvalid)
			return true, echo.NewHTTPError(http.StatusUnauthorized, err.Error())
		}
		// The connector has no business with it.
		r.Header.Del(cluster.HopHeader)
		return false, nil
	}
	if _, online, _ := g.presence.Get(name); online {
		return false, nil
	}
	// A replica catching up with the others (it has just started) waits
	// for their snapshots rather than calling the connector unknown.
	route, known := cl.AwaitOnline(r.Context(), name)
	switch {
	case !known:
		return false, nil
	case !route.Online:
		return true, g.connectorOffline(c, name)
	case r.ContentLength > g.opts.MaxBody:
		return true, echo.NewHTTPError(http.StatusRequestEntityTooLarge, "request body too large")
	}
	ctx := r.Context()
	if !isStream(r) {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, g.opts.RequestTimeout)
		defer cancel()
	}
	// Kept until the holder acts on it, to be sent again if it does not.
	// What is kept is given back once this replica has answered; served
	// here instead (the connector came here), the body is read from it.
	if rp := cluster.Replayable(r); rp != nil {
		defer func() {
			if handled {
				rp.Release()
			}
		}()
	}
	if hook := g.beforeForward.Load(); hook != nil {
		(*hook)(name)
	}
	hold := time.Now().Add(ReconnectHold)
	for {
		outcome := cl.Forward(interim{c.Response()}, r.WithContext(ctx), route)
		if outcome == cluster.Answered {
			break
		}
		// Not acted on: the holder is gone (killed: nothing answers at
		// its address; its connector is reconnecting through another
		// replica, maybe this one), or the connector left it after this
		// replica looked (a move). Wait for the connector where it goes.
		switch {
		case r.Context().Err() != nil:
			return true, nil // the client went away: nobody to answer
		case ctx.Err() != nil && outcome == cluster.NotHeld:
			return true, echo.NewHTTPError(http.StatusGatewayTimeout,
				fmt.Sprintf("connector %s left replica %s and did not reach another in time", name, route.Replica))
		case ctx.Err() != nil:
			return true, echo.NewHTTPError(http.StatusGatewayTimeout,
				fmt.Sprintf("connector %s did not reconnect in time: replica %s that held it is unreachable", name, route.Replica))
		case !time.Now().Before(hold) && outcome == cluster.NotHeld:
			return true, g.connectorOffline(c, name)
		case !time.Now().Before(hold):
			return true, echo.NewHTTPError(http.StatusBadGateway,
				fmt.Sprintf("replica %s holding connector %s is unreachable, and the connector did not reconnect elsewhere within %s", route.Replica, name, ReconnectHold))
		}
		var here bool
		if route, here = g.awaitReconnect(ctx, name, route.Replica, hold, outcome == cluster.NotHeld); here {
			return false, nil // r's body reads from its first byte again
		}
		if !route.Online {
			return true, g.connectorOffline(c, name)
		}
	}
	if !c.Response().Committed && timed.cutShort(r.Context()) {
		return true, errBodyTimeout
	}
	return true, nil
}

// ReconnectHold bounds how long a request waits for a connector whose
// replica vanished to reconnect elsewhere: a connector redials at once,
// and is registered in about a second.
const ReconnectHold = 5 * time.Second

// reconnectPoll is how often a held request looks at this replica's own
// connectors, which have no change signal of their own; the others' table
// wakes it when it changes.
const reconnectPoll = 20 * time.Millisecond

// awaitReconnect waits, until hold or ctx's end, for name to be online
// here (here) or on a replica other than gone (route), or, when left
// (gone said it no longer holds name, and is alive to announce what
// became of it), for the cluster to know name offline. When hold comes
// first, route is where the cluster places name then, which may be gone
// again (back, or not yet known dead): one last attempt decides. Not
// online: nowhere.
func (g *Gateway) awaitReconnect(ctx context.Context, name, gone string, hold time.Time, left bool) (route cluster.Route, here bool) {
	cl := g.opts.Cluster
	ctx, cancel := context.WithDeadline(ctx, hold)
	defer cancel()
	tick := time.NewTicker(reconnectPoll)
	defer tick.Stop()
	for {
		changed := cl.Changed()
		if _, online, _ := g.presence.Get(name); online {
			return cluster.Route{}, true
		}
		route, _ = cl.Lookup(name)
		if (route.Online && route.Replica != gone) || (left && !route.Online) {
			return route, false
		}
		select {
		case <-changed:
		case <-tick.C:
		case <-ctx.Done():
			return route, false
		}
	}
}

// endpoints is GET /api/gateway/endpoints: this gateway's connectors, or
// in cluster mode the whole cluster's, each with the replica holding it.
func (g *Gateway) endpoints(c echo.Context) error {
	ctx := c.Request().Context()
	if g.opts.Cluster == nil {
		return c.JSON(http.StatusOK, withRemembered(ctx, g, g.withoutUnregistered(g.withURLClients(g.presence.List())), // known.go
			func(e presence.Endpoint) string { return e.Name }, func(e presence.Endpoint) presence.Endpoint { return e }))
	}
	return c.JSON(http.StatusOK, withRemembered(ctx, g, listed(g, g.opts.Cluster.Endpoints(g.withURLClients(g.presence.List())),
		func(e cluster.Endpoint) (string, string) { return e.Name, e.Protocol }),
		func(e cluster.Endpoint) string { return e.Name }, func(e presence.Endpoint) cluster.Endpoint { return cluster.Endpoint{Endpoint: e} }))
}

// ready is GET /readyz. The rule: a replica that can serve its own
// tunnels is ready. So it is not ready while it stops (its connectors are
// moving away, move.go), before it has first caught up with the other
// replicas (it would not find their connectors), or while its store is
// not the database it opened (bounds.go: its tokens are not what it
// serves by). An outage of what every replica shares — NATS, the
// database's reachability — is reported in the body, never as not ready:
// failing them all at once would empty the balancer.
func (g *Gateway) ready(c echo.Context) error {
	if g.stopping.Load() {
		return c.JSON(http.StatusServiceUnavailable, map[string]any{"ok": false, "error": "stopping: this replica's connectors are moving to the others"})
	}
	cl := g.opts.Cluster
	if cl != nil && !cl.CaughtUp() {
		why := "catching up: waiting for the other replicas' connectors"
		if !cl.Connected() {
			why = "not connected to NATS yet"
		}
		return c.JSON(http.StatusServiceUnavailable, map[string]any{"ok": false, "error": why})
	}
	if problem := g.storeProblem(); problem != "" {
		return c.JSON(http.StatusServiceUnavailable, map[string]any{"ok": false, "error": "store: " + problem})
	}
	body := g.readyBody()
	if cl != nil {
		nats := map[string]any{"status": "connected", "peers": cl.Peers()}
		if !cl.Connected() {
			// Every replica shares NATS: failing readiness for it would
			// take them all out of their balancer at once. A replica cut
			// off from it still serves its own tunnels, and forwards by
			// what the others said last.
			nats["status"] = "disconnected"
			nats["detail"] = "serving this replica's tunnels, and the others' by their last known presence"
		}
		body["nats"] = nats
	}
	return c.JSON(http.StatusOK, body)
}
