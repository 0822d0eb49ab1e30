package legacy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"
)

// Original clients registered with a URL. Before the original's clients
// kept a WebSocket open, they served their API on a URL of their own (a
// tunnel's, typically) and registered it; the original gateway fetched
// <url>/api/<rest> for each dashboard request, with the client's token as
// a header. The gateway does so too, when the client's socket is not
// connected and the operator allowed the URL's host (AllowList); the
// fetch follows redirects within the allowed set only.

// URL fetches' fixed bounds. The connection and TLS handshake bound what
// an unreachable host costs; redirects are the browser's usual ten;
// headers get what the tunnel allows a frame of them.
const (
	urlDialTimeout      = 10 * time.Second
	urlTLSTimeout       = 10 * time.Second
	urlMaxRedirects     = 10
	urlMaxHeaderBytes   = 64 << 10
	urlIdleConnsPerHost = 4
)

// URLOptions configure a URLFetcher.
type URLOptions struct {
	// Allow is where requests may go; nil refuses every fetch.
	Allow *AllowList
	// ResponseHeaderTimeout bounds the wait for a response's headers, for
	// streams too (0: none; the caller's context still bounds a request).
	ResponseHeaderTimeout time.Duration
	// MaxResponse bounds a response body that is not an event stream, as
	// Options.ReadLimit bounds a JSON-frame client's whole answer (0: no
	// bound). A longer one is cut, and the proxy aborts it.
	MaxResponse int64
}

// ErrResponseTooLarge is the error of a response past URLOptions.MaxResponse.
var ErrResponseTooLarge = errors.New("client's answer larger than the gateway's limit (--ws-read-limit)")

// URLFetcher fetches from the URLs original clients registered, through
// one HTTP client whose every connection is checked against the allow
// list. It never uses an HTTP proxy from the environment: the proxy, not
// the gateway, would then resolve and dial the host, past the check.
type URLFetcher struct {
	client      *http.Client
	allow       *AllowList
	maxResponse int64
}

// NewURLFetcher builds a fetcher.
func NewURLFetcher(opts URLOptions) *URLFetcher {
	f := &URLFetcher{allow: opts.Allow, maxResponse: opts.MaxResponse}
	transport := &http.Transport{
		Proxy:                  nil,
		DialContext:            opts.Allow.guardedDial(net.Dialer{Timeout: urlDialTimeout, KeepAlive: 30 * time.Second}),
		ForceAttemptHTTP2:      true,
		TLSHandshakeTimeout:    urlTLSTimeout,
		ResponseHeaderTimeout:  opts.ResponseHeaderTimeout,
		MaxResponseHeaderBytes: urlMaxHeaderBytes,
		MaxIdleConnsPerHost:    urlIdleConnsPerHost,
		IdleConnTimeout:        90 * time.Second,
	}
	f.client = &http.Client{Transport: transport, CheckRedirect: f.checkRedirect}
	return f
}

// RedirectError is a redirect the fetcher refused to follow.
type RedirectError struct {
	To     string
	Reason string
}

func (e *RedirectError) Error() string { return "redirect to " + e.To + " refused: " + e.Reason }

// checkRedirect follows a redirect only to an http(s) URL the allow list
// admits, at most urlMaxRedirects times, and keeps the client's token from
// any other host than the one registered.
func (f *URLFetcher) checkRedirect(req *http.Request, via []*http.Request) error {
	to := req.URL.Redacted()
	if len(via) >= urlMaxRedirects {
		return &RedirectError{To: to, Reason: fmt.Sprintf("more than %d redirects", urlMaxRedirects)}
	}
	if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
		return &RedirectError{To: to, Reason: "not http(s)"}
	}
	if reason := f.allow.redirectRefusal(req.URL.Hostname()); reason != "" {
		return &RedirectError{To: to, Reason: reason}
	}
	if !strings.EqualFold(req.URL.Host, via[0].URL.Host) {
		req.Header.Del(ClientTokenHeader)
		req.Header.Del(AgentTokenHeader)
	}
	return nil
}

// redirectRefusal says why a redirect to host is out of the allowed set,
// "" when it may be tried (its connection is checked again when dialed).
func (a *AllowList) redirectRefusal(host string) string {
	if a == nil {
		return ErrURLClientsOff.Error()
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		if a.addressListed(ip) {
			return ""
		}
		return host + " is not listed in " + AllowFlag
	}
	if a.nameListed(host) || len(a.prefixes) > 0 {
		return ""
	}
	return host + " is not listed in " + AllowFlag
}

// The headers carrying a registered client's token to it: the original's
// connect-era clients read X-Client-Token, its earlier URL-registered
// clients X-Agent-Token.
const (
	ClientTokenHeader = "X-Client-Token"
	AgentTokenHeader  = "X-Agent-Token"
)

// URLConn is one client's registered URL as a connection to the proxy: it
// answers a request for /api/<rest> with a fetch of <url>/api/<rest>.
type URLConn struct {
	f     *URLFetcher
	base  *url.URL
	token string
}

// Conn is a connection to the client registered at rawURL with token (""
// for none); the error says why rawURL cannot be fetched at all.
func (f *URLFetcher) Conn(rawURL, token string) (*URLConn, error) {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return nil, fmt.Errorf("registered url %q: not an http(s) URL with a host", rawURL)
	}
	return &URLConn{f: f, base: u, token: token}, nil
}

// URL is the registered URL.
func (c *URLConn) URL() string { return c.base.String() }

// RoundTrip fetches r's path and query under the registered URL. The
// caller's context bounds it; redirects are followed within the allowed
// set.
func (c *URLConn) RoundTrip(r *http.Request) (*http.Response, error) {
	out := r.Clone(r.Context())
	target := *c.base
	target.Path = strings.TrimSuffix(c.base.Path, "/") + r.URL.Path
	target.RawPath = ""
	target.RawQuery = r.URL.RawQuery
	out.URL = &target
	out.Host = ""
	out.RequestURI = ""
	out.Header.Del(ClientTokenHeader)
	out.Header.Del(AgentTokenHeader)
	if c.token != "" {
		out.Header.Set(ClientTokenHeader, c.token)
		out.Header.Set(AgentTokenHeader, c.token)
	}
	resp, err := c.f.client.Do(out)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("fetching %s: %w", target.Redacted(), err)
	}
	if c.f.maxResponse > 0 && !isEventStream(resp.Header.Get("Content-Type")) {
		if resp.ContentLength > c.f.maxResponse {
			_ = resp.Body.Close() // refused unread
			return nil, ErrResponseTooLarge
		}
		resp.Body = &cappedBody{ReadCloser: resp.Body, left: c.f.maxResponse}
	}
	return resp, nil
}

// isEventStream says whether a response is a server-sent event stream,
// which lasts as long as the viewer watches and is not bounded in size.
func isEventStream(contentType string) bool {
	mt, _, _ := mime.ParseMediaType(contentType)
	return mt == "text/event-stream"
}

// cappedBody fails a body that goes past its bound.
type cappedBody struct {
	io.ReadCloser
	left int64
}

func (b *cappedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		// One byte more tells a body of exactly the bound from a longer one.
		var one [1]byte
		n, err := b.ReadCloser.Read(one[:])
		if n > 0 {
			return 0, ErrResponseTooLarge
		}
		return 0, err
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	return n, err
}

// Ping succeeds: a URL client has no socket to ping; whether it answers
// shows in its requests.
func (c *URLConn) Ping(context.Context) error { return nil }

// Done never closes: there is no connection to lose.
func (c *URLConn) Done() <-chan struct{} { return nil }

// Close does nothing, for the same reason.
func (c *URLConn) Close(string) error { return nil }
