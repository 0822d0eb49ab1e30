package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/uncaged/workflow/gateway/store"
	"github.com/uncaged/workflow/shared/logging"
)

// gatewayBounds is what keeps clients, and the connectors' data, within
// bounds beyond the request path's own limits.
type gatewayBounds struct {
	// limited rate-limits untrusted's lines and counts them
	// (uncaged_gateway_log_events_total).
	limited *logging.Limited
	// untrusted logs what a party without a credential can cause: one
	// line per attempt would let it fill the disk.
	untrusted *slog.Logger
	// store is what the last check of Options.Store found (watchStore).
	store storeHealth
}

// initBounds sets up g.bounds; New calls it once the metrics exist.
func (g *Gateway) initBounds() {
	lim := g.opts.limited
	if lim == nil {
		lim = logging.NewLimited(g.opts.Logger.Handler(), logging.LimitOptions{})
	}
	g.bounds.limited, g.bounds.untrusted = lim, lim.Logger()
	g.metrics.CountLimitedLogs(lim.Counts)
}

// refusalLimiting is the request log's handler: the line of a request
// refused for what its sender did — no or a bad credential (401, 403), too
// slow a body (408), too many attempts (429), headers too large (431) —
// and of any error the gateway answered itself outside the proxied routes
// (a 404 of an unknown path, a 400 of a bad login, a 500 of a handler that
// panicked) goes through the rate limit, keyed by its status ("request
// 401"), since anybody can send a million of them. A proxied request's own
// errors come from a connector, or from the gateway's way to it, after the
// dashboard's credential was accepted, and are logged as every other line.
// A request line below the log level is neither written nor counted.
type refusalLimiting struct {
	slog.Handler
	limited *logging.Limited
}

// Handle implements slog.Handler.
func (h refusalLimiting) Handle(ctx context.Context, r slog.Record) error {
	status, path := 0, ""
	r.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "status":
			status = int(a.Value.Int64())
		case "path":
			path = a.Value.String()
		}
		return true
	})
	if refusedBySender(status, path) {
		return h.limited.HandleKeyed(ctx, "request "+strconv.Itoa(status), r)
	}
	return h.Handler.Handle(ctx, r)
}

// WithAttrs implements slog.Handler.
func (h refusalLimiting) WithAttrs(attrs []slog.Attr) slog.Handler {
	return refusalLimiting{Handler: h.Handler.WithAttrs(attrs), limited: h.limited}
}

// WithGroup implements slog.Handler.
func (h refusalLimiting) WithGroup(name string) slog.Handler {
	return refusalLimiting{Handler: h.Handler.WithGroup(name), limited: h.limited}
}

// refusedBySender says whether a request answered status on path was
// refused for what its sender did (refusalLimiting).
func refusedBySender(status int, path string) bool {
	switch status {
	case http.StatusUnauthorized, http.StatusForbidden, http.StatusRequestTimeout, http.StatusTooManyRequests, http.StatusRequestHeaderFieldsTooLarge:
		return true
	}
	if status < 400 {
		return false
	}
	// The original dashboard's live URL is logged as the proxied path it
	// stands for (livealias.go).
	_, _, proxied := splitProxied(path)
	return !proxied
}

// storeCheckEvery is how often the gateway checks its store (guard.go in
// gateway/store): the cost of a few small queries, and how soon /readyz
// and the log say the store is gone.
const storeCheckEvery = 2 * time.Second

// storeCheckTimeout bounds one check: a store that does not answer in it
// is not ready.
const storeCheckTimeout = 5 * time.Second

// storeHealth is what the last check of the store found.
type storeHealth struct {
	// state is the last check's finding: "" while the store is fine, else
	// its error message, prefixed by unreachablePrefix when the store did
	// not answer at all.
	state atomic.Pointer[string]
}

// unreachablePrefix marks a storeHealth state that keeps the gateway
// ready.
const unreachablePrefix = "unreachable: "

// watchStore checks the store now and then every storeCheckEvery until
// ctx ends; the first check is done before it returns, so /readyz is
// right from the start. A change of state is logged once: an ERROR when
// the store stops being the one opened or answers wrong (not ready), an
// INFO when it is fine again. A store that does not answer at all is an
// outage (storeoutage.go: still ready, since every replica shares a
// PostgreSQL server and serves from memory meanwhile), which says so
// itself when it starts and when it is over.
func (g *Gateway) watchStore(ctx context.Context, every time.Duration) {
	st := g.opts.Store
	if st == nil {
		return
	}
	g.checkStore(ctx, st)
	go func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				g.checkStore(ctx, st)
			}
		}
	}()
}

// checkStore runs one check and records it.
func (g *Gateway) checkStore(ctx context.Context, st store.Store) {
	cctx, cancel := context.WithTimeout(ctx, storeCheckTimeout)
	err := st.Check(cctx)
	cancel()
	if ctx.Err() != nil {
		return // shutting down: the store may be closing
	}
	g.metrics.StoreReady(err == nil)
	unreachable := errors.Is(err, store.ErrUnreachable)
	switch {
	case err == nil:
		g.outage.up()
	case unreachable:
		g.outage.down(err)
	}
	h := &g.bounds.store
	state := ""
	if err != nil {
		state = err.Error()
		if unreachable {
			state = unreachablePrefix + state
		}
	}
	was := h.state.Load()
	if (was == nil && state == "") || (was != nil && *was == state) {
		return
	}
	if state == "" {
		h.state.Store(nil)
	} else {
		h.state.Store(&state)
	}
	// Logged once per change of kind — fine, not usable, out of reach —
	// not of wording: a check that runs while the database is being
	// changed can see the problem half made, and the next one whole.
	if storeKind(was) == storeKind(h.state.Load()) {
		return
	}
	attrs := []any{"database", st.Where(), "identity", st.Identity().ID}
	switch {
	case unreachable, err == nil && was != nil && strings.HasPrefix(*was, unreachablePrefix):
		// The outage's own lines say it.
	case err == nil:
		g.opts.Logger.Info("store usable again: ready", attrs...)
	default:
		g.opts.Logger.Error("store not usable: not ready until it is", append(attrs, "err", err.Error())...)
	}
}

// storeKind is a storeHealth state's kind: "" fine, "unreachable" or
// "unusable".
func storeKind(state *string) string {
	switch {
	case state == nil:
		return ""
	case strings.HasPrefix(*state, unreachablePrefix):
		return "unreachable"
	}
	return "unusable"
}

// storeProblem is why the store keeps the gateway from being ready, ""
// when it does not.
func (g *Gateway) storeProblem() string {
	if p := g.bounds.store.state.Load(); p != nil && !strings.HasPrefix(*p, unreachablePrefix) {
		return *p
	}
	return ""
}

// guard runs inside the request log (which then logs a panicking
// request's 500 too): it records refused changes
// (auditRefusals) and recovers a handler's panic as echo's Recover does —
// 500, the stack trace logged through the rate limit, since a request that
// makes a handler panic can be sent a million times. One middleware, not
// two: echo builds each one's closure again for every request.
func (g *Gateway) guard(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) (err error) {
		defer func() {
			v := recover()
			if v == nil {
				return
			}
			if v == http.ErrAbortHandler {
				panic(v)
			}
			perr, ok := v.(error)
			if !ok {
				perr = fmt.Errorf("%v", v)
			}
			stack := make([]byte, 4<<10)
			stack = stack[:runtime.Stack(stack, true)]
			g.bounds.untrusted.Error("panic serving a request", "path", c.Request().URL.Path, "err", perr.Error(), "stack", string(stack))
			c.Error(perr)
			err = nil
		}()
		return g.auditRefusals(c, next)
	}
}
