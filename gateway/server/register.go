package server

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/uncaged/workflow/gateway/auth"
)

// registration is what an original client told POST /api/gateway/register
// (docs/compatibility.md, "JSON-frame clients"). Its clientToken is the token the
// client's local API requires as X-Client-Token; the gateway adds it to
// every request it forwards to that client over the JSON-frame socket.
type registration struct {
	URL           string
	ClientToken   string
	RegisteredAt  time.Time
	LastHeartbeat time.Time
}

// registrations are the original clients' registrations, by name.
type registrations struct {
	mu sync.Mutex
	m  map[string]*registration
}

// upsert records a registration (or its heartbeat: the same call repeated)
// and reports whether it is new. An empty clientToken keeps the one known.
func (r *registrations) upsert(name, url, clientToken string, now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = map[string]*registration{}
	}
	reg, ok := r.m[name]
	if !ok {
		reg = &registration{RegisteredAt: now}
		r.m[name] = reg
	}
	reg.URL = strings.TrimSuffix(url, "/")
	if clientToken != "" {
		reg.ClientToken = clientToken
	}
	reg.LastHeartbeat = now
	return !ok
}

func (r *registrations) remove(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.m, name)
}

// clientToken is the token registered for name ("" if none).
func (r *registrations) clientToken(name string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if reg, ok := r.m[name]; ok {
		return reg.ClientToken
	}
	return ""
}

// register is POST /api/gateway/register, the original client's
// registration and (repeated every 60 s) heartbeat: body
// {"name","url","secret","clientToken"}, the secret checked as a connector
// credential for that name. 201 {"registered":name} when new, 200 when it
// was known.
func (g *Gateway) register(c echo.Context) error {
	var body struct {
		Name        string `json:"name"`
		URL         string `json:"url"`
		Secret      string `json:"secret"`
		ClientToken string `json:"clientToken"`
	}
	if err := json.NewDecoder(io.LimitReader(c.Request().Body, 64<<10)).Decode(&body); err != nil {
		return echo.NewHTTPError(http.StatusBadRequest, "body must be a JSON object {name, url, secret, clientToken}")
	}
	if body.Name == "" || body.URL == "" {
		return echo.NewHTTPError(http.StatusBadRequest, "name and url required")
	}
	if err := g.verifyConnector(body.Secret, body.Name); err != nil {
		return err
	}
	if !connectorName.MatchString(body.Name) {
		return echo.NewHTTPError(http.StatusBadRequest, invalidNameMessage)
	}
	status := http.StatusOK
	if g.registrations.upsert(body.Name, body.URL, body.ClientToken, time.Now()) {
		status = http.StatusCreated
	}
	g.shareRegistration(body.Name, body.URL, body.ClientToken, false)
	return c.JSON(status, map[string]string{"registered": body.Name})
}

// unregister is DELETE /api/gateway/register/:name, authenticated with
// Authorization: Bearer <connector credential for name>.
func (g *Gateway) unregister(c echo.Context) error {
	name := c.Param("name")
	if err := g.verifyConnector(auth.Credential(c.Request()), name); err != nil {
		return err
	}
	g.registrations.remove(name)
	g.shareRegistration(name, "", "", true)
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
