// Package link keeps a connector connected to its gateway: it dials the
// tunnel, serves the connector's API over it, and when the connection drops
// it reconnects forever with exponential backoff and full jitter, printing
// one line per state change so a person can see what is happening.
package link

import (
	"context"
	"errors"
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
	// StateConnected, StateRetrying) with a human-readable detail, so
	// `status` can tell what a running connect is doing.
	OnState func(state, detail string)
}

// States reported to Options.OnState.
const (
	StateConnecting = "connecting"
	StateConnected  = "connected"
	StateRetrying   = "retrying" // waiting out the backoff; detail says why
)

// Run keeps the link up until ctx ends. It returns nil then; it never
// gives up on its own, because the gateway coming back is the normal case.
func Run(ctx context.Context, o Options) error {
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
	attempt := 0
	reason := ""
	for ctx.Err() == nil {
		o.OnState(StateConnecting, reason)
		header := http.Header{"X-Uncaged-Version": {o.Version}}
		ws, err := tunnel.Dial(ctx, o.Gateway, o.Name, o.Token, header)
		if err == nil {
			fmt.Fprintf(o.Out, "connected to %s as %q\n", o.Gateway, o.Name)
			o.OnState(StateConnected, "")
			began := time.Now()
			serveErr := tunnel.Serve(ctx, ws, o.Handler, tunnel.ServeOptions{PingInterval: o.PingInterval})
			if ctx.Err() != nil {
				return nil
			}
			reason = "connection closed"
			if serveErr != nil {
				reason = serveErr.Error()
			}
			fmt.Fprintf(o.Out, "disconnected from gateway: %s\n", reason)
			if time.Since(began) >= o.StableAfter {
				attempt = 0
			}
		} else if ctx.Err() != nil {
			return nil
		} else {
			var rej *tunnel.RejectedError
			if errors.As(err, &rej) {
				reason = fmt.Sprintf("gateway refused the connection (%d): %s", rej.Status, rej.Message)
				fmt.Fprintln(o.Out, reason)
			} else {
				o.Logger.Debug("dial failed", "err", err)
				reason = err.Error()
			}
		}
		wait := Backoff(attempt, o.MinBackoff, o.MaxBackoff, rand.Float64)
		attempt++
		fmt.Fprintf(o.Out, "retrying in %s\n", wait.Round(100*time.Millisecond))
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
