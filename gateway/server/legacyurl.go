package server

import (
	"context"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/uncaged/workflow/gateway/legacy"
	"github.com/uncaged/workflow/gateway/presence"
)

// Original clients registered with a URL (Options.LegacyURLAllow,
// --legacy-url-allow). Such a client registers an http(s) URL where it
// serves its API, keeps no WebSocket open, and the gateway fetches
// <url>/api/<rest> for each dashboard request (gateway/legacy's
// URLFetcher). That lets whoever holds a connector credential make the
// gateway fetch a URL of its choosing, so it is off unless the operator
// lists the hosts allowed, and every connection, redirects included, is
// checked on the address dialed.
//
// Registrations are accepted as before, whatever their URL: recording one
// fetches nothing, and the original clients that keep a socket register a
// URL too. What the list decides is whether a request for a name with no
// socket connected goes to its URL. When it may not, the answer is 502
// naming the flag, so that whoever sees it knows what the operator would
// have to change: the URL was not allowed, not unreachable.
//
// A name whose WebSocket is connected is served through it, as the
// original preferred it; the URL serves the requests while it is not.
// Such a client is listed in /api/gateway/endpoints with protocol
// ProtocolLegacyURL, "online" while it heartbeats (every 60 s) within
// legacyURLTTL, as the original listed it.

// ProtocolLegacyURL is the endpoints list's protocol of a client reached
// at its registered URL.
const ProtocolLegacyURL = "legacy-url"

// legacyURLTTL is how long after its last heartbeat a URL client is
// listed online: the original's five minutes.
const legacyURLTTL = 5 * time.Minute

// urlCheckTimeout bounds the look-up of a registered URL's host.
const urlCheckTimeout = 5 * time.Second

// urlClients are the connections to URL clients, one per name, each with
// its own in-flight bound (Options.MaxConcurrent) as a socket has.
type urlClients struct {
	fetcher *legacy.URLFetcher
	mu      sync.Mutex
	conns   map[string]urlClientConn
}

// urlClientConn is a cached connection and what it was made for.
type urlClientConn struct {
	url, token string
	conn       *tracked
}

// newURLClients is nil when the operator allowed no host.
func newURLClients(opts Options) *urlClients {
	if opts.LegacyURLAllow == nil {
		return nil
	}
	return &urlClients{
		fetcher: legacy.NewURLFetcher(legacy.URLOptions{
			Allow: opts.LegacyURLAllow, ResponseHeaderTimeout: opts.RequestTimeout, MaxResponse: opts.WSReadLimit,
		}),
		conns: map[string]urlClientConn{},
	}
}

// urlConn is the connection to name's registered URL when name has no
// socket connected: nil when it registered no URL the gateway would fetch
// (or a placeholder, as the original connect's "ws://<name>"), and a 502
// naming the flag when the operator's list does not allow the URL. A name
// a socket held (known), and one whose registration is older than this
// gateway and may be reconnecting after its restart (RestartGrace), get
// no error: their socket is what they are waiting for, and the usual 503
// says so.
func (g *Gateway) urlConn(ctx context.Context, name string, known bool) (*tracked, error) {
	reg, ok := g.registrations.URLClient(name)
	if !ok {
		return nil, nil
	}
	uc := g.urlClients
	var refusal error = legacy.ErrURLClientsOff
	if uc != nil {
		uc.mu.Lock()
		c, ok := uc.conns[name]
		uc.mu.Unlock()
		if ok && c.url == reg.URL && c.token == reg.ClientToken {
			return c.conn, nil
		}
		ctx, cancel := context.WithTimeout(ctx, urlCheckTimeout)
		defer cancel()
		if refusal = g.opts.LegacyURLAllow.CheckURL(ctx, net.DefaultResolver, reg.URL); refusal == nil {
			return uc.add(name, reg, g.opts.MaxConcurrent)
		}
	}
	if known || (reg.LastHeartbeat.Before(g.started) && g.now().Sub(g.started) < RestartGrace) {
		return nil, nil
	}
	g.opts.Logger.Warn("registered url not fetched", "connector", name, "reason", refusal.Error())
	return nil, echo.NewHTTPError(http.StatusBadGateway, "connector "+name+" has no socket connected and its registered URL is not fetched: "+refusal.Error())
}

// add makes and keeps the connection to a registered URL the list allows.
func (uc *urlClients) add(name string, reg legacy.URLClient, maxConcurrent int) (*tracked, error) {
	conn, err := uc.fetcher.Conn(reg.URL, reg.ClientToken)
	if err != nil {
		return nil, echo.NewHTTPError(http.StatusBadGateway, "connector "+name+": "+err.Error())
	}
	t := newTracked(conn, ProtocolLegacyURL, maxConcurrent)
	uc.mu.Lock()
	defer uc.mu.Unlock()
	uc.conns[name] = urlClientConn{url: reg.URL, token: reg.ClientToken, conn: t}
	return t, nil
}

// withURLClients adds to an endpoints list the URL clients it does not
// name; nothing when URL clients are off.
func (g *Gateway) withURLClients(eps []presence.Endpoint) []presence.Endpoint {
	if g.urlClients == nil {
		return eps
	}
	listed := make(map[string]bool, len(eps))
	for _, e := range eps {
		listed[e.Name] = true
	}
	now := g.now()
	for _, c := range g.registrations.URLClients() {
		if listed[c.Name] {
			continue
		}
		status := presence.Offline
		if now.Sub(c.LastHeartbeat) < legacyURLTTL {
			status = presence.Online
		}
		eps = append(eps, presence.Endpoint{
			Name: c.Name, URL: c.URL, Status: status, LastHeartbeat: c.LastHeartbeat.UnixMilli(),
			Protocol: ProtocolLegacyURL,
		})
	}
	return eps
}
