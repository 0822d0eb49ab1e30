package legacy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
)

// AllowFlag names the gateway's flag that lists the hosts an original
// client's registered URL may point at. The refusals name it, so an
// operator reading one knows what to change.
const AllowFlag = "--legacy-url-allow"

// ErrURLClientsOff says a registered URL is not fetched because the
// gateway's operator allowed no host.
var ErrURLClientsOff = errors.New("this gateway fetches an original client's registered URL only for hosts its operator lists with " + AllowFlag + " (off by default); the client may connect over the WebSocket (/ws/connect) instead")

// AllowList is where the gateway may send the requests of original
// clients registered with a URL (ParseAllowList). A client that registers
// a URL makes the gateway fetch it, so without a list any holder of a
// connector credential could have the gateway reach anything it can
// reach: its loopback, the cloud's metadata address, the private network.
//
// Entries are addresses and CIDRs, which admit any URL whose host resolves
// into them, and host names ("client.example.com", or "*.example.com" for
// its subdomains), which admit that name. The check that counts is made
// on the address dialed, after resolution, on every connection: a listed
// name whose DNS answer changes between the check and the dial (DNS
// rebinding), or a wildcard under which anybody may point a name at any
// address, still reaches only public addresses, unless an address or
// CIDR entry admits the address too.
type AllowList struct {
	names    map[string]bool
	suffixes []string // ".example.com" for "*.example.com"
	prefixes []netip.Prefix
}

// ParseAllowList reads the --legacy-url-allow values, each possibly a
// comma- or space-separated list (the environment variable's form). No
// entries give nil: URL registrations are off.
func ParseAllowList(values []string) (*AllowList, error) {
	a := &AllowList{names: map[string]bool{}}
	n := 0
	for _, v := range values {
		for _, s := range strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\n' }) {
			if err := a.add(s); err != nil {
				return nil, err
			}
			n++
		}
	}
	if n == 0 {
		return nil, nil
	}
	return a, nil
}

// add parses one entry.
func (a *AllowList) add(s string) error {
	if p, err := netip.ParsePrefix(s); err == nil {
		if p.Addr().Zone() != "" {
			return fmt.Errorf("%s entry %q: no zone in a CIDR", AllowFlag, s)
		}
		a.prefixes = append(a.prefixes, netip.PrefixFrom(p.Addr().Unmap(), unmappedBits(p)).Masked())
		return nil
	}
	if ip, err := netip.ParseAddr(s); err == nil {
		if ip.Zone() != "" {
			return fmt.Errorf("%s entry %q: no zone in an address", AllowFlag, s)
		}
		ip = ip.Unmap()
		a.prefixes = append(a.prefixes, netip.PrefixFrom(ip, ip.BitLen()))
		return nil
	}
	name := strings.ToLower(strings.TrimSuffix(s, "."))
	wild := false
	if rest, ok := strings.CutPrefix(name, "*."); ok {
		name, wild = rest, true
	}
	if !validHostName(name) {
		return fmt.Errorf("%s entry %q is neither an address, a CIDR nor a host name (a name may start with \"*.\" for its subdomains; no scheme, port or path)", AllowFlag, s)
	}
	if wild {
		a.suffixes = append(a.suffixes, "."+name)
	} else {
		a.names[name] = true
	}
	return nil
}

// unmappedBits is p's length for its address without the IPv4-in-IPv6
// mapping.
func unmappedBits(p netip.Prefix) int {
	if p.Addr().Is4In6() {
		return max(0, p.Bits()-96)
	}
	return p.Bits()
}

// validHostName says whether s is a DNS name of letters, digits and
// hyphens, with at least two labels or a single label (an intranet name).
func validHostName(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for label := range strings.SplitSeq(s, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-') {
				return false
			}
		}
	}
	return true
}

// String lists the entries, for the start-up log line.
func (a *AllowList) String() string {
	if a == nil {
		return ""
	}
	var out []string
	for _, p := range a.prefixes {
		out = append(out, p.String())
	}
	for n := range a.names {
		out = append(out, n)
	}
	for _, s := range a.suffixes {
		out = append(out, "*"+s)
	}
	return strings.Join(out, ",")
}

// nameListed says whether host (a name, not an address) is listed by name
// or under a wildcard.
func (a *AllowList) nameListed(host string) bool {
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	if a.names[host] {
		return true
	}
	for _, s := range a.suffixes {
		if strings.HasSuffix(host, s) {
			return true
		}
	}
	return false
}

// addressListed says whether ip is inside an address or CIDR entry.
func (a *AllowList) addressListed(ip netip.Addr) bool {
	ip = ip.Unmap()
	for _, p := range a.prefixes {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// public says whether ip is an address on the internet: not loopback,
// link-local (the cloud metadata address among them), private,
// unspecified or multicast, nor in a range that is not routed publicly
// (nonPublic) or that embeds an IPv4 address another host would translate
// (NAT64, 6to4, Teredo), which could be any address behind it.
func public(ip netip.Addr) bool {
	ip = ip.Unmap()
	if !ip.IsGlobalUnicast() || ip.IsPrivate() {
		return false
	}
	for _, p := range nonPublic {
		if p.Contains(ip) {
			return false
		}
	}
	return true
}

// nonPublic are the global unicast ranges (as net/netip counts them) a
// listed name must not reach without an address entry.
var nonPublic = []netip.Prefix{
	netip.MustParsePrefix("100.64.0.0/10"),  // shared address space (carrier-grade NAT)
	netip.MustParsePrefix("192.0.0.0/24"),   // IETF protocol assignments
	netip.MustParsePrefix("198.18.0.0/15"),  // benchmarking
	netip.MustParsePrefix("240.0.0.0/4"),    // reserved
	netip.MustParsePrefix("64:ff9b::/96"),   // NAT64
	netip.MustParsePrefix("64:ff9b:1::/48"), // local NAT64
	netip.MustParsePrefix("2001::/32"),      // Teredo
	netip.MustParsePrefix("2002::/16"),      // 6to4
	netip.MustParsePrefix("2001:db8::/32"),  // documentation
}

// DialAllowed says whether a connection for host may go to ip, the
// address it resolved to: ip is listed, or host is a listed name and ip
// is public.
func (a *AllowList) DialAllowed(host string, ip netip.Addr) bool {
	if a == nil || !ip.IsValid() {
		return false
	}
	if a.addressListed(ip) {
		return true
	}
	if _, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		return false // an address host is admitted by address only
	}
	return a.nameListed(host) && public(ip)
}

// Resolver looks host names up; *net.Resolver is one.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// CheckURL says whether a registered URL may be fetched: http or https,
// no user information, and a host that is a listed name, a listed address,
// or a name that resolves to a listed address (looked up with r). The
// error names the flag. Passing says only that the URL may be tried:
// every connection is checked again when it is dialed.
func (a *AllowList) CheckURL(ctx context.Context, r Resolver, raw string) error {
	if a == nil {
		return ErrURLClientsOff
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Opaque != "" {
		return fmt.Errorf("registered url %q: not an http(s) URL with a host", raw)
	}
	if u.User != nil {
		return fmt.Errorf("registered url %q: user information in a URL is not forwarded; use the client token", u.Redacted())
	}
	host := u.Hostname()
	if ip, err := netip.ParseAddr(host); err == nil {
		if a.addressListed(ip) {
			return nil
		}
		return fmt.Errorf("registered url %q: %s is not listed in %s", raw, host, AllowFlag)
	}
	if a.nameListed(host) {
		return nil
	}
	if len(a.prefixes) > 0 && r != nil {
		ips, err := r.LookupNetIP(ctx, "ip", host)
		if err != nil {
			return fmt.Errorf("registered url %q: %s is not listed in %s, and looking it up failed: %v", raw, host, AllowFlag, err)
		}
		for _, ip := range ips {
			if a.addressListed(ip) {
				return nil
			}
		}
	}
	return fmt.Errorf("registered url %q: %s is not listed in %s", raw, host, AllowFlag)
}

// IsFetchURL says whether a registered URL is one the gateway would fetch
// (http or https) rather than a placeholder: the original's connect
// registers "ws://<name>" and is reached through its socket only.
func IsFetchURL(raw string) bool {
	scheme, _, ok := strings.Cut(raw, "://")
	return ok && (strings.EqualFold(scheme, "http") || strings.EqualFold(scheme, "https"))
}

// guardedDial is a DialContext that connects only to addresses the list
// allows for the host asked for, checked on the address actually dialed.
func (a *AllowList) guardedDial(d net.Dialer) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		d := d
		d.ControlContext = func(_ context.Context, _, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return fmt.Errorf("dial %s: unexpected address %q", host, address)
			}
			if !a.DialAllowed(host, ap.Addr()) {
				return &RefusedError{Host: host, Addr: ap.Addr()}
			}
			return nil
		}
		return d.DialContext(ctx, network, addr)
	}
}

// RefusedError is a connection the allow-list refused.
type RefusedError struct {
	Host string
	Addr netip.Addr
}

func (e *RefusedError) Error() string {
	if e.Host == e.Addr.String() {
		return fmt.Sprintf("%s is not listed in %s", e.Host, AllowFlag)
	}
	return fmt.Sprintf("%s resolves to %s, which %s does not allow for it (a listed name reaches public addresses only; list the address or its CIDR too)", e.Host, e.Addr, AllowFlag)
}
