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
package link

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"time"

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
// after printing it.
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
	fail := func(perm *PermanentError) error {
		fmt.Fprintln(o.Out, perm.Message)
		o.OnState(StateFailed, perm.Message)
		return perm
	}
	attempt := 0
	reason := ""
	told := "" // the last cause printed in full
	for ctx.Err() == nil {
		o.OnState(StateConnecting, reason)
		ws, err := tunnel.Dial(ctx, o.Gateway, o.Name, o.Token, header)
		if err == nil {
			fmt.Fprintf(o.Out, "connected to %s as %q\n", o.Gateway, o.Name)
			o.OnState(StateConnected, "")
			began := time.Now()
			serveErr := tunnel.Serve(ctx, ws, o.Handler, tunnel.ServeOptions{PingInterval: o.PingInterval})
			if ctx.Err() != nil {
				return nil
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
