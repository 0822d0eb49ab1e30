package cluster

import (
	"context"
	"crypto/hmac"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/uncaged/workflow/gateway/internal/eventstream"
	"github.com/uncaged/workflow/gateway/internal/proxybuf"
	"github.com/uncaged/workflow/shared/tunnel"
)

// HopHeader marks a request another replica forwarded: its timestamp,
// HMAC and sender, "<unix seconds>.<hex mac>.<replica id>". The holder
// serves such a request from its own connectors only, so a request is
// forwarded at most once, and it believes the header only when the MAC is
// right.
const HopHeader = "X-Uncaged-Cluster-Hop"

// hopSkew is how far a hop's timestamp may be from the receiver's clock.
const hopSkew = 2 * time.Minute

// Results of a forwarded request, the label of the forwarded metric.
const (
	resultOK    = "ok"
	resultError = "error"
	// resultUnreached: the holder refused the connection, and the request
	// went on to wherever its connector went.
	resultUnreached = "unreached"
	// resultNotHeld: the holder no longer held the connector (it moved
	// on), and the request went on to where the connector is.
	resultNotHeld = "not_held"
)

type routeKey struct{}

// newProxy is the replica-to-replica proxy: HTTP/2 without TLS (prior
// knowledge, the peer's server enables it), one multiplexed connection per
// peer, pings to notice a peer that vanished mid-stream.
func (c *Cluster) newProxy() *httputil.ReverseProxy {
	var protocols http.Protocols
	protocols.SetUnencryptedHTTP2(true)
	tr := &http.Transport{
		Protocols:             &protocols,
		DialContext:           (&net.Dialer{Timeout: c.o.DialTimeout, KeepAlive: 30 * time.Second}).DialContext,
		ResponseHeaderTimeout: c.o.ResponseHeaderTimeout,
		IdleConnTimeout:       90 * time.Second,
		// The request goes on as the dashboard sent it: no gzip of the
		// transport's own to ask for and undo.
		DisableCompression: true,
		HTTP2:              &http.HTTP2Config{SendPingTimeout: 15 * time.Second, PingTimeout: 5 * time.Second},
	}
	return &httputil.ReverseProxy{
		Rewrite:   c.rewrite,
		Transport: tr,
		// 0: event streams and bodies of unknown length are flushed on every
		// write, so a live stream passes through as it comes.
		FlushInterval: 0,
		// Recycled copy buffers: without them every forwarded response
		// allocated 32 KiB, two thirds of the bytes a forward allocates,
		// and the garbage collector's work under load.
		BufferPool: proxybuf.Pool,
		ModifyResponse: func(res *http.Response) error {
			if res.Header.Get(NotHeldHeader) != "" {
				res.Header.Del(NotHeldHeader) // the answer is the client's now, or not at all
				a := res.Request.Context().Value(routeKey{}).(*attempt)
				if a.again() {
					return errNotHeld
				}
			}
			c.forwarded.WithLabelValues(resultOK).Inc()
			if c.o.Streams != nil && eventstream.Is(res.Header) {
				res.Body = c.o.Streams.Wrap(res.Body)
			}
			return nil
		},
		ErrorHandler: c.proxyError,
		// Never the standard logger: its lines are not JSON.
		ErrorLog: c.o.ErrorLog,
	}
}

// Outcome is what became of a forwarded request.
type Outcome int

const (
	// Answered: the holder answered (or broke, and a 502 or 504 says
	// so), and w has the answer.
	Answered Outcome = iota
	// Unreached: the holder could not be reached at all — its address
	// refused the connection or the dial timed out. Nothing was sent and
	// nothing written to w.
	Unreached
	// NotHeld: the holder answered that it does not hold the connector
	// (NotHeldHeader): it moved away after this replica looked, or
	// dropped. It did not act on the request, and nothing was written
	// to w.
	NotHeld
)

// NotHeldHeader marks the answer of a replica to a request forwarded to
// it for a connector it does not hold (any more): the request was not
// acted on, and the replica that forwarded it may send it to wherever
// the connector is now. Only a hop's answer carries it.
const NotHeldHeader = "X-Uncaged-Cluster-Not-Held"

// Forward proxies r to the replica of route, unchanged but for the hop
// header: that replica checks the dashboard's credentials itself. The
// caller bounds r's context; a replica that does not answer is 502 or 504
// JSON, never a hang.
//
// When the request was not acted on where it went (Unreached, NotHeld),
// nothing is written to w and the caller may send it, any method, to
// wherever the connector is now: a replica killed outright (its
// connectors reconnect elsewhere), or one the connector left between the
// caller's look and the request's arrival. Its body goes again from the
// first byte when the caller made it Replayable; any other body only
// when not a byte of it was read (else the holder's answer is passed on).
func (c *Cluster) Forward(w http.ResponseWriter, r *http.Request, route Route) Outcome {
	a := &attempt{route: route}
	if r.Body != nil && r.Body != http.NoBody {
		p, ok := r.Body.(*Replay)
		if !ok {
			p = &Replay{src: r.Body} // keeps nothing: sent again only if unread
		}
		// The transport closes the body it was given, even when it never
		// connected; the server closes r's own body when the handler ends.
		a.replay, a.body = p, p.attempt()
		r = r.Clone(r.Context())
		r.Body = a.body
	}
	c.proxy.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), routeKey{}, a)))
	return a.outcome
}

// attempt is one Forward: where it went, and what became of it.
type attempt struct {
	route   Route
	replay  *Replay
	body    *replayReader
	outcome Outcome
}

// again makes the attempt's body ready to be sent again; false when it
// cannot be (more of it was read than was kept).
func (a *attempt) again() bool {
	return a.body == nil || a.replay.turnedAway(a.body)
}

// neverSent says whether err is a failure to connect to the holder, with
// nothing of the request read: it could not have been acted on.
func (a *attempt) neverSent(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial" && (a.body == nil || !a.body.wasRead()) && a.again()
}

// errNotHeld is the proxy's error for a holder's NotHeldHeader answer
// that the request can be sent again after.
var errNotHeld = errors.New("the replica does not hold the connector")

func (c *Cluster) rewrite(pr *httputil.ProxyRequest) {
	route := pr.In.Context().Value(routeKey{}).(*attempt).route
	// Checked when the replica announced it; an error leaves an empty
	// host, which the transport refuses and proxyError answers.
	if u, err := parseAdvertise(route.Advertise); err == nil {
		pr.Out.URL.Scheme, pr.Out.URL.Host = u.Scheme, u.Host
	}
	pr.Out.Host = ""
	pr.SetXForwarded()
	pr.Out.Header.Set(HopHeader, c.hop(pr.Out.Method, pr.Out.URL.Path, hopUser(pr.Out.Header), c.now()))
}

// hopUser is who the entering replica says made a request
// (tunnel.UserHeader, under any spelling of its name a server might read
// as it), as the hop signs it: the replica holding the tunnel believes the
// header because the hop does, so the hop must cover it, or a hop header
// replayed within its minute could carry another user. "" when none.
func hopUser(h http.Header) string {
	var keys []string
	for k := range h {
		if tunnel.IsUserHeader(k) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var vals []string
	for _, k := range keys {
		vals = append(vals, h[k]...)
	}
	return strings.Join(vals, "\n")
}

func (c *Cluster) proxyError(w http.ResponseWriter, r *http.Request, err error) {
	a := r.Context().Value(routeKey{}).(*attempt)
	// Neither is answered here: the caller looks for the connector again.
	switch {
	case errors.Is(err, errNotHeld):
		a.outcome = NotHeld
		c.forwarded.WithLabelValues(resultNotHeld).Inc()
		c.o.Logger.Debug("replica no longer holds the connector: looking again", "replica", a.route.Replica)
		return
	case a.neverSent(err):
		a.outcome = Unreached
		c.forwarded.WithLabelValues(resultUnreached).Inc()
		c.o.Logger.Debug("replica unreachable: waiting for its connector elsewhere", "replica", a.route.Replica, "err", err.Error())
		return
	}
	c.forwarded.WithLabelValues(resultError).Inc()
	if errors.Is(r.Context().Err(), context.Canceled) {
		return // the client went away; nobody to answer
	}
	status := http.StatusBadGateway
	msg := fmt.Sprintf("replica %s holding the connector is unreachable: %v", a.route.Replica, err)
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
		status = http.StatusGatewayTimeout
		msg = fmt.Sprintf("replica %s holding the connector did not answer in time", a.route.Replica)
	}
	c.o.Logger.Warn("forward failed", "replica", a.route.Replica, "status", status, "err", err.Error())
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	fmt.Fprintf(w, "{\"error\":%q}\n", msg)
}

// hop is this replica's hop header for a request made by user (see
// hopUser).
func (c *Cluster) hop(method, path, user string, now time.Time) string {
	ts := strconv.FormatInt(now.Unix(), 10)
	return ts + "." + c.hopMAC(c.o.ReplicaID, ts, method, path, user) + "." + c.o.ReplicaID
}

// hopMAC signs a hop. A request that names no user is signed as replicas
// before the user header signed every hop, so that they and this one
// verify each other's hops during a rolling upgrade; one that names a
// user is signed with it, under another label.
func (c *Cluster) hopMAC(replica, ts, method, path, user string) string {
	if user == "" {
		return c.signer.sign("hop", replica, ts, method, path)
	}
	return c.signer.sign("hop+user", replica, ts, method, path, user)
}

// VerifyHop checks the hop header of a request another replica forwarded
// and returns that replica's id.
func (c *Cluster) VerifyHop(r *http.Request) (string, error) {
	h := r.Header.Get(HopHeader)
	ts, rest, ok1 := strings.Cut(h, ".")
	mac, replica, ok2 := strings.Cut(rest, ".")
	if !ok1 || !ok2 || replica == "" {
		return "", errors.New("malformed cluster hop header")
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return "", errors.New("malformed cluster hop header")
	}
	if d := c.now().Sub(time.Unix(sec, 0)); d > hopSkew || d < -hopSkew {
		return "", errors.New("stale cluster hop header (or the replicas' clocks disagree)")
	}
	if !hmac.Equal([]byte(mac), []byte(c.hopMAC(replica, ts, r.Method, r.URL.Path, hopUser(r.Header)))) {
		return "", errors.New("invalid cluster hop signature")
	}
	return replica, nil
}
