package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/uncaged/workflow/gateway/auth"
	"github.com/uncaged/workflow/gateway/legacy"
	"github.com/uncaged/workflow/gateway/store"
)

// What a credential opened ends within moments of the credential: a
// dashboard request or event stream (whichever replica it reached it
// through), a connector's tunnel, an original client's socket or
// registration. Each is held with the authority (auth.Hold, auth.Bind)
// where the credential is accepted — requireDashboard, connect,
// register — and the authority ends it when the token is revoked (the
// store's notification, on every replica) or reaches its expiry (a
// timer). The shared secret can be neither, so what it opens lasts.

// whileValid serves c with next under p's credential: the request's
// context ends when the credential does, which ends the proxied request
// or stream with it (and, in cluster mode, the hop to the replica holding
// the connector). What the client then gets says why: 401 with the
// refusal when nothing was sent yet, an "error" event and a clean end
// for an event stream, and for any other answer under way an abort, since
// a body cut short must not pass for a whole one.
func (g *Gateway) whileValid(c echo.Context, p auth.Principal, next echo.HandlerFunc) (err error) {
	r := c.Request()
	// A proxied request that is not a stream has a timeout (forward): the
	// binding's context carries it, so the request costs one context.
	var timeout time.Duration
	if _, _, proxied := splitProxied(r.URL.Path); proxied && !isStream(r) {
		timeout = g.opts.RequestTimeout
	}
	ctx, binding := g.opts.Auth.Bind(r.Context(), p, timeout)
	if ctx == r.Context() {
		return next(c) // the shared secret, or a token that cannot end
	}
	defer binding.Done()
	c.SetRequest(r.WithContext(ctx))
	defer func() {
		why := binding.Ended()
		if why == nil {
			return // a panic, if any, goes on unrecovered
		}
		if v := recover(); v != nil && v != http.ErrAbortHandler {
			panic(v)
		} else if v == nil && c.Response().Committed && err == nil {
			return // the answer was complete before the credential ended
		}
		err = g.credentialEnded(c, why)
	}()
	return next(c)
}

// credentialEnded finishes the answer to a request whose credential ended
// while it was served.
func (g *Gateway) credentialEnded(c echo.Context, why *auth.Refusal) error {
	res := c.Response()
	g.opts.Logger.Info("request ended with its credential", "path", c.Request().URL.Path, "reason", why.Reason)
	if !res.Committed {
		return g.refusal(why)
	}
	if !isEventStream(res.Header().Get("Content-Type")) {
		panic(http.ErrAbortHandler)
	}
	data, _ := json.Marshal(map[string]string{"error": why.Message, "reason": why.Reason})
	// The stream is over either way: a client gone already has nobody to
	// read the event.
	_, _ = fmt.Fprintf(res, "event: error\ndata: %s\n\n", data)
	_ = http.NewResponseController(res).Flush()
	return nil
}

// isEventStream says whether a Content-Type is text/event-stream.
func isEventStream(contentType string) bool {
	ct, _, _ := strings.Cut(contentType, ";")
	return strings.EqualFold(strings.TrimSpace(ct), "text/event-stream")
}

// endTunnelWithCredential closes the connector's tunnel t, attached under
// name, when p's credential ends, with a reason the connector logs
// ("token revoked", "token expired at ..."); its next attempt is then
// refused for that reason and it stops (connector/link). A revocation
// between the check of p and now closes it at once. Call release once the
// tunnel has ended.
func (g *Gateway) endTunnelWithCredential(p auth.Principal, name string, t *tracked) (release func()) {
	return g.opts.Auth.Hold(p, func(why *auth.Refusal) {
		if g.presence.CloseConn(name, t, why.Message) {
			g.opts.Logger.Info("connector disconnected: "+why.Message, "connector", name, "reason", why.Reason)
		}
	})
}

// registrationHolds are the credentials the original clients' current
// registrations were made with, by name: each heartbeat's replaces the
// last, and when the one in force ends the registration goes, as if the
// client had unregistered. The zero value is ready.
type registrationHolds struct {
	mu    sync.Mutex
	holds map[string]*registrationHold
}

type registrationHold struct {
	release func()
	// ended is why the credential ended, if it did before the hold was in
	// place (mu held).
	ended *auth.Refusal
}

// hold makes name's registration end with p's credential.
func (rh *registrationHolds) hold(g *Gateway, p auth.Principal, name string) {
	h := &registrationHold{}
	h.release = g.opts.Auth.Hold(p, func(why *auth.Refusal) {
		rh.mu.Lock()
		h.ended = why
		current := rh.holds[name] == h
		if current {
			delete(rh.holds, name)
		}
		rh.mu.Unlock()
		if current {
			// Not in the revocation's sweep: the store may be slow.
			go g.endRegistration(name, why)
		}
	})
	rh.mu.Lock()
	if rh.holds == nil {
		rh.holds = map[string]*registrationHold{}
	}
	prev, ended := rh.holds[name], h.ended
	if ended == nil {
		rh.holds[name] = h
	} else {
		delete(rh.holds, name)
	}
	rh.mu.Unlock()
	if prev != nil {
		prev.release()
	}
	if ended != nil {
		go g.endRegistration(name, ended)
	}
}

// forget lets name's registration outlive the credential it was made
// with: the client unregistered.
func (rh *registrationHolds) forget(name string) {
	rh.mu.Lock()
	prev := rh.holds[name]
	delete(rh.holds, name)
	rh.mu.Unlock()
	if prev != nil {
		prev.release()
	}
}

// endRegistration removes name's registration, everywhere, because the
// credential it was made with ended: the gateway no longer sends its
// client token anywhere nor fetches its URL, as after an unregister.
func (g *Gateway) endRegistration(name string, why *auth.Refusal) {
	if g.keepsRegistrations() {
		ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
		err := g.opts.Store.DeleteRegistration(ctx, name)
		cancel()
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			// Still removed here; the other processes keep it until their
			// next reload.
			g.opts.Logger.Error("registration not deleted from the store", "connector", name, "err", err.Error())
		}
	}
	g.registrations.Remove(name)
	if g.opts.Store == nil {
		g.shareRegistration(legacy.Registration{Name: name, Removed: true})
	}
	g.opts.Logger.Info("registration ended: "+why.Message, "connector", name, "reason", why.Reason)
}
