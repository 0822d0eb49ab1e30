// Package link keeps a connector connected to its gateway: it dials the
// tunnel, serves the connector's API over it, and when the connection drops
// it reconnects with exponential backoff and full jitter, printing one line
// per state change so a person can see what is happening. Every retry line
// says why (the first time in full, a repeat of the same cause shortened).
//
// What retrying cannot cure ends Run with a *PermanentError (explain.go):
// an unusable URL, a refused credential, a certificate that does not
// verify, an answer that is not the gateway's tunnel (a web page, a 404, a
// proxy dropping the upgrade), the name held by another machine, or the
// name taken over by one. Everything else (the gateway down, a proxy's
// 502, a refused TLS handshake on a plain port) is retried forever,
// because the gateway coming back is the normal case.
//
// A gateway replica that is about to stop asks its connectors to move
// (tunnel.MovePath): each dials again while its old tunnel still serves,
// so the machine is never away during a rolling upgrade.
package link

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/uncaged/workflow/shared/tunnel"
)

// Options configure a link.
type Options struct {
	Gateway string
	Name    string
	Token   string
	// Handler is the API served to the gateway.
	Handler http.Handler
	// Out receives the state lines (connected, disconnected, retrying).
	Out    io.Writer
	Logger *slog.Logger
	// Version is sent to the gateway for its endpoints list.
	Version string
	// MinBackoff and MaxBackoff bound the wait between attempts (1 s, 30 s).
	MinBackoff, MaxBackoff time.Duration
	// StableAfter is how long a connection must last for the backoff to
	// start again from MinBackoff (1 min).
	StableAfter time.Duration
	// PingInterval is the connector's own WebSocket ping (15 s).
	PingInterval time.Duration
	// OnState, when set, hears every state change (StateConnecting,
	// StateConnected, StateRetrying, StateFailed) with a human-readable
	// detail, so `status` can tell what a running connect is doing.
	OnState func(state, detail string)
	// Instance is this connector's instance id, sent with every dial
	// (tunnel.InstanceHeader); empty sends none.
	Instance string
	// InstanceKey proves the instance (tunnel.InstanceKeyHeader): a
	// secret, sent with every dial and never written anywhere else; empty
	// sends none.
	InstanceKey string
	// Takeover asks the gateway to give the name to this connector even
	// when another instance holds it.
	Takeover bool
}

// States reported to Options.OnState.
const (
	StateConnecting = "connecting"
	StateConnected  = "connected"
	StateRetrying   = "retrying" // waiting out the backoff; detail says why
	StateFailed     = "failed"   // given up: detail is the PermanentError's message
)

// sameCauseWidth is how much of a repeated cause a retry line keeps.
const sameCauseWidth = 60

// Run keeps the link up until ctx ends, and returns nil then. It gives up
// only on a failure retrying cannot cure, returning its *PermanentError
// without printing it (Out has the state lines; the caller reports the
// error).
func Run(ctx context.Context, o Options) error {
	if err := CheckGateway(o.Gateway); err != nil {
		return err
	}
	if o.MinBackoff == 0 {
		o.MinBackoff = time.Second
	}
	if o.MaxBackoff == 0 {
		o.MaxBackoff = 30 * time.Second
	}
	if o.StableAfter == 0 {
		o.StableAfter = time.Minute
	}
	if o.PingInterval == 0 {
		o.PingInterval = 15 * time.Second
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.OnState == nil {
		o.OnState = func(string, string) {}
	}
	x := explainer{gateway: o.Gateway, name: o.Name, token: o.Token}
	header := http.Header{"X-Uncaged-Version": {o.Version}}
	if o.Instance != "" {
		header.Set(tunnel.InstanceHeader, o.Instance)
	}
	if o.InstanceKey != "" {
		header.Set(tunnel.InstanceKeyHeader, o.InstanceKey)
	}
	if o.Takeover {
		header.Set(tunnel.TakeoverHeader, "1")
	}
	// The caller says why it stopped, once, where its errors go.
	fail := func(perm *PermanentError) error {
		o.OnState(StateFailed, perm.Message)
		return perm
	}
	l := &link{o: o, x: x, header: header, moves: make(chan move)}
	// A tunnel left behind by a move drains on its own; Run returns once
	// it has.
	defer l.retired.Wait()
	attempt := 0
	reason := ""
	told := "" // the last cause printed in full
	for ctx.Err() == nil {
		o.OnState(StateConnecting, reason)
		ws, err := tunnel.Dial(ctx, o.Gateway, o.Name, o.Token, header)
		if err == nil {
			fmt.Fprintf(o.Out, "connected to %s as %q\n", o.Gateway, o.Name)
			o.OnState(StateConnected, "")
			began, serveErr := l.session(ctx, ws)
			if ctx.Err() != nil {
				return nil
			}
			if ce := (*tunnel.ClosedError)(nil); errors.As(serveErr, &ce) && ce.Moved() {
				// Its replica stopped before this connector's move was
				// done: the others are there, so no backing off.
				fmt.Fprintf(o.Out, "the gateway replica it was on has stopped (%s); connecting again\n", ce.Reason)
				attempt, reason = 0, ""
				continue
			}
			cause, perm := closed(serveErr)
			if perm != nil {
				return fail(perm)
			}
			reason = cause
			fmt.Fprintf(o.Out, "disconnected from gateway: %s\n", reason)
			told = reason
			if time.Since(began) >= o.StableAfter {
				attempt = 0
			}
		} else if ctx.Err() != nil {
			return nil
		} else {
			o.Logger.Debug("dial failed", "err", err)
			cause, perm := x.dialFailure(err)
			if perm != nil {
				return fail(perm)
			}
			reason = cause
		}
		wait := Backoff(attempt, o.MinBackoff, o.MaxBackoff, rand.Float64)
		attempt++
		if reason == told {
			fmt.Fprintf(o.Out, "retrying in %s (same: %s)\n", wait.Round(100*time.Millisecond), clip(reason, sameCauseWidth))
		} else {
			fmt.Fprintf(o.Out, "retrying in %s: %s\n", wait.Round(100*time.Millisecond), reason)
			told = reason
		}
		o.OnState(StateRetrying, reason)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
	}
	return nil
}

// A move (tunnel.MovePath): a gateway replica about to stop asks the
// connector to dial again. The new tunnel is made while the old one still
// serves; once it is up the old one is left to the gateway, which closes
// it when what is in flight on it has finished. So the machine is never
// away, and no request it was answering is cut.

// retiredGrace bounds how long a tunnel left behind by a move is served
// when the gateway does not close it: then it is drained from this side.
const retiredGrace = 30 * time.Second

// moveDialWindow bounds the attempts of one move.
const moveDialWindow = 2 * time.Second

// link is one Run's state.
type link struct {
	o      Options
	x      explainer
	header http.Header
	// moves carries the gateway's move requests from the tunnel's handler
	// to the session serving the tunnels.
	moves   chan move
	retired sync.WaitGroup
}

// move is one move request: its answer is nil once the new tunnel is up.
type move struct {
	ctx    context.Context
	answer chan error
}

// served is one tunnel being served.
type served struct {
	began  time.Time
	done   chan error // Serve's error, once it has returned
	cancel context.CancelFunc
}

// serve serves the connector's API over ws until the tunnel ends, ctx
// ends, or the served's cancel drains it.
func (l *link) serve(ctx context.Context, ws *websocket.Conn) *served {
	tctx, cancel := context.WithCancel(ctx)
	s := &served{began: time.Now(), done: make(chan error, 1), cancel: cancel}
	go func() {
		defer cancel()
		s.done <- tunnel.Serve(tctx, ws, l.handler(), tunnel.ServeOptions{PingInterval: l.o.PingInterval})
	}()
	return s
}

// session serves ws, and the tunnels the gateway moves it to, until the
// current one ends; it returns when that one began, and its error.
func (l *link) session(ctx context.Context, ws *websocket.Conn) (time.Time, error) {
	cur := l.serve(ctx, ws)
	for {
		select {
		case err := <-cur.done:
			return cur.began, err
		case mv := <-l.moves:
			nws, err := l.dialForMove(ctx)
			if err != nil {
				fmt.Fprintf(l.o.Out, "asked to move to another gateway replica, but could not: %s\n", err)
				mv.answer <- err
				continue
			}
			old := cur
			cur = l.serve(ctx, nws)
			fmt.Fprintf(l.o.Out, "moved to another gateway replica of %s: the one this connector was on is stopping\n", l.o.Gateway)
			mv.answer <- nil
			l.retire(old)
		}
	}
}

// retire leaves old to the gateway, which closes it once what is in
// flight on it is done; past retiredGrace it is drained from this side.
func (l *link) retire(old *served) {
	l.retired.Go(func() {
		t := time.NewTimer(retiredGrace)
		defer t.Stop()
		var err error
		select {
		case err = <-old.done:
		case <-t.C:
			old.cancel()
			err = <-old.done
		}
		l.o.Logger.Debug("tunnel left behind by a move ended", "err", err)
	})
}

// dialForMove dials the gateway again until a tunnel is up, ctx (Run's)
// ends or moveDialWindow has passed. A replica that is stopping refuses
// new tunnels (503), so an attempt its balancer sends back there is tried
// again. The move request's own context is not used: the new tunnel's
// announcement retires the old one, which may end that request before
// the new tunnel's handshake is read.
func (l *link) dialForMove(ctx context.Context) (*websocket.Conn, error) {
	// A gateway URL that names the stopping replica itself, not a
	// balancer, refuses every attempt: then the connector stays, and
	// reconnects once that replica has stopped.
	ctx, cancel := context.WithTimeout(ctx, moveDialWindow)
	defer cancel()
	wait := 50 * time.Millisecond
	for {
		ws, err := tunnel.Dial(ctx, l.o.Gateway, l.o.Name, l.o.Token, l.header)
		if err == nil {
			return ws, nil
		}
		cause, perm := l.x.dialFailure(err)
		if perm != nil {
			return nil, perm
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%s (gave up after %s)", cause, moveDialWindow)
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Second)
	}
}

// handler is the connector's API with the tunnel's own move request.
func (l *link) handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != tunnel.MovePath {
			// Who made the request, as the gateway says; the mark is what
			// tells a tunnel request from one made to the API directly.
			l.o.Handler.ServeHTTP(w, r.WithContext(tunnel.WithUser(r.Context(), r.Header.Get(tunnel.UserHeader))))
			return
		}
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			http.Error(w, "POST only", http.StatusMethodNotAllowed)
			return
		}
		mv := move{ctx: r.Context(), answer: make(chan error, 1)}
		select {
		case l.moves <- mv:
		case <-r.Context().Done():
			return
		}
		select {
		case err := <-mv.answer:
			w.Header().Set("Content-Type", "application/json")
			if err != nil {
				w.WriteHeader(http.StatusServiceUnavailable)
				_ = json.NewEncoder(w).Encode(map[string]any{"moved": false, "error": err.Error()})
				return
			}
			_ = json.NewEncoder(w).Encode(map[string]any{"moved": true})
		case <-r.Context().Done():
		}
	})
}

// Backoff is the wait before attempt n (from 0): a uniformly random
// duration up to min(max, min·2ⁿ) — "full jitter", so many connectors
// cut off at once do not come back in lockstep. It never waits less than
// a tenth of min, to avoid a hot loop.
func Backoff(n int, min, max time.Duration, random func() float64) time.Duration {
	ceiling := max
	if n < 30 {
		if c := min << n; c > 0 && c < max {
			ceiling = c
		}
	}
	d := time.Duration(random() * float64(ceiling))
	if floor := min / 10; d < floor {
		d = floor
	}
	return d
}
