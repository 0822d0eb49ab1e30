package server

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/uncaged/workflow/gateway/auth"
	"github.com/uncaged/workflow/gateway/cluster"
	"github.com/uncaged/workflow/gateway/presence"
	"github.com/uncaged/workflow/shared/tunnel"
)

// Refused changes. Every request that would change something — any
// method but GET, HEAD and OPTIONS, and a connector's GET /ws/connect —
// answered 401 or 403 is an audit entry (ActionRefused), whichever route
// and whichever check refused it: a missing, wrong, expired or revoked
// credential, another connector's token, a cookie from another origin, a
// forged cluster hop. auditRefusals sees every answer, before routing, so
// no route can be left out; a route that audits its own refusals (login,
// logout, connections, registrations, proxied changes) marks the request
// (markAudited) and is not recorded twice.
//
// The entry names the refusal's reason code, the method and path (never
// the query, which may carry ?key=), the machine when the path names one,
// and the client's address; never the credential, nor who it claimed to
// be: a refused credential proves nothing. Anyone can cause these, so
// they are coalesced per client address (auditcoalesce.go): a flood costs
// a few entries a minute and a count.

// auditedKey marks a request whose outcome is audited already.
const auditedKey = "audit.recorded"

// markAudited says the request's audit entry is written: auditRefusals
// leaves it alone.
func markAudited(c echo.Context) { c.Set(auditedKey, true) }

// changesState says whether r would change something if allowed.
func changesState(r *http.Request) bool {
	return !isSafe(r.Method) || r.URL.Path == tunnel.ConnectPath
}

// auditRefusals serves c with next and records the refused change, if it
// was one (see above). It runs in guard, the outermost middleware.
func (g *Gateway) auditRefusals(c echo.Context, next echo.HandlerFunc) error {
	r := c.Request()
	if g.opts.Store == nil || !changesState(r) {
		return next(c)
	}
	// Another replica forwarded it: that one records what came of it.
	hop := r.Header.Get(cluster.HopHeader) != ""
	if hop && g.opts.Cluster != nil {
		if _, err := g.opts.Cluster.VerifyHop(r); err == nil {
			return next(c)
		}
	}
	err := next(c)
	status := c.Response().Status
	if err != nil && !c.Response().Committed {
		status = errorStatus(err)
	}
	if (status != http.StatusUnauthorized && status != http.StatusForbidden) || c.Get(auditedKey) != nil {
		return err
	}
	target := fmt.Sprintf("%s %s (%s)", r.Method, r.URL.Path, refusalReason(err, status, hop))
	g.audit.addCoalesced(ActionRefused+"|"+c.RealIP(), auditEntry("", "", c.RealIP(), ActionRefused, refusedMachine(r), target, status))
	return err
}

// Reasons of refusals that are not a credential's (auth's Reason codes).
const (
	refusedCrossOrigin = "cross-origin"
	refusedHop         = "cluster-hop"
)

// refusalReason is the code an entry gives for a refusal: auth's reason
// for a refused credential, else what refused it.
func refusalReason(err error, status int, hop bool) string {
	if reason := auth.ReasonOf(err); reason != "" {
		return reason
	}
	if he, ok := err.(*echo.HTTPError); ok {
		msg := fmt.Sprint(he.Message)
		if strings.HasPrefix(msg, crossOriginMessage) || msg == crossOriginCookieMessage {
			return refusedCrossOrigin
		}
	}
	if hop {
		return refusedHop
	}
	return strings.ToLower(strings.ReplaceAll(http.StatusText(status), " ", "-"))
}

// refusedMachine is the connector a refused request named, if it names
// one validly: ?name= of /ws/connect, a proxied path's or a registration's
// name.
func refusedMachine(r *http.Request) string {
	name := ""
	switch path := r.URL.Path; {
	case path == tunnel.ConnectPath:
		name = r.URL.Query().Get("name")
	case strings.HasPrefix(path, "/api/gateway/register/"):
		name = strings.TrimPrefix(path, "/api/gateway/register/")
	default:
		name, _, _ = splitProxied(path)
	}
	if !presence.ValidName(name) {
		return ""
	}
	return name
}
