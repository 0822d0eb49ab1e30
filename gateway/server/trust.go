package server

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// The forwarding headers (X-Forwarded-For, X-Real-IP, X-Forwarded-Proto)
// are whatever the sender wrote. Only a reverse proxy the operator put in
// front of the gateway (Options.TrustedProxies) overwrites or appends
// them truthfully; from anybody else they are ignored and the peer
// address is the client. Without the check, rotating X-Forwarded-For
// walked past the per-address connect limit and put forged addresses in
// the logs.

// ParseTrustedProxies reads the --trusted-proxy values: CIDRs
// ("10.0.0.0/8") or single addresses ("127.0.0.1"), each value possibly a
// comma- or space-separated list (the environment variable's form).
func ParseTrustedProxies(values []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, v := range values {
		for _, s := range strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\n' }) {
			if p, err := netip.ParsePrefix(s); err == nil {
				out = append(out, p.Masked())
				continue
			}
			a, err := netip.ParseAddr(s)
			if err != nil {
				return nil, fmt.Errorf("trusted proxy %q is neither an address nor a CIDR", s)
			}
			a = a.Unmap()
			out = append(out, netip.PrefixFrom(a, a.BitLen()))
		}
	}
	return out, nil
}

// trustedProxies are the peers whose forwarding headers are believed.
type trustedProxies []netip.Prefix

// contains says whether a is one of the trusted proxies.
func (t trustedProxies) contains(a netip.Addr) bool {
	a = a.Unmap()
	for _, p := range t {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// peerHost is the host part of a request's RemoteAddr, without copying.
func peerHost(remoteAddr string) string {
	if host, _, err := net.SplitHostPort(remoteAddr); err == nil {
		return host
	}
	return remoteAddr
}

// fromProxy says whether r came straight from a trusted proxy.
func (t trustedProxies) fromProxy(r *http.Request) bool {
	if len(t) == 0 {
		return false
	}
	a, err := netip.ParseAddr(peerHost(r.RemoteAddr))
	return err == nil && t.contains(a)
}

// clientIP is the echo.IPExtractor of the gateway: the peer address,
// unless the peer is a trusted proxy. Then X-Forwarded-For is read from
// the right, each proxy having appended the address it saw, and the first
// address that is not itself a trusted proxy is the client; everything to
// its left was written by that client and is not believed. X-Real-IP
// stands in when a trusted proxy sent no X-Forwarded-For. It allocates
// nothing: the answer is a substring of the header or of RemoteAddr.
func (t trustedProxies) clientIP(r *http.Request) string {
	peer := peerHost(r.RemoteAddr)
	if !t.fromProxy(r) {
		return peer
	}
	client := peer
	xff := r.Header.Values("X-Forwarded-For")
	if len(xff) == 0 {
		if real := strings.TrimSpace(r.Header.Get("X-Real-IP")); real != "" {
			if _, err := netip.ParseAddr(real); err == nil {
				return real
			}
		}
		return peer
	}
	// Several header lines are one list, in order.
	for i := len(xff) - 1; i >= 0; i-- {
		list := xff[i]
		for list != "" {
			var item string
			if j := strings.LastIndexByte(list, ','); j >= 0 {
				list, item = list[:j], list[j+1:]
			} else {
				list, item = "", list
			}
			item = strings.TrimSpace(item)
			if item == "" {
				continue
			}
			a, err := netip.ParseAddr(item)
			if err != nil {
				// Garbage where a proxy would have written an address: the
				// last address a trusted hop vouched for is as far as we go.
				return client
			}
			if !t.contains(a) {
				return item
			}
			client = item
		}
	}
	// Every hop is a trusted proxy (a request from inside): the farthest.
	return client
}

// isHTTPS says whether the client came over HTTPS: to the gateway itself,
// or to a trusted proxy that says so in X-Forwarded-Proto. It decides the
// session cookie's Secure flag, which a client must not be able to drop.
func (t trustedProxies) isHTTPS(r *http.Request) bool {
	if r.TLS != nil {
		return true
	}
	if !t.fromProxy(r) {
		return false
	}
	proto, _, _ := strings.Cut(r.Header.Get("X-Forwarded-Proto"), ",")
	return strings.EqualFold(strings.TrimSpace(proto), "https")
}
