package server

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/uncaged/workflow/gateway/auth"
	"github.com/uncaged/workflow/gateway/legacy"
	"github.com/uncaged/workflow/gateway/metrics"
	"github.com/uncaged/workflow/gateway/presence"
	"github.com/uncaged/workflow/gateway/store"
)

// The original clients' registration routes (docs/compatibility.md,
// "JSON-frame clients"). What a registration is, the table of them and
// the sealing of their client tokens are gateway/legacy's; here are the
// routes, who may call them, and their persistence.
//
// With Options.Store and Options.RegistrationKey set, registrations are
// kept in the store (the client token sealed: the store sees only sealed
// bytes), loaded by New, and every process sharing the database learns of
// puts and deletes through store.Subscribe. So a gateway that restarts
// forwards a still-running original client's requests with its client
// token as soon as the client's socket is back, instead of answering 401
// until its next heartbeat re-registers it (up to 60 s). Requests never
// query the store: the registrations are answered from memory.
//
// Without a store (unit tests, or a gateway that keeps nothing) they live
// in memory only, and in cluster mode the replicas share them over NATS
// (gateway/cluster). With a store NATS does not carry them: the store's
// notifications reach every replica in commit order and each replica
// re-reads the row, so a late NATS message can never bring back a
// registration deleted since. Run requires a shared store in cluster mode,
// so the NATS path only serves gateways built without one.

// registrationSealPurpose derives the sealing key from a longer-lived key,
// so the key that signs tokens never encrypts anything itself.
const registrationSealPurpose = "registration seal"

// storeTimeout bounds one store operation of a registration: a database
// that does not answer must not hold a client's request forever.
const storeTimeout = 10 * time.Second

// registrationKey picks the key sealing the registrations' client tokens
// kept in the store: Options.RegistrationKey if given, else one derived
// from the signing key (the same on every gateway sharing a database). nil
// means there is none: registrations are then not kept.
func registrationKey(cfg Config) []byte {
	switch {
	case cfg.Options.RegistrationKey != nil:
		return cfg.Options.RegistrationKey
	case len(cfg.SigningKey) > 0:
		return RegistrationKeyFrom(cfg.SigningKey)
	}
	return nil
}

// RegistrationKeyFrom derives Options.RegistrationKey from the gateway's
// signing key, so that every process holding that key (a PostgreSQL
// deployment's gateways, whether or not they form a cluster) opens the
// client tokens the others kept.
func RegistrationKeyFrom(signingKey []byte) []byte {
	return deriveKey(signingKey, registrationSealPurpose)
}

// deriveKey is a 32-byte key for purpose derived from key.
func deriveKey(key []byte, purpose string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(purpose))
	return m.Sum(nil)
}

// keepsRegistrations says whether registrations go to the store.
func (g *Gateway) keepsRegistrations() bool {
	return g.opts.Store != nil && g.opts.RegistrationKey != nil
}

// register is POST /api/gateway/register, the original client's
// registration and (repeated every 60 s) heartbeat (legacy.DecodeRegister),
// the secret checked as a connector credential for that name. 201
// {"registered":name} when new, 200 when it was known. A new or changed
// registration is saved before it is answered, so it survives a restart
// from then on; a heartbeat only touches the saved one.
func (g *Gateway) register(c echo.Context) error {
	reg, secret, err := legacy.DecodeRegister(c.Request().Body)
	if err != nil {
		return echo.NewHTTPError(http.StatusBadRequest, err.Error())
	}
	p, err := g.verifyConnector(c, ActionRegister, secret, reg.Name)
	if err != nil {
		return err
	}
	if !presence.ValidName(reg.Name) {
		return echo.NewHTTPError(http.StatusBadRequest, invalidNameMessage)
	}
	if err := g.bindName(c.Request().Context(), reg.Name, p); err != nil {
		g.auditRegistration(c, ActionRegister, reg.Name, p, errorStatus(err), "refused: the name's binding was not saved")
		return err
	}
	now := time.Now()
	// With a store, whether the name is new is the store's answer: saving
	// notifies this process too, and the reload it triggers may record
	// the registration in memory before Upsert below would have.
	saved, created, changed := g.keepsRegistrations(), false, false
	if saved {
		var err error
		if created, changed, err = g.saveRegistration(c.Request().Context(), reg, now); err != nil {
			g.auditRegistration(c, ActionRegister, reg.Name, p, http.StatusServiceUnavailable, "not saved: the store failed")
			return g.storeUnavailable("registration not saved", err)
		}
	}
	if g.registrations.Upsert(reg, now) && !saved {
		created = true
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	// A heartbeat that changes nothing (every 60 s per client) is no
	// change to record.
	switch {
	case created:
		g.auditRegistration(c, ActionRegister, reg.Name, p, status, "new registration")
	case changed:
		g.auditRegistration(c, ActionRegister, reg.Name, p, status, "changed: new URL or client token")
	}
	if g.opts.Store == nil {
		g.shareRegistration(reg)
	}
	g.registrationHolds.hold(g, p, reg.Name)
	return c.JSON(status, map[string]string{"registered": reg.Name})
}

// saveRegistration writes a new or changed registration to the store, or
// touches it for a heartbeat that changes nothing, and reports whether the
// store had no registration for the name before, and whether it changed
// one. A failed touch is only logged: the registration is saved already.
func (g *Gateway) saveRegistration(ctx context.Context, reg legacy.Registration, now time.Time) (created, changed bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	merged, changed := g.registrations.Merge(reg)
	if !changed {
		if err := g.opts.Store.TouchRegistration(ctx, reg.Name, now); err != nil && !errors.Is(err, store.ErrNotFound) {
			// Through an outage, a sign of it rather than a line per
			// client a minute.
			g.storeFailed("registration heartbeat of "+reg.Name+" not saved", err)
			return false, false, nil
		} else if err == nil {
			return false, false, nil
		}
		// Not in the store (deleted by another process meanwhile): put it.
	}
	sealed, err := legacy.SealToken(g.opts.RegistrationKey, merged.Name, merged.ClientToken)
	if err != nil {
		return false, false, err
	}
	registeredAt := now
	old, err := g.opts.Store.GetRegistration(ctx, reg.Name)
	switch {
	case err == nil:
		registeredAt = old.RegisteredAt
	case errors.Is(err, store.ErrNotFound):
		created = true
	default:
		return false, false, err
	}
	return created, changed, g.opts.Store.PutRegistration(ctx, store.Registration{
		Name: merged.Name, URL: merged.URL, TokenSealed: sealed, RegisteredAt: registeredAt, LastHeartbeat: now,
	})
}

// unregister is DELETE /api/gateway/register/:name, authenticated with
// Authorization: Bearer <connector credential for name>. The name leaves
// the endpoints list and its requests are answered 404, on every process
// sharing the store, until it registers again.
func (g *Gateway) unregister(c echo.Context) error {
	name := c.Param("name")
	p, err := g.verifyConnector(c, ActionUnregister, auth.Credential(c.Request()), name)
	if err != nil {
		return err
	}
	if g.keepsRegistrations() {
		ctx, cancel := context.WithTimeout(c.Request().Context(), storeTimeout)
		defer cancel()
		if err := g.opts.Store.DeleteRegistration(ctx, name); err != nil && !errors.Is(err, store.ErrNotFound) {
			g.auditRegistration(c, ActionUnregister, name, p, http.StatusServiceUnavailable, "not deleted: the store failed")
			return g.storeUnavailable("registration not deleted", err)
		}
	}
	g.registrations.Remove(name)
	g.registrationHolds.forget(name)
	if g.opts.Store == nil {
		g.shareRegistration(legacy.Registration{Name: name, Removed: true})
	}
	g.auditRegistration(c, ActionUnregister, name, p, http.StatusOK, "")
	return c.JSON(http.StatusOK, map[string]string{"unregistered": name})
}

// verifyConnector checks a registration's credential for name (action is
// ActionRegister or ActionUnregister). The shared secret may register any
// name but one a connector token has held (secretRefusal): a registration
// carries the client token the gateway sends to the legacy client holding
// the name, so a secret's registration would break it. A refused
// credential is audited with every refusal (auditrefusals.go); a refused
// secret here.
func (g *Gateway) verifyConnector(c echo.Context, action, credential, name string) (auth.Principal, error) {
	p, err := g.opts.Auth.Verify(credential, auth.RoleConnector, name)
	if err != nil {
		return p, g.refusal(err)
	}
	if p.Shared {
		if err := g.secretRefusal(name); err != nil {
			reason := presence.ErrTokenBound.Error()
			if errorStatus(err) != http.StatusConflict {
				reason = "name bindings not loaded yet"
			}
			g.opts.Logger.Warn("registration refused", "connector", name, "reason", reason)
			g.auditRegistration(c, action, name, p, errorStatus(err), "refused: "+reason)
			return p, err
		}
	}
	return p, nil
}

// auditRegistration records a registration's change or refusal, naming
// the credential (a token by id and note, or the shared secret). The
// secret may register any free name, as often as it likes: coalesced per
// name.
func (g *Gateway) auditRegistration(c echo.Context, action, name string, p auth.Principal, status int, target string) {
	tokenID, actor := principalActor(p)
	markAudited(c)
	if !presence.ValidName(name) {
		name = ""
	}
	g.audit.addCoalesced(action+"|"+name, auditEntry(tokenID, actor, c.RealIP(), action, name, target, status))
}

// unregistered reports whether requests for name are to be answered 404
// because its original client unregistered: its registration was removed
// and no tunnel connector holds the name (an h2 connector does not
// register, so a tombstone says nothing about it).
func (g *Gateway) unregistered(name string) bool {
	if !g.registrations.Removed(name) {
		return false
	}
	conn, _, known := g.presence.Get(name)
	if !known {
		return true
	}
	t, ok := conn.(*tracked)
	return !ok || t.protocol == metrics.ProtocolLegacy
}

// refuseUnregistered answers 404 for a name whose original client
// unregistered, as the original gateway did; nil lets the request on.
func (g *Gateway) refuseUnregistered(name string) error {
	if g.unregistered(name) {
		return echo.NewHTTPError(http.StatusNotFound, "connector not found: "+name+" (unregistered)")
	}
	return nil
}

// listed leaves out of an endpoints list the original clients that
// unregistered.
func listed[E any](g *Gateway, eps []E, nameOf func(E) (name, protocol string)) []E {
	out := eps[:0:0]
	for _, e := range eps {
		name, protocol := nameOf(e)
		if protocol == metrics.ProtocolLegacy && g.registrations.Removed(name) {
			continue
		}
		out = append(out, e)
	}
	return out
}

// withoutUnregistered is listed for this process's own endpoints.
func (g *Gateway) withoutUnregistered(eps []presence.Endpoint) []presence.Endpoint {
	return listed(g, eps, func(e presence.Endpoint) (string, string) { return e.Name, e.Protocol })
}

// watchRegistrations loads the kept registrations and keeps them current
// from the store's notifications until ctx ends or the store closes. It
// subscribes before loading, so no change is missed between the two. A
// load that fails is logged and the gateway serves on: each client's next
// heartbeat registers it again.
func (g *Gateway) watchRegistrations(ctx context.Context) {
	if !g.keepsRegistrations() {
		return
	}
	changes, err := g.opts.Store.Subscribe(ctx)
	if err != nil {
		g.opts.Logger.Warn("registrations: no notifications from the store; other processes' changes will not be seen", "err", err.Error())
	}
	g.reloadRegistrations(ctx)
	if changes == nil {
		return
	}
	go func() {
		for ch := range changes {
			switch ch.Kind {
			case store.ChangeRegistration:
				for _, name := range ch.IDs {
					g.reloadRegistration(ctx, name)
				}
			case store.ChangeReload:
				g.reloadRegistrations(ctx)
			}
		}
	}()
}

// reloadRegistrations replaces the registrations in memory with the
// store's: those gone from it leave a tombstone (every registration is
// saved, so one missing was deleted). Only names known before the store
// is read may go: one registered here meanwhile may be missing from a
// list read before its commit.
func (g *Gateway) reloadRegistrations(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	before := g.registrations.Names()
	regs, err := g.opts.Store.ListRegistrations(ctx)
	if err != nil {
		if ctx.Err() == nil {
			g.opts.Logger.Warn("registrations not loaded; the clients' next heartbeats register them again", "err", err.Error())
		}
		return
	}
	kept := make(map[string]bool, len(regs))
	for _, r := range regs {
		kept[r.Name] = true
		g.loadRegistration(r)
	}
	for _, name := range before {
		if !kept[name] {
			g.registrations.Remove(name)
		}
	}
}

// reloadRegistration reads one registration again after a notification.
func (g *Gateway) reloadRegistration(ctx context.Context, name string) {
	ctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	r, err := g.opts.Store.GetRegistration(ctx, name)
	switch {
	case errors.Is(err, store.ErrNotFound):
		g.registrations.Remove(name)
	case err != nil:
		if ctx.Err() == nil {
			g.opts.Logger.Warn("registration not reloaded", "connector", name, "err", err.Error())
		}
	default:
		g.loadRegistration(r)
	}
}

// loadRegistration puts a kept registration in memory. One whose token
// does not open (the key changed) is skipped: the client's next heartbeat
// brings the token again.
func (g *Gateway) loadRegistration(r store.Registration) {
	token, err := legacy.OpenToken(g.opts.RegistrationKey, r.Name, r.TokenSealed)
	if err != nil {
		g.opts.Logger.Warn("registration not loaded", "connector", r.Name, "err", err.Error())
		return
	}
	g.registrations.Load(legacy.Registration{Name: r.Name, URL: r.URL, ClientToken: token}, r.RegisteredAt, r.LastHeartbeat)
}
