package link

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"syscall"
	"unicode/utf8"

	"github.com/uncaged/workflow/shared/tunnel"
)

// Kind is why a link gave up: each is a failure that retrying cannot
// cure, and the CLI turns each into an exit code of its own.
type Kind int

// Kinds of PermanentError.
const (
	// KindConfig: the gateway URL or the name cannot work (no scheme, an
	// unsupported scheme, a 400 from the gateway).
	KindConfig Kind = iota + 1
	// KindCredential: the gateway refused the token (401, 403).
	KindCredential
	// KindTLS: the gateway's certificate did not verify.
	KindTLS
	// KindNotTunnel: what answers is not the gateway's tunnel: a web page,
	// a 404, or a proxy that drops the WebSocket upgrade.
	KindNotTunnel
	// KindNameTaken: another connector holds the name (409).
	KindNameTaken
	// KindTakenOver: another instance took the name with --takeover.
	KindTakenOver
	// KindRootInUse: another connect already serves the same instance
	// (storage root). The CLI finds it before anything is dialed: two
	// links of one instance would replace each other at the gateway
	// without end.
	KindRootInUse
)

// PermanentError is Run's error when retrying cannot help; Message says
// what to change.
type PermanentError struct {
	Kind    Kind
	Message string
}

func (e *PermanentError) Error() string { return e.Message }

// CheckGateway checks a gateway URL before anything is dialed, so a
// mistyped URL stops connect at once instead of failing every retry.
func CheckGateway(gateway string) error {
	if strings.TrimSpace(gateway) == "" {
		return &PermanentError{KindConfig, "no gateway URL: pass --gateway URL, e.g. https://gw.example.com"}
	}
	if !strings.Contains(gateway, "://") {
		return &PermanentError{KindConfig, fmt.Sprintf("gateway URL %q has no scheme: write https://%s (or http:// for a gateway without TLS)", gateway, gateway)}
	}
	u, err := url.Parse(gateway)
	if err != nil {
		return &PermanentError{KindConfig, fmt.Sprintf("gateway URL %q does not parse: %v", gateway, unwrapURLError(err))}
	}
	switch u.Scheme {
	case "http", "https", "ws", "wss":
	default:
		return &PermanentError{KindConfig, fmt.Sprintf("gateway URL %q: unsupported scheme %q (use https://, or http:// for a gateway without TLS)", gateway, u.Scheme)}
	}
	if u.Host == "" {
		return &PermanentError{KindConfig, fmt.Sprintf("gateway URL %q has no host", gateway)}
	}
	if _, err := tunnel.ConnectURL(gateway, "x"); err != nil {
		return &PermanentError{KindConfig, err.Error()}
	}
	return nil
}

// unwrapURLError drops url.Error's repetition of the URL.
func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// explainer turns what went wrong with one attempt into a line for a
// person, and says when it can never go right.
type explainer struct {
	gateway, name, token string
}

// dialFailure explains a failed dial; perm is set when retrying is
// pointless.
func (x explainer) dialFailure(err error) (cause string, perm *PermanentError) {
	var rej *tunnel.RejectedError
	if errors.As(err, &rej) {
		return x.rejected(rej)
	}
	host := x.host()
	var (
		unknownCA  x509.UnknownAuthorityError
		hostname   x509.HostnameError
		invalid    x509.CertificateInvalidError
		verify     *tls.CertificateVerificationError
		notTLS     tls.RecordHeaderError
		dnsErr     *net.DNSError
		netTimeout net.Error
	)
	switch {
	case errors.As(err, &verify), errors.As(err, &unknownCA), errors.As(err, &hostname), errors.As(err, &invalid):
		return "", &PermanentError{KindTLS, fmt.Sprintf("TLS verification of %s failed: %s: this machine does not trust the gateway's certificate (a self-signed or private CA's certificate needs its CA added to the system's trust store, or SSL_CERT_FILE pointing at it; a wrong host name needs the URL the certificate names)", host, tlsReason(err))}
	case errors.As(err, &notTLS), strings.Contains(err.Error(), "server gave HTTP response to HTTPS client"):
		return fmt.Sprintf("%s does not speak TLS (an https:// URL for a plain-HTTP port?): use http://, or the port where the gateway or its proxy serves TLS", host), nil
	case errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Sprintf("cannot reach the gateway at %s: connection refused (is it running, and on that port?)", host), nil
	case errors.As(err, &dnsErr):
		return fmt.Sprintf("cannot resolve %s: %v", dnsErr.Name, dnsErr.Err), nil
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return fmt.Sprintf("cannot reach the gateway at %s: %v", host, innermost(err)), nil
	case errors.As(err, &netTimeout) && netTimeout.Timeout():
		return fmt.Sprintf("no answer from the gateway at %s in time", host), nil
	}
	return err.Error(), nil
}

// tlsReason is the certificate problem without Go's wrapping.
func tlsReason(err error) string {
	var verify *tls.CertificateVerificationError
	if errors.As(err, &verify) && verify.Err != nil {
		return verify.Err.Error()
	}
	return innermost(err).Error()
}

// innermost is the last error in err's chain of single wrappers.
func innermost(err error) error {
	for {
		next := errors.Unwrap(err)
		if next == nil {
			return err
		}
		err = next
	}
}

// host is the gateway's host:port for messages.
func (x explainer) host() string {
	u, err := url.Parse(x.gateway)
	if err != nil || u.Host == "" {
		return x.gateway
	}
	if u.Port() != "" {
		return u.Host
	}
	switch u.Scheme {
	case "https", "wss":
		return u.Host + ":443"
	}
	return u.Host + ":80"
}

// refusalBody is the gateway's JSON error answer.
type refusalBody struct {
	Error  string `json:"error"`
	Reason string `json:"reason"`
}

// rejected explains an answer that was not the WebSocket upgrade.
func (x explainer) rejected(rej *tunnel.RejectedError) (cause string, perm *PermanentError) {
	var body refusalBody
	isJSON := json.Unmarshal([]byte(rej.Message), &body) == nil && body.Error != ""
	msg := rej.Message
	if isJSON {
		msg = body.Error
	}
	page := !isJSON && (strings.Contains(rej.ContentType, "text/html") || strings.HasPrefix(strings.TrimSpace(rej.Message), "<"))
	where, _ := tunnel.ConnectURL(x.gateway, x.name)
	refused := fmt.Sprintf("gateway refused the connection (%d): %s", rej.Status, clip(msg, 300))
	switch s := rej.Status; {
	case s == 401 || s == 403:
		return "", &PermanentError{KindCredential, refused + x.credentialHint(msg, body.Reason)}
	case s == 409:
		return "", &PermanentError{KindNameTaken, refused}
	case s == 404:
		what := "the gateway answers 404"
		if page {
			what = "a web page answers 404"
		}
		return "", &PermanentError{KindNotTunnel, fmt.Sprintf("no gateway tunnel at %s: %s. Check the path in --gateway: it is the gateway's base URL (e.g. https://gw.example.com; connect adds %s), and that a proxy in front of it passes %s on", where, what, tunnel.ConnectPath, tunnel.ConnectPath)}
	case s == 426:
		return "", &PermanentError{KindNotTunnel, fmt.Sprintf("the gateway got the connection without its WebSocket upgrade (426): the proxy in front of it does not forward WebSocket upgrades (it must pass the Upgrade and Connection headers for %s)", tunnel.ConnectPath)}
	case s == 400 && strings.Contains(msg, "HTTP request to an HTTPS server"):
		return "", &PermanentError{KindConfig, fmt.Sprintf("%s speaks HTTPS: use https:// in --gateway", x.host())}
	case s == 400:
		return "", &PermanentError{KindConfig, refused}
	case s < 400:
		return "", &PermanentError{KindNotTunnel, fmt.Sprintf("this URL answers with a web page, not the gateway's tunnel: check the path and that the proxy forwards WebSocket upgrades (%s answered %d%s)", where, s, contentType(rej.ContentType))}
	case s == 502 || s == 504:
		return fmt.Sprintf("the proxy in front of the gateway answered %d: the gateway behind it is down or unreachable", s), nil
	case page:
		return fmt.Sprintf("%s answered %d with a web page, not the gateway's tunnel", where, s), nil
	}
	return refused, nil
}

func contentType(ct string) string {
	if ct == "" {
		return ""
	}
	return ", " + strings.TrimSpace(strings.SplitN(ct, ";", 2)[0])
}

// credentialHint says what the refused credential was and what to do,
// leaving out what the gateway's own message (msg) says already: newer
// gateways name the token's kind and connector themselves, older ones
// and proxies do not.
func (x explainer) credentialHint(msg, reason string) string {
	hint := ""
	if reason != "" {
		hint = " [" + reason + "]"
	}
	// Each clause with what in msg would say it already.
	type clause struct{ text, said string }
	fresh := clause{fmt.Sprintf("make a new one with `uncaged-gateway token create --connector %s`", x.name), "token create --connector"}
	var clauses []clause
	switch sub, role, ok := tokenClaims(x.token); {
	case !ok:
		clauses = []clause{{"the credential is not a gateway token (the shared secret?)", "token of this gateway"}, fresh}
	case role != "" && role != "connector":
		clauses = []clause{{fmt.Sprintf("this is a %s token, and connect needs a connector token", role), "a " + role + " token"}, fresh}
	case sub != "" && sub != x.name:
		clauses = []clause{{fmt.Sprintf("the token is for connector %q", sub), "token is for connector"},
			{fmt.Sprintf("connect with --name %s, or use a token for %q", sub, x.name), ""}}
	case sub != "":
		clauses = []clause{{fmt.Sprintf("the token is for connector %q", sub), "token is for connector"}, fresh}
	default:
		clauses = []clause{fresh}
	}
	for _, c := range clauses {
		if c.said == "" || !strings.Contains(msg, c.said) {
			hint += "; " + c.text
		}
	}
	return hint
}

// tokenClaims reads a gateway token's subject and role without checking
// its signature (the gateway did that): only to name it in a message.
func tokenClaims(token string) (sub, role string, ok bool) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return "", "", false
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return "", "", false
	}
	var c struct {
		Sub  string `json:"sub"`
		Role string `json:"role"`
	}
	if json.Unmarshal(b, &c) != nil {
		return "", "", false
	}
	return c.Sub, c.Role, true
}

// closed explains the end of a connection; perm is set when another
// instance took the name.
func closed(err error) (cause string, perm *PermanentError) {
	var ce *tunnel.ClosedError
	if errors.As(err, &ce) && ce.TakenOver() {
		return "", &PermanentError{KindTakenOver, "the gateway gave this connector's name to another machine: " + ce.Reason + "; not reconnecting (that machine asked for the name with --takeover; connect with --takeover to take it back, or use another --name)"}
	}
	if err == nil {
		return "connection closed", nil
	}
	return err.Error(), nil
}

// clip shortens s to at most n runes, marking the cut.
func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n]) + "…"
}
