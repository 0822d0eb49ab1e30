package server

import (
	"net"
	"net/http"
	"net/url"
	"strings"

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
// current browser sends it) or, failing that, an Origin equal to the
// origin the request arrived at — its scheme (https only over TLS, or
// from a trusted proxy that says so), host and port, as the browser
// compares origins. A host alone is not enough: http://host and
// https://host are different origins, and a page served over one must
// not act on the other. A request with neither header is not from a
// browser, and only a browser adds a cookie by itself. Bearer tokens and
// ?key= are unaffected: the sender had to know them. Login is checked
// whatever it carries, or another site could log the browser in to a
// session of the attacker's choosing.
//
// Dashboards served from another origin (--allow-origin) are not trusted
// here: they call the API with a bearer token, and a request of theirs
// that carries the cookie is refused before it gets this far (cors.go).

// crossOriginMessage is the start of a 403 for a cross-origin request.
const crossOriginMessage = "cross-origin request refused: the session cookie works only for the dashboard's own pages"

// sameOrigin answers 403 JSON, with the reason, for a cross-origin
// request that changes something.
func (g *Gateway) sameOrigin(r *http.Request) error {
	why := trustedProxies(g.opts.TrustedProxies).crossOrigin(r)
	if why == "" {
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
	return echo.NewHTTPError(http.StatusForbidden, crossOriginMessage+" ("+why+")")
}

// crossOrigin says why r, if it changes something, does not come from a
// page of the origin it arrived at; "" when it does, or when no browser
// sent it.
func (t trustedProxies) crossOrigin(r *http.Request) string {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return ""
	}
	switch site := r.Header.Get("Sec-Fetch-Site"); site {
	case "":
		// An older browser, or not a browser: Origin decides.
	case "same-origin", "none":
		// The browser compared the page's origin with this URL's itself;
		// "none" is the person's own action (an address typed, a bookmark).
		return ""
	default:
		return "the browser says the request is " + clipHeader(site) + ", not same-origin"
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return ""
	}
	here := t.origin(r)
	there, ok := parseOrigin(origin)
	switch {
	case !ok:
		return "Origin " + clipHeader(origin) + " is not an origin of a page that may use the cookie"
	case there != here:
		return "Origin " + clipHeader(origin) + " is not the origin the request came to, " + here.String()
	}
	return ""
}

// webOrigin is an origin as browsers compare them: scheme, host and port,
// the host in lower case, the port always spelled out.
type webOrigin struct{ scheme, host, port string }

func (o webOrigin) String() string {
	if (o.scheme == "http" && o.port == "80") || (o.scheme == "https" && o.port == "443") {
		return o.scheme + "://" + bracketed(o.host)
	}
	return o.scheme + "://" + net.JoinHostPort(o.host, o.port)
}

// bracketed writes an IPv6 address as a URL host.
func bracketed(host string) string {
	if strings.Contains(host, ":") {
		return "[" + host + "]"
	}
	return host
}

// origin is the origin r arrived at: its Host, over TLS or not (the
// trusted proxy's X-Forwarded-Proto when it came through one).
func (t trustedProxies) origin(r *http.Request) webOrigin {
	scheme := "http"
	if t.isHTTPS(r) {
		scheme = "https"
	}
	u := url.URL{Host: r.Host}
	return webOrigin{scheme: scheme, host: strings.ToLower(u.Hostname()), port: portOr(u.Port(), scheme)}
}

// parseOrigin reads an Origin header: scheme://host[:port] and nothing
// more (no path, not even "/", no user, query or fragment), as a browser
// serializes it. "null" (an opaque origin: a sandboxed frame, a file) is
// no origin.
func parseOrigin(s string) (webOrigin, bool) {
	u, err := url.Parse(s)
	if err != nil || u.Opaque != "" || u.User != nil || u.Path != "" || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || u.Hostname() == "" {
		return webOrigin{}, false
	}
	scheme := strings.ToLower(u.Scheme)
	if scheme != "http" && scheme != "https" {
		return webOrigin{}, false
	}
	return webOrigin{scheme: scheme, host: strings.ToLower(u.Hostname()), port: portOr(u.Port(), scheme)}, true
}

// portOr is port, or the scheme's default when it is empty.
func portOr(port, scheme string) string {
	if port != "" {
		return port
	}
	if scheme == "https" {
		return "443"
	}
	return "80"
}

// clipHeader is a header value fit for a message: the client wrote it,
// so it is quoted and kept short.
func clipHeader(v string) string {
	if len(v) > 100 {
		v = v[:100] + "…"
	}
	return "\"" + strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || r == '"' {
			return '?'
		}
		return r
	}, v) + "\""
}
