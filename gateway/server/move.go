package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/uncaged/workflow/gateway/metrics"
	"github.com/uncaged/workflow/shared/tunnel"
)

// Moving connectors between replicas, so a rolling upgrade loses no
// request (docs/operations.md, "Upgrading a cluster").
//
// A replica that is stopping drains: /readyz fails so its balancer sends
// it nothing new, /ws/connect refuses new tunnels (503, Retry-After), and
// it asks each of its connectors to move (tunnel.MovePath). A connector
// dials again, its balancer sends it to another replica, and only once
// that tunnel is up does it answer. The replica it reached announces it,
// which makes this one retire the old tunnel: the registry lets go of it
// (requests now go to where the connector is), its event streams end at
// an event's end so their clients resume there, the requests in flight on
// it finish, and then it is closed. Requests that reach the stopping
// replica meanwhile are forwarded to the connector's new replica.
//
// The same retirement serves any connector another replica announces a
// newer connection for: what is in flight on the old tunnel finishes
// instead of failing.

// Bounds of a move.
const (
	// moveTimeout bounds the whole of a stop's moves; what has not moved
	// by then is closed with the rest.
	moveTimeout = 6 * time.Second
	// movesAtOnce bounds the move requests out at once, so a replica
	// holding many connectors does not send them all to redial together.
	movesAtOnce = 32
	// announceWait is how long a connector that says it moved is given to
	// be announced by its new replica before it is retired anyway.
	announceWait = 3 * time.Second
	// retireWait bounds how long a retired tunnel's requests in flight
	// are waited for before it is closed under them.
	retireWait = 10 * time.Second
)

// drainingRetryAfter is the Retry-After of a tunnel refused by a
// stopping replica: the next attempt goes to another replica.
const drainingRetryAfter = "1"

// enter counts a request on t. It is false once t is retired: the caller
// looks for the connector again.
func (t *tracked) enter() bool {
	t.inFlight.Add(1)
	if t.retired.Load() {
		t.leave()
		return false
	}
	return true
}

// leave ends a request enter counted.
func (t *tracked) leave() {
	if t.inFlight.Add(-1) == 0 && t.retired.Load() {
		select {
		case t.idle <- struct{}{}:
		default: // a wake is pending already
		}
	}
}

// quiesce waits until no request counted by enter is in flight on a
// retired t, or ctx ends; it says which.
func (t *tracked) quiesce(ctx context.Context) bool {
	// enter adds before it looks at retired, and the retirement was stored
	// before this looks at the count: a request either sees it, or is
	// counted here.
	for t.inFlight.Load() > 0 {
		select {
		case <-t.idle:
		case <-ctx.Done():
			return false
		}
	}
	return true
}

// forgetStreams lets go of t's event streams once t is gone: what it
// relayed broke with it, and nothing waits for them.
func (t *tracked) forgetStreams() {
	if t.streams == nil {
		return
	}
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	t.streams.End(gone)
}

// retire lets go of name's tunnel t, whose connector is online on
// another replica now: no new request goes to t, its event streams end
// at an event's end, and t is closed with reason once the requests in
// flight on it are done (or retireWait has passed). It returns when t is
// closed. Retiring a tunnel twice closes it once.
func (g *Gateway) retire(name string, t *tracked, reason string) {
	if !t.retired.CompareAndSwap(false, true) {
		<-t.Done()
		return
	}
	g.presence.Release(name, t)
	ctx, cancel := context.WithTimeout(context.Background(), retireWait)
	defer cancel()
	if t.streams != nil {
		t.streams.End(ctx)
	}
	if !t.quiesce(ctx) {
		g.opts.Logger.Warn("moved connector's old tunnel closed with requests in flight", "connector", name, "in_flight", t.inFlight.Load())
	}
	_ = t.Close(reason) // gone either way: the connector is elsewhere
}

// moveConnectors asks every connector this replica holds over an HTTP/2
// tunnel to move to another replica (when it knows of one that is alive),
// a few at a time, and returns when
// each has moved and its old tunnel is closed, or could not move, or
// moveTimeout (or ctx) has run out. What has not moved is closed with
// the rest of the stop.
func (g *Gateway) moveConnectors(ctx context.Context) {
	if g.opts.Cluster == nil || g.opts.Cluster.Peers() == 0 {
		return // nowhere to move to
	}
	ctx, cancel := context.WithTimeout(ctx, moveTimeout)
	defer cancel()
	slots := make(chan struct{}, movesAtOnce)
	var wg sync.WaitGroup
	moved, stayed := 0, 0
	var mu sync.Mutex
	for _, e := range g.presence.List() {
		conn, online, _ := g.presence.Get(e.Name)
		t, ok := conn.(*tracked)
		if !online || !ok || t.protocol != metrics.ProtocolH2 {
			continue // an original client cannot move: it reconnects after the close
		}
		wg.Go(func() {
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
				return
			}
			defer func() { <-slots }()
			ok := g.moveOne(ctx, e.Name, t)
			mu.Lock()
			if ok {
				moved++
			} else {
				stayed++
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	if moved+stayed > 0 {
		g.opts.Logger.Info("connectors moved to other replicas", "moved", moved, "not_moved", stayed)
	}
}

// moveOne asks name's connector to move, and once it has, waits for its
// new replica's announcement to retire the old tunnel (announceWait at
// most) and for that tunnel to close. It says whether the connector
// moved.
func (g *Gateway) moveOne(ctx context.Context, name string, t *tracked) bool {
	t.moving.Store(true)
	if err := askToMove(ctx, t); err != nil && !t.retired.Load() {
		// (A retired tunnel was let go of because its connector was
		// announced elsewhere: the answer was lost with it, not the move.)
		g.opts.Logger.Info("connector not moved: it reconnects once this replica has stopped", "connector", name, "reason", err.Error())
		return false
	}
	announced := time.NewTimer(announceWait)
	defer announced.Stop()
	select {
	case <-t.Done():
		return true
	case <-announced.C:
		// Its new replica's announcement has not come (NATS is slow or
		// down): requests for it may fail until it does, but the tunnel
		// it left must not hold this stop.
		g.opts.Logger.Warn("moved connector not announced by another replica in time; retiring its old tunnel anyway", "connector", name)
		g.retire(name, t, movedReason(""))
	case <-ctx.Done():
	}
	return true
}

// askToMove sends the move request over t and reads its answer.
func askToMove(ctx context.Context, t *tracked) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://connector"+tunnel.MovePath, http.NoBody)
	if err != nil {
		return err
	}
	res, err := t.RoundTrip(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(res.Body, 4096))
	if res.StatusCode == http.StatusOK {
		return nil
	}
	var answer struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(body, &answer) == nil && answer.Error != "" {
		return errors.New(answer.Error)
	}
	if res.StatusCode == http.StatusNotFound {
		return errors.New("its version cannot move (it answered 404 to the move request)")
	}
	return fmt.Errorf("it answered %d: %s", res.StatusCode, strings.TrimSpace(string(body)))
}

// movedReason is the close reason of a tunnel whose connector moved to
// replica (unknown: "").
func movedReason(replica string) string {
	if replica == "" {
		return tunnel.MovedMark + " to another replica"
	}
	return tunnel.MovedMark + " to replica " + replica
}

// refuseWhileStopping refuses a tunnel asked of a stopping replica: 503
// with Retry-After, so the connector (or its balancer) tries another.
func (g *Gateway) refuseWhileStopping(c echo.Context) error {
	if !g.stopping.Load() {
		return nil
	}
	c.Response().Header().Set("Retry-After", drainingRetryAfter)
	return echo.NewHTTPError(http.StatusServiceUnavailable, "this gateway replica is stopping: connect to another")
}
