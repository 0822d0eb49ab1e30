package server

import (
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/uncaged/workflow/gateway/auth"
	"github.com/uncaged/workflow/gateway/legacy"
)

// The original clients' registration routes (docs/compatibility.md,
// "JSON-frame clients"). What a registration is, the table of them and
// their sealing for the other replicas are gateway/legacy's; here are the
// routes and who may call them.

// register is POST /api/gateway/register, the original client's
// registration and (repeated every 60 s) heartbeat (legacy.DecodeRegister),
// the secret checked as a connector credential for that name. 201
// {"registered":name} when new, 200 when it was known.
func (g *Gateway) register(c echo.Context) error {
	reg, secret, err := legacy.DecodeRegister(c.Request().Body)
	if err != nil {
		return echo.NewHTTPError(http.StatusBadRequest, err.Error())
	}
	if err := g.verifyConnector(secret, reg.Name); err != nil {
		return err
	}
	if !connectorName.MatchString(reg.Name) {
		return echo.NewHTTPError(http.StatusBadRequest, invalidNameMessage)
	}
	status := http.StatusOK
	if g.registrations.Upsert(reg, time.Now()) {
		status = http.StatusCreated
	}
	g.shareRegistration(reg)
	return c.JSON(status, map[string]string{"registered": reg.Name})
}

// unregister is DELETE /api/gateway/register/:name, authenticated with
// Authorization: Bearer <connector credential for name>.
func (g *Gateway) unregister(c echo.Context) error {
	name := c.Param("name")
	if err := g.verifyConnector(auth.Credential(c.Request()), name); err != nil {
		return err
	}
	g.registrations.Remove(name)
	g.shareRegistration(legacy.Registration{Name: name, Removed: true})
	return c.JSON(http.StatusOK, map[string]string{"unregistered": name})
}

// verifyConnector checks a registration's credential for name. The shared
// secret may register any name but one a token-bound connector holds: a
// registration carries the client token the gateway sends to the legacy
// client holding the name, so a secret's registration would break it.
func (g *Gateway) verifyConnector(credential, name string) error {
	p, err := g.opts.Auth.Verify(credential, auth.RoleConnector, name)
	if err != nil {
		g.metrics.AuthFailure(authReason(err))
		return echo.NewHTTPError(auth.Status(err), err.Error())
	}
	if p.Shared && g.heldByToken(name) {
		g.opts.Logger.Warn("registration refused", "connector", name, "reason", "held by a token-bound connector")
		return echo.NewHTTPError(http.StatusConflict, heldMessage(name))
	}
	return nil
}
