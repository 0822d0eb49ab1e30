// Package auth decides who may talk to the gateway: connectors (each bound
// to one name) and dashboard users. Credentials are JWTs the gateway signs
// with its key (HS256), or the single shared secret of a simple setup. Every
// comparison of secrets is constant-time, and no credential is ever logged.
package auth

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Roles a token can carry.
const (
	RoleConnector = "connector"
	RoleDashboard = "dashboard"
)

// CookieName is the HttpOnly cookie that carries a dashboard token for
// requests that cannot send headers (the browser's EventSource).
const CookieName = "uncaged_session"

// Errors of Verify; a caller maps them to 401 (unauthenticated) or 403
// (authenticated but not allowed).
var (
	ErrNoCredentials = errors.New("missing credentials")
	ErrInvalid       = errors.New("invalid or expired token")
	ErrWrongRole     = errors.New("token not valid for this use")
	ErrWrongName     = errors.New("token is for another connector")
)

// Claims are what a token says.
type Claims struct {
	Role string `json:"role"`
	jwt.RegisteredClaims
}

// Principal is who a request comes from.
type Principal struct {
	Role string
	// Name is the connector a connector token is bound to ("" for the
	// shared secret, which may connect any name, and for dashboards).
	Name string
	// Shared is true when the shared secret was presented.
	Shared bool
	// TokenID is the token's id (its jti) as the store records it; empty
	// for the shared secret and for tokens issued before ids existed.
	TokenID string
	// Note is the note recorded with the token, for the audit log.
	Note string
}

// Authority issues and checks credentials.
type Authority struct {
	key    []byte
	secret string
	now    func() time.Time

	// verified remembers tokens that passed, so the dashboard's every
	// request does not re-parse and re-sign its JWT. Entries live at most
	// cacheTTL and never past the token's expiry.
	mu       sync.Mutex
	verified map[cacheKey]cacheEntry
}

type cacheKey struct{ token, role, name string }

type cacheEntry struct {
	p       Principal
	expires time.Time
}

const (
	cacheTTL  = time.Minute
	cacheSize = 4096
)

// New returns an authority signing with key (at least 32 bytes) and also
// accepting the shared secret when it is not empty.
func New(key []byte, sharedSecret string) (*Authority, error) {
	if len(key) < 32 {
		return nil, errors.New("gateway signing key must be at least 32 bytes")
	}
	return &Authority{key: key, secret: sharedSecret, now: time.Now, verified: map[cacheKey]cacheEntry{}}, nil
}

// LoadKey reads the signing key: the file, else the environment variable
// UNCAGED_GATEWAY_KEY (base64 or raw). Whitespace around it is ignored.
func LoadKey(file string, getenv func(string) string) ([]byte, error) {
	var raw string
	switch {
	case file != "":
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("read key file: %w", err)
		}
		raw = string(b)
	case getenv("UNCAGED_GATEWAY_KEY") != "":
		raw = getenv("UNCAGED_GATEWAY_KEY")
	default:
		return nil, errors.New("no signing key: pass --key-file or set UNCAGED_GATEWAY_KEY (generate one with `uncaged-gateway key generate`)")
	}
	raw = strings.TrimSpace(raw)
	if b, err := base64.StdEncoding.DecodeString(raw); err == nil && len(b) >= 32 {
		return b, nil
	}
	return []byte(raw), nil
}

// GenerateKey returns a new random key, base64-encoded.
func GenerateKey() string {
	b := make([]byte, 32)
	rand.Read(b)
	return base64.StdEncoding.EncodeToString(b)
}

// Issue signs a token for role (and name, for a connector) valid for ttl
// (0: no expiry).
func (a *Authority) Issue(role, name string, ttl time.Duration) (string, error) {
	switch role {
	case RoleConnector:
		if name == "" {
			return "", errors.New("a connector token needs the connector's name")
		}
	case RoleDashboard:
		if name != "" {
			return "", errors.New("a dashboard token is not bound to a name")
		}
	default:
		return "", fmt.Errorf("unknown role %q", role)
	}
	now := a.now()
	c := Claims{Role: role, RegisteredClaims: jwt.RegisteredClaims{Subject: name, IssuedAt: jwt.NewNumericDate(now), Issuer: "uncaged-gateway"}}
	if ttl > 0 {
		c.ExpiresAt = jwt.NewNumericDate(now.Add(ttl))
	}
	return jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString(a.key)
}

// Verify checks a presented credential for role. For a connector, name is
// the name it wants: a token bound to another name is refused.
func (a *Authority) Verify(credential, role, name string) (Principal, error) {
	if credential == "" {
		return Principal{}, ErrNoCredentials
	}
	if a.secret != "" && subtle.ConstantTimeCompare([]byte(credential), []byte(a.secret)) == 1 {
		return Principal{Role: role, Shared: true}, nil
	}
	key := cacheKey{credential, role, name}
	now := a.now()
	a.mu.Lock()
	e, ok := a.verified[key]
	a.mu.Unlock()
	if ok && now.Before(e.expires) {
		return e.p, nil
	}
	p, exp, err := a.verify(credential, role, name)
	if err != nil {
		return p, err
	}
	expires := now.Add(cacheTTL)
	if !exp.IsZero() && exp.Before(expires) {
		expires = exp
	}
	a.mu.Lock()
	if len(a.verified) >= cacheSize {
		clear(a.verified)
	}
	a.verified[key] = cacheEntry{p: p, expires: expires}
	a.mu.Unlock()
	return p, nil
}

// verify checks a JWT and returns its principal and expiry (zero: none).
func (a *Authority) verify(credential, role, name string) (Principal, time.Time, error) {
	var c Claims
	_, err := jwt.ParseWithClaims(credential, &c, func(t *jwt.Token) (any, error) { return a.key, nil },
		jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}), jwt.WithTimeFunc(a.now), jwt.WithIssuer("uncaged-gateway"))
	if err != nil {
		return Principal{}, time.Time{}, ErrInvalid
	}
	if c.Role != role {
		return Principal{}, time.Time{}, ErrWrongRole
	}
	if role == RoleConnector && subtle.ConstantTimeCompare([]byte(c.Subject), []byte(name)) != 1 {
		return Principal{}, time.Time{}, ErrWrongName
	}
	var exp time.Time
	if c.ExpiresAt != nil {
		exp = c.ExpiresAt.Time
	}
	return Principal{Role: c.Role, Name: c.Subject}, exp, nil
}

// Source is where a request's credential came from.
type Source uint8

// Sources of a credential. Only the cookie is sent by a browser on its
// own, to any request for the gateway whichever page makes it, so only a
// cookie's requests need their origin checked (cross-site request
// forgery); a header or query token is one the sender had to know.
const (
	FromNone Source = iota
	FromHeader
	FromCookie
	FromQuery
)

// Credential extracts what a request presents: a bearer token, then the
// session cookie, then the original's ?key= (dashboard EventSource) or
// ?secret= (original connectors) query parameter.
func Credential(r *http.Request) string {
	c, _ := CredentialFrom(r)
	return c
}

// CredentialFrom is Credential and where it came from.
func CredentialFrom(r *http.Request) (string, Source) {
	if h := r.Header.Get("Authorization"); h != "" {
		if tok, ok := strings.CutPrefix(h, "Bearer "); ok {
			return strings.TrimSpace(tok), FromHeader
		}
	}
	if c, err := r.Cookie(CookieName); err == nil && c.Value != "" {
		return c.Value, FromCookie
	}
	q := r.URL.Query()
	if k := q.Get("key"); k != "" {
		return k, FromQuery
	}
	if s := q.Get("secret"); s != "" {
		return s, FromQuery
	}
	return "", FromNone
}

// Status maps a Verify error to its HTTP status.
func Status(err error) int {
	if errors.Is(err, ErrWrongRole) || errors.Is(err, ErrWrongName) {
		return http.StatusForbidden
	}
	return http.StatusUnauthorized
}
