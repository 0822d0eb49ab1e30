// Package server is the gateway's HTTP side: connectors dial in at
// /ws/connect, the dashboard lists them at /api/gateway/endpoints and
// reaches each one's API at /api/clients/<name>/... — proxied through that
// connector's tunnel with httputil.ReverseProxy, streaming included.
package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httputil"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"

	"github.com/uncaged/workflow/gateway/auth"
	"github.com/uncaged/workflow/gateway/presence"
	"github.com/uncaged/workflow/shared/tunnel"
)

// Options configure a gateway.
type Options struct {
	Auth *auth.Authority
	// Heartbeat is the ping interval (0: 15 s); two misses mark a connector
	// offline.
	Heartbeat time.Duration
	// RequestTimeout bounds a proxied request that is not a stream (0: 60 s).
	RequestTimeout time.Duration
	// MaxBody bounds a proxied request body (0: 8 MiB).
	MaxBody int64
	Logger  *slog.Logger
	// Dashboard serves "/" (nil: a plain page saying the dashboard is not
	// built into this binary).
	Dashboard http.Handler
}

// Gateway is a running gateway.
type Gateway struct {
	opts     Options
	presence *presence.Registry
	proxy    *httputil.ReverseProxy
	echo     *echo.Echo
}

// connectorName is what a connector may call itself: a host-name label.
var connectorName = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// New builds a gateway.
func New(opts Options) *Gateway {
	if opts.Heartbeat == 0 {
		opts.Heartbeat = 15 * time.Second
	}
	if opts.RequestTimeout == 0 {
		opts.RequestTimeout = 60 * time.Second
	}
	if opts.MaxBody == 0 {
		opts.MaxBody = 8 << 20
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	g := &Gateway{opts: opts, presence: presence.New(opts.Heartbeat)}
	g.presence.OnChange = func(name, status string) { opts.Logger.Info("connector "+status, "connector", name) }
	g.proxy = &httputil.ReverseProxy{
		Rewrite:   g.rewrite,
		Transport: roundTripperFunc(g.roundTrip),
		// 0: ReverseProxy flushes event streams and bodies of unknown length
		// on every write by itself, and batches the rest.
		FlushInterval: 0,
		BufferPool:    newBufferPool(),
		ErrorHandler:  g.proxyError,
	}
	g.echo = g.routes()
	return g
}

// Handler is the gateway's HTTP handler.
func (g *Gateway) Handler() http.Handler { return g.echo }

// Presence exposes the connector registry (status commands, tests).
func (g *Gateway) Presence() *presence.Registry { return g.presence }

// Shutdown closes every tunnel with a reason the connectors log.
func (g *Gateway) Shutdown() { g.presence.CloseAll("gateway shutting down") }

func (g *Gateway) routes() *echo.Echo {
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = jsonErrorHandler
	e.Use(middleware.Recover(), middleware.RequestID())
	e.GET("/healthz", func(c echo.Context) error { return c.JSON(http.StatusOK, map[string]bool{"ok": true}) })
	e.GET("/readyz", func(c echo.Context) error { return c.JSON(http.StatusOK, map[string]bool{"ok": true}) })
	e.GET(tunnel.ConnectPath, g.connect)
	api := e.Group("/api")
	api.POST("/gateway/login", g.login)
	api.POST("/gateway/logout", g.logout)
	dash := api.Group("", g.requireDashboard)
	dash.GET("/gateway/endpoints", func(c echo.Context) error { return c.JSON(http.StatusOK, g.presence.List()) })
	for _, prefix := range []string{"/clients/:name", "/agents/:name"} {
		dash.Any(prefix, g.forward)
		dash.Any(prefix+"/*", g.forward)
	}
	if g.opts.Dashboard != nil {
		e.GET("/*", echo.WrapHandler(g.opts.Dashboard))
	}
	return e
}

// jsonErrorHandler answers every error as {"error": "..."}.
func jsonErrorHandler(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	code, msg := http.StatusInternalServerError, "internal server error"
	var he *echo.HTTPError
	if errors.As(err, &he) {
		code = he.Code
		msg = fmt.Sprint(he.Message)
	}
	c.JSON(code, map[string]string{"error": msg})
}

func (g *Gateway) requireDashboard(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if _, err := g.opts.Auth.Verify(auth.Credential(c.Request()), auth.RoleDashboard, ""); err != nil {
			return echo.NewHTTPError(auth.Status(err), err.Error())
		}
		return next(c)
	}
}

// login checks a dashboard token and sets it as an HttpOnly cookie, so the
// browser's EventSource (which cannot send headers) is authenticated.
func (g *Gateway) login(c echo.Context) error {
	var body struct {
		Token string `json:"token"`
	}
	if err := json.NewDecoder(io.LimitReader(c.Request().Body, 64<<10)).Decode(&body); err != nil || body.Token == "" {
		return echo.NewHTTPError(http.StatusBadRequest, `body must be {"token": "..."}`)
	}
	if _, err := g.opts.Auth.Verify(body.Token, auth.RoleDashboard, ""); err != nil {
		return echo.NewHTTPError(auth.Status(err), err.Error())
	}
	c.SetCookie(&http.Cookie{Name: auth.CookieName, Value: body.Token, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: c.Request().TLS != nil || c.Request().Header.Get("X-Forwarded-Proto") == "https"})
	return c.JSON(http.StatusOK, map[string]bool{"ok": true})
}

func (g *Gateway) logout(c echo.Context) error {
	c.SetCookie(&http.Cookie{Name: auth.CookieName, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode})
	return c.JSON(http.StatusOK, map[string]bool{"ok": true})
}

// connect accepts a connector's tunnel.
func (g *Gateway) connect(c echo.Context) error {
	r := c.Request()
	name := r.URL.Query().Get("name")
	if name == "" {
		return echo.NewHTTPError(http.StatusBadRequest, "name required")
	}
	if !connectorName.MatchString(name) {
		return echo.NewHTTPError(http.StatusBadRequest, "invalid connector name: use lowercase letters, digits and hyphens (at most 63)")
	}
	p, err := g.opts.Auth.Verify(auth.Credential(r), auth.RoleConnector, name)
	if err != nil {
		g.opts.Logger.Warn("connector refused", "connector", name, "reason", err.Error(), "address", c.RealIP())
		return echo.NewHTTPError(auth.Status(err), err.Error())
	}
	if !tunnel.Offers(r) {
		return echo.NewHTTPError(http.StatusUpgradeRequired, "this gateway speaks the "+tunnel.Subprotocol+" tunnel; upgrade the connector")
	}
	ws, err := tunnel.Accept(c.Response(), r)
	if err != nil {
		return nil // Accept has answered the client
	}
	client, err := tunnel.NewClient(ws)
	if err != nil {
		return nil
	}
	g.presence.Attach(name, client, presence.Info{Version: r.Header.Get("X-Uncaged-Version"), Address: c.RealIP(), Protocol: "h2"})
	g.opts.Logger.Info("connector connected", "connector", name, "address", c.RealIP(), "shared_secret", p.Shared)
	return nil
}

type ctxKey struct{}

// forward proxies /api/clients/<name>/<rest> to the connector's /api/<rest>.
func (g *Gateway) forward(c echo.Context) error {
	name := c.Param("name")
	conn, online, known := g.presence.Get(name)
	switch {
	case !known:
		return echo.NewHTTPError(http.StatusNotFound, "connector not found: "+name)
	case !online:
		return echo.NewHTTPError(http.StatusServiceUnavailable, "connector offline: "+name)
	}
	r := c.Request()
	if r.ContentLength > g.opts.MaxBody {
		return echo.NewHTTPError(http.StatusRequestEntityTooLarge, "request body too large")
	}
	r.Body = http.MaxBytesReader(c.Response(), r.Body, g.opts.MaxBody)
	ctx := context.WithValue(r.Context(), ctxKey{}, conn)
	if !isStream(r) {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, g.opts.RequestTimeout)
		defer cancel()
	}
	g.proxy.ServeHTTP(c.Response(), r.WithContext(ctx))
	return nil
}

// isStream says whether a request opens a stream, which has no timeout.
func isStream(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), "text/event-stream") || strings.HasSuffix(r.URL.Path, "/live")
}

func (g *Gateway) rewrite(pr *httputil.ProxyRequest) {
	in := pr.In.URL.Path
	rest := ""
	for _, prefix := range []string{"/api/clients/", "/api/agents/"} {
		if after, ok := strings.CutPrefix(in, prefix); ok {
			if i := strings.IndexByte(after, '/'); i >= 0 {
				rest = after[i:]
			}
		}
	}
	pr.Out.URL.Scheme = "http"
	pr.Out.URL.Host = "connector"
	pr.Out.URL.Path = "/api" + rest
	pr.Out.URL.RawPath = ""
	pr.Out.URL.RawQuery = stripCredentialQuery(pr.In.URL.Query()).Encode()
	pr.Out.Host = "connector"
	// The dashboard's credentials are for the gateway, not the connector.
	pr.Out.Header.Del("Authorization")
	pr.Out.Header.Del("Cookie")
	pr.SetXForwarded()
}

func stripCredentialQuery(q url.Values) url.Values {
	out := url.Values{}
	for k, v := range q {
		if k != "key" && k != "secret" {
			out[k] = v
		}
	}
	return out
}

func (g *Gateway) roundTrip(r *http.Request) (*http.Response, error) {
	conn, ok := r.Context().Value(ctxKey{}).(presence.Conn)
	if !ok {
		return nil, errors.New("no connector for request")
	}
	return conn.RoundTrip(r)
}

func (g *Gateway) proxyError(w http.ResponseWriter, r *http.Request, err error) {
	status, msg := http.StatusBadGateway, "connector unreachable: "+err.Error()
	if errors.Is(err, context.DeadlineExceeded) {
		status, msg = http.StatusGatewayTimeout, "connector did not answer in time"
	}
	if errors.Is(r.Context().Err(), context.Canceled) {
		return // the client went away; nobody to answer
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	fmt.Fprintf(w, "{\"error\":%q}\n", msg)
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// bufferPool recycles the proxy's copy buffers instead of allocating 32 KiB
// per response.
type bufferPool struct{ p sync.Pool }

func newBufferPool() *bufferPool {
	return &bufferPool{p: sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}}
}

func (b *bufferPool) Get() []byte  { return *(b.p.Get().(*[]byte)) }
func (b *bufferPool) Put(x []byte) { b.p.Put(&x) }
