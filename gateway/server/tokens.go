package server

import (
	"context"
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/uncaged/workflow/gateway/auth"
	"github.com/uncaged/workflow/gateway/store"
)

// watchTokens gives the authority its ledger (the store's token records)
// and keeps it current from the store's notifications until ctx ends:
// each revocation takes effect in the authority, which ends what the
// revoked tokens opened here (credentials.go). In a cluster every
// replica does this for what it holds. Without a store every validly
// signed token is accepted, as before tokens were recorded.
func (g *Gateway) watchTokens(ctx context.Context) {
	st, a := g.opts.Store, g.opts.Auth
	if st == nil || a == nil {
		return
	}
	// Subscribe before loading: a revocation committed in between is then
	// delivered, not lost.
	changes, err := st.Subscribe(ctx)
	if err != nil {
		g.opts.Logger.Warn("tokens: no notifications from the store; revocations made elsewhere take effect only after a restart", "err", err.Error())
	}
	lctx, cancel := context.WithTimeout(ctx, storeTimeout)
	if err := a.Load(lctx, st); err != nil {
		g.opts.Logger.Warn("tokens: records not loaded; each token is looked up on first use", "err", err.Error())
	}
	cancel()
	if changes == nil {
		return
	}
	go func() {
		for c := range changes {
			if c.Kind != store.ChangeRevocation && c.Kind != store.ChangeReload {
				continue
			}
			actx, cancel := context.WithTimeout(ctx, storeTimeout)
			if err := a.Apply(actx, c); err != nil && ctx.Err() == nil {
				g.opts.Logger.Warn("tokens: reload failed; revocations already known stay in force", "err", err.Error())
			}
			cancel()
		}
	}()
}

// refusal is the answer to a credential Verify refused, counted in the
// metrics: 401 or 403 with {"error": why, "reason": code} (the error
// handler adds the reason), or 503 when the store could not say
// (storeUnavailable).
func (g *Gateway) refusal(err error) error {
	if errors.Is(err, auth.ErrUnavailable) {
		return g.storeUnavailable("token not checked", err)
	}
	g.metrics.AuthFailure(authReason(err))
	return &echo.HTTPError{Code: auth.Status(err), Message: err.Error(), Internal: err}
}

// refusalBody is the JSON of an error answer: {"error": msg}, with the
// refusal's "reason" when err is a refused credential (401, 403), and
// "store-unavailable" when the store did not answer (503).
func refusalBody(err error, code int, msg string) map[string]string {
	body := map[string]string{"error": msg}
	switch {
	case code == http.StatusUnauthorized || code == http.StatusForbidden:
		if reason := auth.ReasonOf(err); reason != "" {
			body["reason"] = reason
		}
	case code == http.StatusServiceUnavailable && errors.Is(err, errStoreUnavailable):
		body["reason"] = ReasonStoreUnavailable
	}
	return body
}
