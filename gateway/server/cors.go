package server

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/uncaged/workflow/gateway/auth"
	"github.com/uncaged/workflow/shared/origin"
)

// Dashboards on other origins (Options.AllowOrigins, --allow-origin).
//
// The original deployed its dashboard apart from its gateway and answered
// every origin's preflight with 204 and "*". By default this gateway
// serves only its own dashboard: another origin's preflight reaches the
// routes like any request, gets 401, and the browser reports "Failed to
// fetch". An operator who hosts a dashboard elsewhere lists its origin;
// for a listed origin, and only under /api:
//
//   - a preflight (OPTIONS with Access-Control-Request-Method) is answered
//     204 before authentication, since the browser sends it without
//     credentials;
//   - every answer, the gateway's own or a connector's, carries
//     Access-Control-Allow-Origin, so the page can read it. A connector's
//     own Access-Control-* headers are replaced: what a browser may read
//     from the gateway is the gateway operator's decision, not a machine's;
//   - Access-Control-Allow-Credentials is never sent, so a browser shows
//     the page no answer to a request that carried cookies. A dashboard
//     elsewhere authenticates with its token (Authorization: Bearer, or
//     ?key= for EventSource), which a page must know to send and which no
//     browser adds by itself.
//   - a request from a listed origin authenticated by the session cookie is
//     refused (403) before it reaches anything: without credentials allowed
//     the page could not read the answer anyway, but a request that
//     changes something would have done so by then. The cookie stays the
//     dashboard's own, as csrf.go explains; "*" changes none of this.

// corsMaxAge is how long a browser may cache a preflight's answer, in
// seconds: long enough to spare a preflight per request, short enough that
// an operator's change of the list is seen within minutes.
const corsMaxAge = "600"

// corsAllowMethods and corsAllowHeaders are what a listed origin's pages
// may send: the dashboard's methods and headers, nothing else.
const (
	corsAllowMethods = "GET, HEAD, POST, PUT, PATCH, DELETE"
	corsAllowHeaders = "Authorization, Content-Type, Accept, Last-Event-ID, X-Request-Id"
	// corsExposeHeaders are the answer's headers a page may read beyond
	// the CORS-safelisted ones: when to retry, and the request id to quote.
	corsExposeHeaders = "Retry-After, X-Request-Id"
)

// crossOriginCookieMessage is the 403 of a cookie-authenticated request
// from a listed origin.
const crossOriginCookieMessage = crossOriginMessage + "; a dashboard on another origin sends its token as Authorization: Bearer"

// ParseAllowedOrigins reads the --allow-origin values: origins
// ("https://dash.example.com", "http://127.0.0.1:5173") or "*", each value
// possibly a comma- or space-separated list (the environment variable's
// form). An origin is a scheme (http or https), a host and an optional
// port, with nothing after: no path, query, fragment or user. Scheme and
// host are lower-cased and a default port dropped, as a browser writes
// its Origin header.
func ParseAllowedOrigins(values []string) ([]string, error) {
	var out []string
	for _, v := range values {
		for _, s := range strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\n' }) {
			o, err := normalizeOrigin(s)
			if err != nil {
				return nil, err
			}
			out = append(out, o)
		}
	}
	return out, nil
}

// normalizeOrigin checks one --allow-origin value and writes it as a
// browser's Origin header would.
func normalizeOrigin(s string) (string, error) {
	if s == "*" {
		return s, nil
	}
	o, err := origin.Normalize(s)
	if err != nil {
		return "", fmt.Errorf("origin %q: %v (an origin is scheme://host[:port], e.g. https://dash.example.com, or *)", s, err)
	}
	return o, nil
}

// corsPolicy answers the cross-origin requests of the listed origins.
type corsPolicy struct {
	origins map[string]bool
	any     bool
}

// newCORSPolicy builds the policy of Options.AllowOrigins, nil when none
// is listed: then nothing about a request changes.
func newCORSPolicy(origins []string) *corsPolicy {
	if len(origins) == 0 {
		return nil
	}
	p := &corsPolicy{origins: map[string]bool{}}
	for _, o := range origins {
		if o == "*" {
			p.any = true
		}
		p.origins[o] = true
	}
	return p
}

// allowed is the Access-Control-Allow-Origin to answer origin with, "" if
// it is not listed. "*" lets every page read what it asked for with its
// token, as the original did; with a list, the origin itself, so a cache
// (Vary: Origin) keeps answers for different origins apart.
func (p *corsPolicy) allowed(origin string) string {
	switch {
	case p == nil || origin == "" || origin == "null":
		return ""
	case p.origins[origin]:
		return origin
	case p.any:
		return "*"
	}
	return ""
}

// middleware is the echo pre-middleware of the policy (nil included),
// before routing: a preflight has no route of its own and must not meet
// authentication. The gateway's own origin needs none of this, and a
// request without Origin is not a browser's cross-origin one: both pass
// as they are, at the cost of a header look-up.
func (p *corsPolicy) middleware(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		origin := r.Header.Get("Origin")
		if origin == "" || !underAPI(r.URL.Path) || sameOriginRequest(r, origin) {
			return next(c)
		}
		allow := p.allowed(origin)
		if allow == "" {
			// Not listed: no CORS headers at all, a machine's included.
			c.Response().Writer = &corsWriter{ResponseWriter: c.Response().Writer}
			return next(c)
		}
		h := c.Response().Header()
		h.Add("Vary", "Origin")
		if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
			h.Add("Vary", "Access-Control-Request-Method")
			h.Add("Vary", "Access-Control-Request-Headers")
			h.Set("Access-Control-Allow-Origin", allow)
			h.Set("Access-Control-Allow-Methods", corsAllowMethods)
			h.Set("Access-Control-Allow-Headers", corsAllowHeaders)
			h.Set("Access-Control-Max-Age", corsMaxAge)
			return c.NoContent(http.StatusNoContent)
		}
		c.Response().Writer = &corsWriter{ResponseWriter: c.Response().Writer, allow: allow}
		if _, from := auth.CredentialFrom(r); from == auth.FromCookie {
			return echo.NewHTTPError(http.StatusForbidden, crossOriginCookieMessage)
		}
		return next(c)
	}
}

// underAPI says whether path is /api or under it.
func underAPI(path string) bool {
	return path == "/api" || strings.HasPrefix(path, "/api/")
}

// sameOriginRequest says whether the browser says r comes from the
// gateway's own pages: Sec-Fetch-Site, or failing that an Origin naming
// the Host it was sent to. Such a request needs no CORS headers, and
// listing the gateway's own origin must not take its session cookie away.
func sameOriginRequest(r *http.Request, origin string) bool {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" {
		return site == "same-origin"
	}
	u, err := url.Parse(origin)
	return err == nil && u.Host != "" && strings.EqualFold(u.Host, r.Host)
}

// corsWriter puts a listed origin's CORS headers on an answer as its
// header is written, in place of any a connector sent; for an origin not
// listed (allow empty) it only takes the connector's away.
type corsWriter struct {
	http.ResponseWriter
	allow string
	wrote bool
}

// WriteHeader implements http.ResponseWriter.
func (w *corsWriter) WriteHeader(code int) {
	if !w.wrote && (code < 100 || code >= 200) {
		w.wrote = true
		h := w.Header()
		for k := range h {
			if strings.HasPrefix(k, "Access-Control-") {
				delete(h, k)
			}
		}
		if w.allow != "" {
			h.Set("Access-Control-Allow-Origin", w.allow)
			h.Set("Access-Control-Expose-Headers", corsExposeHeaders)
		}
	}
	w.ResponseWriter.WriteHeader(code)
}

// Write implements http.ResponseWriter.
func (w *corsWriter) Write(p []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(p)
}

// Flush passes a stream's flush on: live views go through here.
func (w *corsWriter) Flush() { _ = http.NewResponseController(w.ResponseWriter).Flush() }

// Unwrap gives http.ResponseController the writer underneath.
func (w *corsWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
