// Package server is the gateway's HTTP side: connectors dial in at
// /ws/connect, the dashboard lists them at /api/gateway/endpoints and
// reaches each one's API at /api/clients/<name>/... — proxied through that
// connector's tunnel (relay.go), streaming included.
//
// A connector that offers the uncaged-workflow.h2 subprotocol gets the
// HTTP/2 tunnel (shared/tunnel); one that does not is an original
// TypeScript client speaking JSON frames, served through gateway/legacy.
// Both are the same presence.Conn to the proxy and can be online at once.
// The original clients' POST /api/gateway/register and DELETE
// /api/gateway/register/:name are accepted too (register.go; the
// registrations themselves are gateway/legacy's). An original client that
// registered a URL instead of keeping a socket is fetched there, only at
// the hosts Options.LegacyURLAllow admits (legacyurl.go); the original
// dashboard's live URL, /api/<name>/threads/<id>/live, is served as
// /api/clients/<name>/... (livealias.go); and dashboards hosted on the
// origins of Options.AllowOrigins may call /api with a token (cors.go).
//
// Limits (Options): request body size and the time to send it,
// connections and connection attempts per client address, idle
// keep-alive time, requests in flight per connector, WebSocket message
// size, request timeout (not for streams). Forwarding headers are believed
// only from Options.TrustedProxies (trust.go), and the session cookie only
// from the dashboard's own origin (csrf.go). GET /metrics serves
// Prometheus metrics (gateway/metrics), behind a bearer token when
// Options.MetricsToken is set.
//
// Run (run.go) is the serve command's body: listen, join the cluster,
// serve, and on shutdown tell the connectors why before draining.
package server

import (
	"cmp"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"github.com/labstack/echo/v4"

	"github.com/uncaged/workflow/gateway/auth"
	"github.com/uncaged/workflow/gateway/cluster"
	"github.com/uncaged/workflow/gateway/internal/eventstream"
	"github.com/uncaged/workflow/gateway/legacy"
	"github.com/uncaged/workflow/gateway/metrics"
	"github.com/uncaged/workflow/gateway/notify"
	"github.com/uncaged/workflow/gateway/presence"
	"github.com/uncaged/workflow/gateway/store"
	"github.com/uncaged/workflow/shared/echohead"
	"github.com/uncaged/workflow/shared/logging"
	"github.com/uncaged/workflow/shared/tunnel"
)

// Defaults of Options.
const (
	DefaultHeartbeat      = 15 * time.Second
	DefaultRequestTimeout = 60 * time.Second
	DefaultMaxBody        = 8 << 20
	// DefaultMaxConcurrent bounds the requests (streams included) in flight
	// to one connector.
	DefaultMaxConcurrent = 64
	// DefaultConnectRate is how many /ws/connect attempts one client
	// address may make a minute, on average, and DefaultConnectBurst how
	// many at once. A reconnecting connector backs off to one attempt every
	// 30 s, so honest clients stay far below.
	DefaultConnectRate  = 10
	DefaultConnectBurst = 20
	// DefaultWSReadLimit bounds one WebSocket message from a connector. For
	// an original (JSON-frame) client that is also its largest response.
	DefaultWSReadLimit = 4 << 20
)

// RestartGrace is how long after a start an unknown connector name is
// answered 503 "not connected (yet)" with Retry-After rather than 404:
// the connectors of a restarted gateway reconnect within their backoff cap
// (connector/link, 30 s), so until then unknown may only mean not back yet.
const RestartGrace = 30 * time.Second

// graceRetryAfter is the Retry-After of a 503 during RestartGrace, in
// seconds: most connectors are back within a few backoff steps.
const graceRetryAfter = "5"

// shutdownReason is what connectors are told when the gateway stops.
const shutdownReason = "gateway shutting down"

// Options configure a gateway. Zero values take the defaults above.
type Options struct {
	Auth *auth.Authority
	// Heartbeat is the ping interval (0: 15 s); two misses mark a connector
	// offline.
	Heartbeat time.Duration
	// RequestTimeout bounds a proxied request that is not a stream (0: 60 s).
	RequestTimeout time.Duration
	// MaxBody bounds a proxied request body (0: 8 MiB); larger is 413.
	MaxBody int64
	// MaxConcurrent bounds the requests in flight to one connector, streams
	// included (0: 64; negative: no bound). One more is answered 503
	// {"error":"connector busy: ..."} with Retry-After: 1.
	MaxConcurrent int
	// ConnectRate is how many /ws/connect attempts one client address may
	// make a minute on average (0: 10; negative: no limit), ConnectBurst
	// how many in a row (0: 20). One more is answered 429 with Retry-After.
	ConnectRate  float64
	ConnectBurst int
	// BodyTimeout bounds the time to read a request body, counted from its
	// headers, on every route (0: 60 s; negative: no bound). A body late
	// is 408 and its connection closed (bodytimeout.go). Streams send no
	// body and are not affected.
	BodyTimeout time.Duration
	// IdleTimeout is how long a keep-alive connection may wait for its next
	// request (0: 2 min; negative: no bound), for HTTPServer.
	IdleTimeout time.Duration
	// MaxConnsPerIP bounds the connections one client address holds open
	// at once (0: 256; negative: no bound), for Listener. Trusted proxies
	// are exempt: every client behind them shares their address.
	MaxConnsPerIP int
	// MaxConns bounds the connections open at once, all addresses
	// together (0: DefaultMaxConns, from the descriptor limit; negative:
	// no bound), for Listener: past it the connection waiting longest on
	// its client is closed to make room (connlimit.go).
	MaxConns int
	// RebalanceEvery is how often a replica of a cluster asks connectors
	// beyond its share to move to the others (0: DefaultRebalanceEvery;
	// negative: never; rebalance.go).
	RebalanceEvery time.Duration
	// WSReadLimit bounds one WebSocket message from a connector, tunnel or
	// legacy (0: 4 MiB); a larger one closes that connection.
	WSReadLimit int64
	// MetricsToken, when set, is the bearer token GET /metrics requires;
	// empty leaves /metrics open, as is conventional for a scrape target.
	MetricsToken string
	// TrustedProxies are the reverse proxies in front of the gateway: only
	// from these peers are X-Forwarded-For, X-Real-IP and
	// X-Forwarded-Proto believed (client address for the rate limits and
	// logs, the cookie's Secure flag), and they are exempt from
	// MaxConnsPerIP. Empty: the peer address is the client's.
	TrustedProxies []netip.Prefix
	Logger         *slog.Logger
	// Dashboard serves "/" (nil: a plain page saying the dashboard is not
	// built into this binary).
	Dashboard http.Handler
	// Cluster, when set, makes this gateway one replica of several
	// (cluster.go); the caller starts and closes it.
	Cluster *cluster.Cluster
	// Store, when set, is where the gateway keeps what outlives a restart
	// (Config.Store); the caller opens and closes it. Nil keeps nothing.
	Store store.Store
	// HistoryRetention is how long the fleet's thread history and the audit
	// log are kept (0: DefaultHistoryRetention).
	HistoryRetention time.Duration
	// RegistrationKey seals the client tokens of original clients'
	// registrations kept in Store (register.go); nil keeps registrations
	// in memory only. Run picks one when it is not given.
	RegistrationKey []byte
	// SpoolDir is where what the gateway writes to Store behind the
	// requests (audit entries, the fleet's threads, last-seen times)
	// spills while the store does not answer, past SpoolMemory bytes in
	// memory (0: DefaultSpoolMemory) and up to SpoolDisk bytes there (0:
	// DefaultSpoolDisk); a gateway started on it writes what a previous
	// one left there first (storewrites.go). Empty: memory only.
	SpoolDir               string
	SpoolMemory, SpoolDisk int64
	// AllowOrigins are the origins of dashboards hosted elsewhere whose
	// pages may call /api with a bearer token (cors.go,
	// ParseAllowedOrigins); empty: the gateway's own origin only.
	AllowOrigins []string
	// LegacyURLAllow is where original clients registered with a URL may
	// be fetched (legacyurl.go); nil: registered URLs are never fetched.
	LegacyURLAllow *legacy.AllowList
	// PublicURL is where users reach the gateway (https://host[/path]),
	// for the webhook URLs of triggers; empty: the address a request
	// came to.
	PublicURL string
	// Notify, when set, sends webhooks about threads that start waiting,
	// fail or complete (notify.go); it needs Store, which keeps them.
	Notify *notify.Config

	// notifyOptions, when set, adjusts the sender's options (a test's
	// backoff and poll).
	notifyOptions func(*notify.Options)
	// triggerClock, when set, is the triggers' clock (a test's own):
	// when schedules fire and runs expire.
	triggerClock func() time.Time
	// limited rate-limits the log lines a party without a credential can
	// cause (bounds.go); Run shares its own with the cluster.
	limited *logging.Limited
	// streams are the event streams the gateway relays, which a stop ends
	// at an event's end (nil: New makes them); Run shares them with the
	// cluster, which relays streams to other replicas.
	streams *eventstream.Set
	// storeCheckEvery is how often Store is checked (0: storeCheckEvery).
	storeCheckEvery time.Duration
	// fleetTouchEvery is how often the connected machines are marked seen
	// (0: fleetTouchEvery).
	fleetTouchEvery time.Duration
}

// Gateway is a running gateway.
type Gateway struct {
	opts          Options
	presence      *presence.Registry
	echo          *echo.Echo
	metrics       *metrics.Gateway
	connectLimit  *rateLimiter
	registrations legacy.Registrations
	// registrationHolds end registrations with their credentials
	// (credentials.go).
	registrationHolds registrationHolds
	shuttingDown      atomic.Bool
	// stopping is set when a stop begins, before the connectors move
	// (move.go): /readyz fails and new tunnels are refused from then on.
	stopping atomic.Bool
	// movingOut are the connectors a rebalance asked to move: their new
	// tunnels are refused here (rebalance.go).
	movingOut sync.Map
	// started is when New ran, for RestartGrace; now is the clock (a
	// test's own).
	started time.Time
	now     func() time.Time
	// audit records changes made through the gateway (audit.go);
	// stopWatching ends the store subscription of the registrations
	// (register.go).
	audit *auditLog
	// writes is the queue of what is written to the store behind the
	// requests, nil without a store (storewrites.go); outage follows the
	// store's outages (storeoutage.go).
	writes       *storeWrites
	outage       storeOutage
	stopWatching context.CancelFunc
	// notifier sends the webhooks about threads, nil when none are
	// configured (notify.go).
	notifier *notifier
	// triggers fire the schedules and send the triggers' runs to their
	// machines, nil without a store (triggerruns.go).
	triggers *triggerLoops
	// cors answers dashboards on other origins (cors.go); urlClients
	// reaches original clients at their registered URLs (legacyurl.go).
	// Both nil when not configured.
	cors       *corsPolicy
	urlClients *urlClients
	// beforeForward, set by tests only, runs between a request's look
	// at the cluster and its forward: where a connector moves under it.
	beforeForward atomic.Pointer[func(name string)]
	// afterAttach, set by tests only, runs between a connector's attach
	// (it is reachable) and the audit of its connection.
	afterAttach atomic.Pointer[func(name string)]
	// machineHints and threadHints feed the dashboard's change streams
	// (changes.go).
	machineHints changeSignal
	threadHints  *threadHints
	// fleet remembers the connectors' threads in Options.Store (fleet.go);
	// nil without a store.
	fleet *fleetMemory
	// bindings are the names connector tokens have held (bindings.go).
	bindings nameBindings
	// bounds are what keeps clients within bounds (bounds.go).
	bounds gatewayBounds
	// streams are the event streams being relayed (Options.streams);
	// inFlight the requests being served (stop.go), so that a stop that
	// cannot wait for them says which; tunnels counts the connections
	// whose end is not counted and logged yet.
	streams  *eventstream.Set
	inFlight inFlight
	tunnels  countdown
	// listener is Listener's, once made.
	listener *limitListener
}

// New builds a gateway.
func New(opts Options) *Gateway {
	if opts.Heartbeat == 0 {
		opts.Heartbeat = DefaultHeartbeat
	}
	if opts.RequestTimeout == 0 {
		opts.RequestTimeout = DefaultRequestTimeout
	}
	if opts.MaxBody == 0 {
		opts.MaxBody = DefaultMaxBody
	}
	if opts.MaxConcurrent == 0 {
		opts.MaxConcurrent = DefaultMaxConcurrent
	}
	if opts.ConnectRate == 0 {
		opts.ConnectRate = DefaultConnectRate
	}
	if opts.ConnectBurst <= 0 {
		opts.ConnectBurst = DefaultConnectBurst
	}
	if opts.BodyTimeout == 0 {
		opts.BodyTimeout = DefaultBodyTimeout
	}
	if opts.IdleTimeout == 0 {
		opts.IdleTimeout = DefaultIdleTimeout
	}
	if opts.MaxConnsPerIP == 0 {
		opts.MaxConnsPerIP = DefaultMaxConnsPerIP
	}
	if opts.MaxConns == 0 {
		opts.MaxConns = DefaultMaxConns()
	}
	if opts.WSReadLimit <= 0 {
		opts.WSReadLimit = DefaultWSReadLimit
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.streams == nil {
		opts.streams = eventstream.NewSet()
	}
	g := &Gateway{opts: opts, presence: presence.New(opts.Heartbeat), connectLimit: newRateLimiter(opts.ConnectRate, opts.ConnectBurst), started: time.Now(), now: time.Now,
		bindings: nameBindings{names: map[string]store.NameBinding{}}, streams: opts.streams,
		inFlight: inFlight{reqs: map[*http.Request]requestLine{}}}
	g.metrics = metrics.New(g.presence.Online)
	g.initBounds()
	g.cors, g.urlClients = newCORSPolicy(opts.AllowOrigins), newURLClients(opts)
	g.presence.OnChange = func(name, status string) { opts.Logger.Info("connector "+status, "connector", name) }
	g.presence.OnEnd = g.tunnelEnded
	g.hookHints() // changes.go
	g.threadHints = &threadHints{g: g}
	if opts.Cluster != nil {
		g.joinCluster()
	}
	g.outage.g = g
	g.audit = newAuditLog(g.metrics, g.bounds.untrusted) // a failed login is audited: a flood of them drops entries
	// Before the store's writer starts: its thread writes add notifications.
	g.notifier = g.newNotifier()
	g.writes = g.newStoreWrites()
	g.audit.record(g.writes)
	var watchCtx context.Context
	watchCtx, g.stopWatching = context.WithCancel(context.Background())
	g.watchRegistrations(watchCtx)
	g.watchTokens(watchCtx)
	g.watchBindings(watchCtx)
	g.watchStore(watchCtx, cmp.Or(opts.storeCheckEvery, storeCheckEvery)) // bounds.go
	g.echo = g.routes()
	if g.writes != nil {
		g.writes.q.Start() // now that everything its writes reach is set
	}
	// Last: the triggers' loops audit what they start and read presence.
	g.triggers = g.newTriggerLoops()
	return g
}

// Handler is the gateway's HTTP handler.
func (g *Gateway) Handler() http.Handler { return http.HandlerFunc(g.serveHTTP) }

// Presence exposes the connector registry (status commands, tests).
func (g *Gateway) Presence() *presence.Registry { return g.presence }

// Metrics are the gateway's metrics (served at /metrics).
func (g *Gateway) Metrics() *metrics.Gateway { return g.metrics }

// Shutdown closes every tunnel with a reason the connectors log, and
// returns once each one's end is counted and logged (`connector
// offline`), so that /metrics, still served, shows them.
func (g *Gateway) Shutdown() { g.closeTunnels(context.Background()) }

// closeTunnels is Shutdown, waiting for the ends to be counted until ctx
// ends.
func (g *Gateway) closeTunnels(ctx context.Context) {
	g.shuttingDown.Store(true)
	g.stopWatching()
	g.notifier.stop()
	g.triggers.stop()
	// The fleet's readers first: a change stream cut by its tunnel's
	// close is no break to warn of. The connectors' last-seen times are
	// written before the store the caller closes next goes.
	g.fleet.close()
	g.presence.CloseAll(shutdownReason)
	g.tunnels.wait(ctx)
}

func (g *Gateway) routes() *echo.Echo {
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = jsonErrorHandler
	echohead.Install(e) // every GET route below answers HEAD too
	e.IPExtractor = trustedProxies(g.opts.TrustedProxies).clientIP
	// Before routing: a preflight has no route, and the request log must
	// see it, and the cookie refusals of other origins, like any answer.
	e.Pre(g.requestLog(), g.guard, g.cors.middleware)
	e.GET("/healthz", func(c echo.Context) error { return c.JSON(http.StatusOK, map[string]bool{"ok": true}) })
	e.GET("/readyz", g.ready)
	e.GET("/metrics", g.serveMetrics)
	e.GET(tunnel.ConnectPath, g.connect)
	api := e.Group("/api")
	api.POST("/gateway/login", g.login, g.auditLogin)
	api.POST("/gateway/logout", g.logout, g.auditLogout)
	api.POST("/gateway/register", g.register)
	api.DELETE("/gateway/register/:name", g.unregister)
	dash := api.Group("", g.requireDashboard)
	dash.GET("/gateway/endpoints", g.endpoints)
	dash.GET("/gateway/changes", g.changes) // changes.go
	g.fleet = g.newFleet()                  // the fleet's memory: nil without a store (fleet.go, fleet_http.go)
	fl := g.fleet
	dash.GET("/gateway/threads", fl.searchThreads)
	dash.GET("/gateway/machines", fl.machines)
	dash.GET("/gateway/stats", fl.stats)
	dash.GET("/gateway/audit", g.listAudit)
	dash.GET("/gateway/notifications", g.listNotifications)
	dash.GET("/gateway/inbox", fl.inbox) // inbox.go
	// Triggers (triggers.go); a webhook's delivery carries its own proof.
	dash.GET("/gateway/triggers", g.listTriggers)
	dash.POST("/gateway/triggers", g.createTrigger)
	dash.DELETE("/gateway/triggers/:id", g.deleteTrigger)
	dash.POST("/gateway/triggers/:id/pause", g.pauseTrigger(true))
	dash.POST("/gateway/triggers/:id/resume", g.pauseTrigger(false))
	dash.POST("/gateway/triggers/:id/secret", g.rotateSecret)
	dash.GET("/gateway/triggers/:id/runs", g.listRuns)
	e.POST("/hooks/:id", g.hook)
	for _, prefix := range []string{"/clients/:name", "/agents/:name"} {
		dash.Any(prefix, g.forward, g.auditProxied, g.instrument, fl.offlineMachine)
		dash.Any(prefix+"/*", g.forward, g.auditProxied, g.instrument, fl.offlineMachine)
	}
	// The original dashboard's live view URL (livealias.go); the name is
	// checked before the credentials, so a reserved word is a 404 to all.
	api.GET("/:name/threads/:id/live", g.forward, g.liveAlias, g.requireDashboard, g.auditProxied, g.instrument, fl.offlineMachine)
	// An unknown path under /api or /ws is a mistake (a client's wrong
	// URL, a proxy's wrong prefix), whatever the credentials: it gets a
	// JSON 404 naming the path, never the dashboard's page for a deep link.
	for _, reserved := range []string{"/api", "/ws"} {
		e.RouteNotFound(reserved, noSuchRoute)
		e.RouteNotFound(reserved+"/*", noSuchRoute)
	}
	if g.opts.Dashboard != nil {
		e.GET("/*", echo.WrapHandler(g.opts.Dashboard))
	}
	return e
}

// noSuchRoute answers a path under the gateway's own prefixes that no
// route serves.
func noSuchRoute(c echo.Context) error {
	return echo.NewHTTPError(http.StatusNotFound, "no such route: "+c.Request().URL.Path)
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
	if bodyCutShort(c.Request()) {
		code, msg = http.StatusRequestTimeout, bodyTimeoutMessage
	}
	if errors.Is(err, errStoreUnavailable) {
		c.Response().Header().Set("Retry-After", storeRetryAfter)
	}
	// A client that cannot take the answer has nobody to tell.
	_ = c.JSON(code, refusalBody(err, code, msg))
}

// authReason is the metric label of a Verify error.
func authReason(err error) string {
	switch {
	case errors.Is(err, auth.ErrNoCredentials):
		return metrics.AuthMissing
	case errors.Is(err, auth.ErrWrongRole):
		return metrics.AuthWrongRole
	case errors.Is(err, auth.ErrWrongName):
		return metrics.AuthWrongName
	default:
		return metrics.AuthInvalid
	}
}

func (g *Gateway) requireDashboard(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		credential, from := auth.CredentialFrom(r)
		if from == auth.FromCookie {
			if err := g.sameOrigin(r); err != nil {
				return err
			}
		}
		p, err := g.opts.Auth.Verify(credential, auth.RoleDashboard, "")
		if err != nil {
			return g.refusal(err)
		}
		if _, _, proxied := splitProxied(r.URL.Path); proxied {
			c.Set(userKey, userOf(p)) // for the connector (forward, user.go)
		}
		return g.whileValid(c, p, next)
	}
}

// serveMetrics is GET /metrics, behind Options.MetricsToken when set.
func (g *Gateway) serveMetrics(c echo.Context) error {
	if want := g.opts.MetricsToken; want != "" {
		got, ok := auth.BearerToken(c.Request().Header.Get("Authorization"))
		switch {
		case !ok || got == "":
			g.metrics.AuthFailure(metrics.AuthMissing)
			return &echo.HTTPError{Code: http.StatusUnauthorized, Message: auth.ErrNoCredentials.Error(), Internal: &auth.Refusal{Reason: auth.ReasonMissing}}
		case subtle.ConstantTimeCompare([]byte(got), []byte(want)) != 1:
			g.metrics.AuthFailure(metrics.AuthInvalid)
			return &echo.HTTPError{Code: http.StatusUnauthorized, Message: "invalid metrics token", Internal: &auth.Refusal{Reason: auth.ReasonUnknown}}
		}
	}
	g.metrics.Handler().ServeHTTP(c.Response(), c.Request())
	return nil
}

// login checks a dashboard token and sets it as an HttpOnly cookie, so the
// browser's EventSource (which cannot send headers) is authenticated.
func (g *Gateway) login(c echo.Context) error {
	if err := g.sameOrigin(c.Request()); err != nil {
		return err
	}
	var body struct {
		Token string `json:"token"`
	}
	if err := json.NewDecoder(io.LimitReader(c.Request().Body, 64<<10)).Decode(&body); err != nil || body.Token == "" {
		return echo.NewHTTPError(http.StatusBadRequest, `body must be {"token": "..."}`)
	}
	p, err := g.opts.Auth.Verify(body.Token, auth.RoleDashboard, "")
	if err != nil {
		return g.refusal(err)
	}
	// The browser drops the cookie when its token expires (zero: a
	// session cookie, for a token that does not).
	c.SetCookie(&http.Cookie{Name: auth.CookieName, Value: body.Token, Path: "/", Expires: p.Expires, HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: trustedProxies(g.opts.TrustedProxies).isHTTPS(c.Request())})
	return c.JSON(http.StatusOK, map[string]bool{"ok": true})
}

// logout clears the cookie; like login, only for the dashboard's own
// pages, so no other site can log a user out.
func (g *Gateway) logout(c echo.Context) error {
	if err := g.sameOrigin(c.Request()); err != nil {
		return err
	}
	c.SetCookie(&http.Cookie{Name: auth.CookieName, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode})
	return c.JSON(http.StatusOK, map[string]bool{"ok": true})
}

// tooMany answers 429 with Retry-After: wait, in whole seconds rounded
// up, at least one.
func tooMany(c echo.Context, wait time.Duration, msg string) error {
	c.Response().Header().Set("Retry-After", strconv.Itoa(int(max(1, (wait+time.Second-1)/time.Second))))
	return echo.NewHTTPError(http.StatusTooManyRequests, msg)
}

const invalidNameMessage = "invalid connector name: use lowercase letters, digits and hyphens (at most 63)"

// connect accepts a connector: the HTTP/2 tunnel when it offers the
// subprotocol, else an original client's JSON-frame socket. Every attempt
// first takes a token from its address's rate limit.
func (g *Gateway) connect(c echo.Context) error {
	r := c.Request()
	if ok, wait := g.connectLimit.allow(c.RealIP()); !ok {
		g.metrics.RateLimited()
		return tooMany(c, wait, "too many connection attempts from this address; retry later")
	}
	if err := g.refuseWhileStopping(c); err != nil {
		return err
	}
	name := r.URL.Query().Get("name")
	if name == "" {
		return echo.NewHTTPError(http.StatusBadRequest, "name required")
	}
	if !presence.ValidName(name) {
		return echo.NewHTTPError(http.StatusBadRequest, invalidNameMessage)
	}
	p, err := g.opts.Auth.Verify(auth.Credential(r), auth.RoleConnector, name)
	if err != nil {
		g.bounds.untrusted.Warn("connector refused", "connector", name, "reason", err.Error(), "address", c.RealIP())
		return g.refusal(err)
	}
	if !strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
		return echo.NewHTTPError(http.StatusUpgradeRequired, "expected WebSocket upgrade")
	}
	if _, leaving := g.movingOut.Load(name); leaving {
		// Asked to move by a rebalance: its balancer tries another replica.
		c.Response().Header().Set("Retry-After", drainingRetryAfter)
		return echo.NewHTTPError(http.StatusServiceUnavailable, "connector "+name+" is moving to another gateway replica: connect to another")
	}
	instance, takeover, err := instanceOf(r)
	if err != nil {
		return err
	}
	info := presence.Info{Version: r.Header.Get("X-Uncaged-Version"), Address: c.RealIP(), Credential: credentialOf(p), Instance: instance, Takeover: takeover}
	// Refused (maybe answered already), or bound and let on (takeover.go).
	remote, err := g.admit(c, name, p, info)
	if err != nil || c.Response().Committed {
		return err
	}
	var conn presence.Conn
	var client *tunnel.Client
	if tunnel.Offers(r) {
		ws, err := tunnel.Accept(c.Response(), r)
		if err != nil {
			return nil // Accept has answered the client
		}
		ws.SetReadLimit(g.opts.WSReadLimit)
		client, err = tunnel.NewClient(ws)
		if err != nil {
			return nil
		}
		conn, info.Protocol = client, metrics.ProtocolH2
	} else {
		// An original TypeScript client: no subprotocol, JSON frames.
		ws, err := websocket.Accept(c.Response(), r, &websocket.AcceptOptions{InsecureSkipVerify: true})
		if err != nil {
			return nil // Accept has answered the client
		}
		conn = legacy.New(ws, legacy.Options{
			ReadLimit:   g.opts.WSReadLimit,
			MaxBody:     g.opts.MaxBody,
			ClientToken: func() string { return g.registrations.ClientToken(name) },
			OnDrop:      g.metrics.LegacyFrameDropped,
		})
		info.Protocol = metrics.ProtocolLegacy
	}
	t := newTracked(conn, info.Protocol, g.opts.MaxConcurrent)
	if client != nil {
		t.streams = g.streams.Sub() // ended when it moves (move.go)
	}
	// Stamped before the connector is reachable: every request it carries
	// is audited after its connection.
	attachedAt := time.Now()
	g.tunnels.add() // done when it ends (tunnelEnded)
	replaced, err := g.presence.Attach(name, t, info)
	if err != nil {
		// Another instance, or a token-bound connector, took the name
		// since admit.
		g.tunnels.done()
		reason := g.refusedLate(c, name, p, info, err)
		t.forgetStreams()
		go func() { _ = conn.Close(reason) }() // dropped either way
		return nil
	}
	t.whenEnded(g.endTunnelWithCredential(p, name, t))
	if hook := g.afterAttach.Load(); hook != nil {
		(*hook)(name)
	}
	g.connected(c, attachedAt, name, p, info, replaced, remote)
	g.metrics.Connected(info.Protocol)
	g.opts.Logger.Info("connector connected", "connector", name, "protocol", info.Protocol, "address", c.RealIP(), "shared_secret", p.Shared, "instance", info.Instance)
	return nil
}

// tunnelEnded is told by the presence registry that name's tunnel c has
// ended (presence.Registry.OnEnd): what ends with a tunnel is done here.
func (g *Gateway) tunnelEnded(name string, c presence.Conn) {
	t, ok := c.(*tracked)
	if !ok {
		return
	}
	defer g.tunnels.done()
	t.end()
	t.forgetStreams()
	if client, ok := t.Conn.(*tunnel.Client); ok {
		if err := client.Err(); err != nil {
			g.opts.Logger.Warn("connector dropped", "connector", name, "reason", err.Error())
		}
	}
	reason := t.disconnectReason()
	if reason == metrics.DisconnectRemote && g.shuttingDown.Load() {
		reason = metrics.DisconnectShutdown
	}
	g.metrics.Disconnected(reason)
}

// forward proxies /api/clients/<name>/<rest> to the connector's /api/<rest>.
func (g *Gateway) forward(c echo.Context) error {
	name := c.Param("name")
	if err := g.refuseUnregistered(name); err != nil {
		return err
	}
	// Its bytes are counted where it entered the cluster (instrument).
	hopped := g.opts.Cluster != nil && c.Request().Header.Get(cluster.HopHeader) != ""
	counted := !hopped
	// Before the request leaves for the connector or for the replica
	// holding it. A hop that does not verify is refused below
	// (forwardInCluster) before anything is sent.
	proxiedUser(c, hopped)
	r := c.Request()
	timed, _ := r.Body.(*deadlineBody)
	if counted && r.Body != nil && r.Body != http.NoBody {
		// Counted once, as it is read, whichever replica it goes to.
		r.Body = &countingBody{ReadCloser: r.Body, m: g.metrics}
	}
	// A tunnel retired while this request looked (its connector moved to
	// another replica, move.go) is looked past once: the connector is
	// where the cluster now says. A request forwarded here already is
	// never forwarded again: it is answered that the connector is not
	// held here, and the replica that forwarded it looks again.
	var conn presence.Conn
	for attempt := 0; conn == nil; attempt++ {
		if g.opts.Cluster != nil && (attempt == 0 || !hopped) {
			if handled, err := g.forwardInCluster(c, name, timed); handled {
				return err
			}
		}
		found, err := g.localConn(c, name, hopped)
		if err != nil {
			return err
		}
		if t, ok := found.(*tracked); ok && !t.enter() {
			switch {
			case hopped:
				return g.notHeld(c, name, "it is moving to another replica")
			case attempt > 0:
				c.Response().Header().Set("Retry-After", "1")
				return echo.NewHTTPError(http.StatusServiceUnavailable, "connector "+name+" is moving to another gateway replica; retry")
			}
			continue
		}
		conn = found
	}
	if t, ok := conn.(*tracked); ok {
		defer t.leave()
		if !t.acquire() {
			c.Response().Header().Set("Retry-After", "1")
			return echo.NewHTTPError(http.StatusServiceUnavailable, "connector busy: "+name+" has too many requests in flight")
		}
		defer t.release()
	}
	if r.ContentLength > g.opts.MaxBody {
		return echo.NewHTTPError(http.StatusRequestEntityTooLarge, "request body too large")
	}
	if r.Body != nil && r.Body != http.NoBody {
		r.Body = http.MaxBytesReader(c.Response(), r.Body, g.opts.MaxBody)
	}
	ctx := r.Context()
	if _, timed := ctx.Deadline(); !timed && !isStream(r) {
		// Not timed yet: the dashboard's credential binds the request's
		// context with the timeout when the credential can end (whileValid).
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, g.opts.RequestTimeout)
		defer cancel()
	}
	g.relay(interim{c.Response()}, r, ctx, conn)
	if !c.Response().Committed && timed.cutShort(r.Context()) {
		return errBodyTimeout
	}
	return nil
}

// interim is the response writer the proxies write to: it passes a 1xx
// informational answer of the connector (the 100 Continue a client's
// Expect: 100-continue asks for, 103 Early Hints) straight to the client.
// Through echo's Response it would count as the response's status and
// commit it, and the connector's real status (404, 201, ...) after it
// would be lost for a 200. One pointer wide: passing it as an
// http.ResponseWriter allocates nothing.
type interim struct{ *echo.Response }

// WriteHeader implements http.ResponseWriter.
func (w interim) WriteHeader(code int) {
	// 101 is final: the connection changes protocol after it.
	if code >= 100 && code < 200 && code != http.StatusSwitchingProtocols {
		w.Response.Writer.WriteHeader(code)
		return
	}
	w.Response.WriteHeader(code)
}

// offlineRetryAfter is the Retry-After of a 503 for a connector that is
// offline: it may be on its way back (a restart, a network blip).
const offlineRetryAfter = "5"

// localConn is this replica's connection for name, or an original
// client's registered URL; else the answer for a connector that is
// offline or unknown, or, to a request another replica forwarded here
// (hopped), that this replica does not hold it.
func (g *Gateway) localConn(c echo.Context, name string, hopped bool) (presence.Conn, error) {
	conn, online, known := g.presence.Get(name)
	if !online { // an original client registered with a URL (legacyurl.go)
		uc, err := g.urlConn(c.Request().Context(), name, known)
		if err != nil {
			return nil, err
		}
		if uc != nil {
			return uc, nil
		}
	}
	switch {
	case hopped && !online:
		// The forwarding replica looked before the connector left here
		// (or dropped): it has not answered its client, and looks again.
		return nil, g.notHeld(c, name, "it is not connected here")
	case !known:
		return nil, g.unknownConnector(c, name)
	case !online:
		return nil, g.connectorOffline(c, name)
	}
	return conn, nil
}

// notHeld answers a forwarded request for a connector this replica does
// not hold (any more) — 503 with cluster.NotHeldHeader, its body unread —
// so that the replica that forwarded it sends it to wherever the
// connector is now. A replica from before the header passes the 503 on.
func (g *Gateway) notHeld(c echo.Context, name, why string) error {
	c.Response().Header().Set(cluster.NotHeldHeader, "1")
	c.Response().Header().Set("Retry-After", "1")
	return echo.NewHTTPError(http.StatusServiceUnavailable, "connector "+name+" is not held by this gateway replica: "+why)
}

// connectorOffline is the 503 for a connector that is offline.
func (g *Gateway) connectorOffline(c echo.Context, name string) error {
	c.Response().Header().Set("Retry-After", offlineRetryAfter)
	return echo.NewHTTPError(http.StatusServiceUnavailable, "connector offline: "+name)
}

// unknownConnector answers a request for a connector nobody has seen:
// 404, or within RestartGrace of the start 503 with Retry-After, since its
// connector may simply not have reconnected yet.
func (g *Gateway) unknownConnector(c echo.Context, name string) error {
	up := g.now().Sub(g.started)
	if up >= RestartGrace {
		return echo.NewHTTPError(http.StatusNotFound, "connector not found: "+name)
	}
	c.Response().Header().Set("Retry-After", graceRetryAfter)
	return echo.NewHTTPError(http.StatusServiceUnavailable,
		fmt.Sprintf("connector %s is not connected (yet): the gateway started %ds ago", name, int(up/time.Second)))
}

// isStream says whether a request opens a stream, which has no timeout.
func isStream(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), "text/event-stream") || strings.HasSuffix(r.URL.Path, "/live")
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

func (g *Gateway) proxyError(w http.ResponseWriter, r *http.Request, err error) {
	status, msg := http.StatusBadGateway, "connector unreachable: "+err.Error()
	var tooLarge *http.MaxBytesError
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		status, msg = http.StatusGatewayTimeout, "connector did not answer in time"
	case errors.As(err, &tooLarge), errors.Is(err, legacy.ErrBodyTooLarge):
		status, msg = http.StatusRequestEntityTooLarge, "request body too large"
	}
	if errors.Is(r.Context().Err(), context.Canceled) {
		return // the client went away; nobody to answer
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	fmt.Fprintf(w, "{\"error\":%q}\n", msg)
}
