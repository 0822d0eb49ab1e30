package server

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/uncaged/workflow/gateway/auth"
	"github.com/uncaged/workflow/gateway/store"
)

// Name bindings: once a connector token has held a name (connected with
// it, or registered it), the shared secret can neither connect, register
// nor unregister that name until every connector token for it is revoked
// (`uncaged-gateway token revoke --connector NAME`). The binding is kept
// in the store (store.NameBindings), so it is the same on every replica
// and after any restart; the store releases it with the revocation of the
// name's last token. Every decision reads the copy in memory, loaded
// before the gateway serves and kept current by the store's
// notifications, as the registrations and revocations are: connecting
// never waits for the database except to record a name's first binding.
//
// Without a store the bindings live in memory, for this process's life.

// bindingRetry bounds the wait between attempts to load the bindings
// while the store does not answer.
const bindingRetry = 30 * time.Second

// nameBindings is the bindings in memory.
type nameBindings struct {
	mu sync.RWMutex
	// loaded is false until the store's bindings were read once: until
	// then nobody knows which names are free, and the secret gets none.
	loaded bool
	names  map[string]store.NameBinding
}

// state says whether name is bound, and whether that is known.
func (b *nameBindings) state(name string) (bound, known bool) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	_, bound = b.names[name]
	return bound, b.loaded
}

// list is every binding, in no order.
func (b *nameBindings) list() []store.NameBinding {
	b.mu.RLock()
	defer b.mu.RUnlock()
	out := make([]store.NameBinding, 0, len(b.names))
	for _, nb := range b.names {
		out = append(out, nb)
	}
	return out
}

// set records name's binding (ok) or its release (!ok).
func (b *nameBindings) set(name string, nb store.NameBinding, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if ok {
		b.names[name] = nb
	} else {
		delete(b.names, name)
	}
}

// replace puts the store's bindings in place of what memory holds.
func (b *nameBindings) replace(all []store.NameBinding) {
	names := make(map[string]store.NameBinding, len(all))
	for _, nb := range all {
		names[nb.Name] = nb
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.names, b.loaded = names, true
}

// errBindingsUnknown answers the shared secret while the bindings have
// not been read: it may not take a name that may be a token's.
var errBindingsUnknown = echo.NewHTTPError(http.StatusServiceUnavailable,
	"cannot tell yet whether this name belongs to a connector token: the gateway's store has not answered; retry later")

// bindName records that the connector token of p holds name: in memory,
// and in the store when the name was not bound yet. A store that fails is
// a 503 (the binding would not survive a restart); a token revoked
// meanwhile is refused like a revoked token.
func (g *Gateway) bindName(ctx context.Context, name string, p auth.Principal) error {
	if p.Shared {
		return nil
	}
	if bound, _ := g.bindings.state(name); bound {
		return nil
	}
	if g.opts.Store == nil {
		g.bindings.set(name, store.NameBinding{Name: name, TokenID: p.TokenID, BoundAt: g.now()}, true)
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	if _, err := g.opts.Store.BindName(ctx, name, p.TokenID); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return g.refusal(&auth.Refusal{Reason: auth.ReasonRevoked, Message: "token revoked"})
		}
		return g.storeUnavailable("the binding of "+name+" to its token not saved", err)
	}
	// The name is bound before this request is answered, not when the
	// store's notification reaches the watcher: the secret must not slip in
	// between. Read back rather than set, so a release committed since
	// (the token revoked meanwhile) is not undone. It costs one read, once
	// per name ever bound.
	g.bindings.set(name, store.NameBinding{Name: name, TokenID: p.TokenID, BoundAt: g.now()}, true)
	g.reloadBinding(ctx, name)
	return nil
}

// watchBindings loads the bindings and keeps them current from the
// store's notifications until ctx ends: a name bound anywhere, and every
// revocation (which may release names). Subscribed before loading, so no
// change is missed. A load that fails is retried in the background; the
// secret is refused every name until one succeeds.
func (g *Gateway) watchBindings(ctx context.Context) {
	if g.opts.Store == nil {
		g.bindings.replace(nil)
		return
	}
	changes, err := g.opts.Store.Subscribe(ctx)
	if err != nil {
		g.opts.Logger.Warn("name bindings: no notifications from the store; names bound or released elsewhere are seen only after a restart", "err", err.Error())
	}
	if !g.reloadBindings(ctx) {
		go g.retryBindings(ctx)
	}
	if changes == nil {
		return
	}
	go func() {
		for ch := range changes {
			switch ch.Kind {
			case store.ChangeBinding:
				for _, name := range ch.IDs {
					g.reloadBinding(ctx, name)
				}
			case store.ChangeRevocation, store.ChangeReload:
				g.reloadBindings(ctx)
			}
		}
	}()
}

// retryBindings loads the bindings until it succeeds or ctx ends.
func (g *Gateway) retryBindings(ctx context.Context) {
	wait := time.Second
	for {
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		if g.reloadBindings(ctx) {
			g.opts.Logger.Info("name bindings loaded")
			return
		}
		wait = min(2*wait, bindingRetry)
	}
}

// reloadBindings replaces the bindings in memory with the store's and
// reports whether it could.
func (g *Gateway) reloadBindings(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	all, err := g.opts.Store.ListNameBindings(ctx)
	if err != nil {
		if ctx.Err() == nil {
			g.opts.Logger.Warn("name bindings not loaded: the shared secret is refused every name until they are", "err", err.Error())
		}
		return false
	}
	g.bindings.replace(all)
	return true
}

// reloadBinding reads one name's binding again.
func (g *Gateway) reloadBinding(ctx context.Context, name string) {
	ctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	nb, err := g.opts.Store.NameBinding(ctx, name)
	switch {
	case errors.Is(err, store.ErrNotFound):
		g.bindings.set(name, nb, false)
	case err != nil:
		if ctx.Err() == nil {
			g.opts.Logger.Warn("name binding not reloaded", "connector", name, "err", err.Error())
		}
	default:
		g.bindings.set(name, nb, true)
	}
}
