package server

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/net/http/httpguts"

	"github.com/uncaged/workflow/gateway/internal/eventstream"
	"github.com/uncaged/workflow/gateway/internal/proxybuf"
	"github.com/uncaged/workflow/gateway/presence"
)

// relay sends a dashboard request to a connector and copies the answer
// back: what httputil.ReverseProxy does, for the one kind of upstream the
// gateway has. The request is rewritten to the connector's own path, its
// hop-by-hop headers and the gateway's credentials dropped, X-Forwarded-*
// set from the client; the answer's hop-by-hop headers are dropped,
// trailers pass, event streams and bodies of unknown length are flushed
// on every write, and a body that breaks midway aborts the client's
// response (http.ErrAbortHandler) rather than ending it as if complete.
//
// ReverseProxy was a tenth of the gateway's CPU per small request: it
// clones the request deeply, canonicalizes every header it copies either
// way, and wraps each request in a client trace. The tunnel needs none of
// that generality (no upgrades over HTTP/2, no retries, no director), so
// the relay shares the incoming header values instead of copying them and
// asks for 1xx answers only when the client expects one.
func (g *Gateway) relay(w http.ResponseWriter, in *http.Request, ctx context.Context, conn presence.Conn) {
	out := in.WithContext(ctx)
	out.URL = connectorURL(in)
	out.Host = "connector"
	out.RequestURI = ""
	out.Close = false
	out.Header = relayedRequestHeader(in)
	var body *detachedBody
	if in.ContentLength == 0 {
		out.Body = nil
	} else if in.Body != nil && in.Body != http.NoBody {
		// The transport closes the body it was given once it has sent it,
		// and may still read it after this handler returned: the inbound
		// body must be neither closed by it nor read past this handler.
		body = &detachedBody{r: in.Body}
		out.Body = body
		defer body.detach()
	}
	var trace *interimTrace
	if _, expects := in.Header["Expect"]; expects {
		// Expect: 100-continue: the connector's 100 goes to the client
		// before the client sends its body.
		trace = &interimTrace{w: w}
		out = out.WithContext(httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{Got1xxResponse: trace.got}))
	}
	res, err := conn.RoundTrip(out)
	if trace != nil {
		trace.done()
	}
	if err != nil {
		g.proxyError(w, out, err)
		return
	}
	h := w.Header()
	dropped := connectionTokens(res.Header)
	for k, vv := range res.Header {
		if isHopByHop(k) || dropped[k] {
			continue
		}
		// The answer's own slices, not copies: res is not read again.
		if prev := h[k]; len(prev) > 0 {
			h[k] = append(prev, vv...)
		} else {
			h[k] = vv
		}
	}
	announced := len(res.Trailer)
	if announced > 0 {
		keys := make([]string, 0, announced)
		for k := range res.Trailer {
			keys = append(keys, k)
		}
		h.Add("Trailer", strings.Join(keys, ", "))
		// Trailers follow a chunked body only: a length the connector's
		// HTTP/2 server worked out for a short answer would leave no room.
		h.Del("Content-Length")
	}
	events := eventstream.Is(res.Header)
	if events {
		// A stopping gateway ends it at an event's end (Run), as does its
		// tunnel's move to another replica (move.go).
		set := g.streams
		if t, ok := conn.(*tracked); ok && t.streams != nil {
			set = t.streams
		}
		res.Body = set.Wrap(res.Body)
	}
	w.WriteHeader(res.StatusCode)
	if err := copyAnswer(w, res, events); err != nil {
		_ = res.Body.Close() // the response is abandoned either way
		panic(http.ErrAbortHandler)
	}
	_ = res.Body.Close() // fills res.Trailer; the body was read to its end
	if len(res.Trailer) == 0 {
		return
	}
	// Trailers force a chunked answer: without this flush net/http would
	// give a short body a Content-Length and no room for them.
	_ = http.NewResponseController(w).Flush()
	if len(res.Trailer) == announced {
		for k, vv := range res.Trailer {
			h[k] = append(h[k], vv...)
		}
		return
	}
	for k, vv := range res.Trailer {
		for _, v := range vv {
			h.Add(http.TrailerPrefix+k, v)
		}
	}
}

// connectorURL is a proxied request's URL on the connector:
// /api/clients/<name>/<rest> (or /api/agents/...) → /api/<rest>, with the
// credentials a client may put in the query (?key=, ?secret=) removed.
func connectorURL(in *http.Request) *url.URL {
	_, rest, _ := splitProxied(in.URL.Path)
	u := &url.URL{Scheme: "http", Host: "connector", Path: "/api" + rest}
	if in.URL.RawQuery != "" {
		// Parsed and encoded again, which also drops what does not parse.
		u.RawQuery = stripCredentialQuery(in.URL.Query()).Encode()
	}
	return u
}

// splitProxied splits a proxied path, /api/clients/<name>/<rest> or
// /api/agents/<name>/<rest>, into the connector's name and "/<rest>" (""
// when the path ends at the name); ok is false for any other path.
func splitProxied(path string) (name, rest string, ok bool) {
	for _, prefix := range []string{"/api/clients/", "/api/agents/"} {
		if after, found := strings.CutPrefix(path, prefix); found {
			if i := strings.IndexByte(after, '/'); i >= 0 {
				return after[:i], after[i:], true
			}
			return after, "", true
		}
	}
	return "", "", false
}

// relayedRequestHeader is the header the connector gets: the client's,
// shared rather than copied (nothing on the way changes a value), without
// the hop-by-hop headers, the gateway's credentials and any forwarding
// headers the client made up; with X-Forwarded-For, -Host and -Proto of
// this hop.
func relayedRequestHeader(in *http.Request) http.Header {
	dropped := connectionTokens(in.Header)
	out := make(http.Header, len(in.Header)+3)
	for k, vv := range in.Header {
		switch {
		case isHopByHop(k) || dropped[k]:
		case k == "Authorization", k == "Cookie":
			// The dashboard's credentials are for the gateway.
		case k == "Forwarded", k == "X-Forwarded-For", k == "X-Forwarded-Host", k == "X-Forwarded-Proto":
		default:
			out[k] = vv
		}
	}
	// A client that takes trailers says so; the connector may then send
	// them (the one hop-by-hop value passed on, as ReverseProxy does).
	if httpguts.HeaderValuesContainsToken(in.Header["Te"], "trailers") {
		out["Te"] = []string{"trailers"}
	}
	if _, ok := out["User-Agent"]; !ok {
		// Not the HTTP/2 client's own default: the connector's log shows
		// what the client sent, or nothing.
		out["User-Agent"] = []string{""}
	}
	if ip, _, err := net.SplitHostPort(in.RemoteAddr); err == nil {
		out["X-Forwarded-For"] = []string{ip}
	}
	out["X-Forwarded-Host"] = []string{in.Host}
	if in.TLS == nil {
		out["X-Forwarded-Proto"] = []string{"http"}
	} else {
		out["X-Forwarded-Proto"] = []string{"https"}
	}
	return out
}

// hopByHop are the headers of one connection (RFC 9110, 7.6.1), never
// passed on; Te is passed only as "trailers" (relayedRequestHeader).
var hopByHop = map[string]bool{
	"Connection":          true,
	"Proxy-Connection":    true,
	"Keep-Alive":          true,
	"Proxy-Authenticate":  true,
	"Proxy-Authorization": true,
	"Te":                  true,
	"Trailer":             true,
	"Transfer-Encoding":   true,
	"Upgrade":             true,
}

func isHopByHop(k string) bool { return hopByHop[k] }

// connectionTokens are the headers a Connection header names as this
// hop's own, in canonical form; nil when there are none (the usual case,
// which allocates nothing).
func connectionTokens(h http.Header) map[string]bool {
	var named map[string]bool
	for _, v := range h["Connection"] {
		for f := range strings.SplitSeq(v, ",") {
			if f = textproto.TrimString(f); f != "" {
				if named == nil {
					named = map[string]bool{}
				}
				named[textproto.CanonicalMIMEHeaderKey(f)] = true
			}
		}
	}
	return named
}

// copyAnswer copies the connector's body to the client, flushing after
// every write when it is an event stream or of unknown length (as
// ReverseProxy does with FlushInterval 0), so live views arrive live.
func copyAnswer(w http.ResponseWriter, res *http.Response, events bool) error {
	flush := events || res.ContentLength == -1
	rc := http.NewResponseController(w)
	buf := proxybuf.Pool.Get()
	defer proxybuf.Pool.Put(buf)
	for {
		n, rerr := res.Body.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return werr
			}
			if flush {
				if err := rc.Flush(); err != nil {
					return err
				}
			}
		}
		switch {
		case rerr == io.EOF:
			return nil
		case rerr != nil:
			return rerr
		}
	}
}

// detachedBody is the inbound body as the transport sees it: its Close
// does not close the inbound body (net/http would read out the rest of
// it, which for a client that waits for 100 Continue never comes), and
// once the handler has returned, reading it fails instead of touching a
// body net/http has recycled.
type detachedBody struct {
	r        io.Reader
	detached atomic.Bool
}

var errBodyDetached = errors.New("request body read after the request ended")

func (b *detachedBody) Read(p []byte) (int, error) {
	if b.detached.Load() {
		return 0, errBodyDetached
	}
	return b.r.Read(p)
}

func (b *detachedBody) Close() error { return nil }

func (b *detachedBody) detach() { b.detached.Store(true) }

// interimTrace passes the connector's 1xx answers (100 Continue) to the
// client while the round trip is in flight, and not after: the response
// writer's header then belongs to the final answer.
type interimTrace struct {
	w        http.ResponseWriter
	mu       sync.Mutex
	finished bool
}

func (t *interimTrace) got(code int, header textproto.MIMEHeader) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.finished {
		return nil
	}
	h := t.w.Header()
	saved := h.Clone()
	for k, vv := range header {
		h[k] = append(h[k], vv...)
	}
	t.w.WriteHeader(code)
	// WriteHeader sends a 1xx with the header as it is but leaves it be:
	// the final answer's header is what it was before.
	clear(h)
	for k, vv := range saved {
		h[k] = vv
	}
	return nil
}

func (t *interimTrace) done() {
	t.mu.Lock()
	t.finished = true
	t.mu.Unlock()
}
