package server

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

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
// slow a body (408), too many attempts (429), headers too large (431), or
// any other 4xx the gateway answered itself, outside the proxied routes —
// goes through the rate limit, keyed by its status ("request 401"), since
// anybody can send a million of them. A proxied request's own 4xx comes
// from a connector, after the dashboard's credential was accepted, and is
// logged as every other line; so are 5xx, which say the gateway is
// failing. A request line below the log level is neither written nor
// counted.
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
	if status < 400 || status >= 500 {
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
	// problem is the last check's error message; nil while the store is
	// fine.
	problem atomic.Pointer[string]
}

// watchStore checks the store now and then every storeCheckEvery until
// ctx ends; the first check is done before it returns, so /readyz is
// right from the start. A change of state is logged once: an ERROR when
// the store stops being the one opened or stops answering, an INFO when
// it is back.
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
	h := &g.bounds.store
	was := h.problem.Load()
	g.metrics.StoreReady(err == nil)
	switch {
	case err == nil && was != nil:
		h.problem.Store(nil)
		g.opts.Logger.Info("store usable again: ready", "database", st.Where(), "identity", st.Identity().ID)
	case err != nil && (was == nil || *was != err.Error()):
		msg := err.Error()
		h.problem.Store(&msg)
		g.opts.Logger.Error("store not usable: not ready until it is", "database", st.Where(), "identity", st.Identity().ID, "err", msg)
	}
}

// storeProblem is why the store is not ready, "" when it is.
func (g *Gateway) storeProblem() string {
	if p := g.bounds.store.problem.Load(); p != nil {
		return *p
	}
	return ""
}
