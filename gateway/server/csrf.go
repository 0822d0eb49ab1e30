package server

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/uncaged/workflow/gateway/cluster"
)

// Cross-site request forgery. The session cookie (set at login for the
// browser's EventSource) goes with every request the browser makes to the
// gateway, whichever page asks: SameSite=Strict keeps other sites' pages
// out, but not pages on sibling subdomains, which are the same site. So
// when the cookie is what authenticates a request that changes something
// (any method but GET, HEAD, OPTIONS), the browser must say the request
// comes from the dashboard's own origin: Sec-Fetch-Site same-origin (every
// current browser sends it) or, failing that, an Origin matching the Host.
// net/http's CrossOriginProtection does exactly that check. A request
// with neither header is not from a browser, and only a browser adds a
// cookie by itself. Bearer tokens and ?key= are unaffected: the sender had
// to know them. Login is checked whatever it carries, or another site
// could log the browser in to a session of the attacker's choosing.
//
// Dashboards served from another origin (--allow-origin) are not trusted
// here: they call the API with a bearer token, and a request of theirs
// that carries the cookie is refused before it gets this far (cors.go).

// crossOriginMessage is the start of a 403 for a cross-origin request.
const crossOriginMessage = "cross-origin request refused: the session cookie works only for the dashboard's own pages"

// sameOrigin answers 403 JSON, with the reason, for a cross-origin
// request that changes something.
func (g *Gateway) sameOrigin(r *http.Request) error {
	err := g.crossOrigin.Check(r)
	if err == nil {
		return nil
	}
	// A replica forwarding a dashboard request (cluster mode) has checked
	// it already, against the Host the browser used; here the Host is
	// this replica's own address.
	if g.opts.Cluster != nil && r.Header.Get(cluster.HopHeader) != "" {
		if _, herr := g.opts.Cluster.VerifyHop(r); herr == nil {
			return nil
		}
	}
	return echo.NewHTTPError(http.StatusForbidden, crossOriginMessage+" ("+err.Error()+")")
}
