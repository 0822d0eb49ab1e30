// Package auth decides who may talk to the gateway: connectors (each bound
// to one name) and dashboard users. Credentials are JWTs the gateway signs
// with its key (HS256), or the single shared secret of a simple setup (the
// weakest option: it cannot be revoked or told apart per user). Every
// comparison of secrets is constant-time, and no credential is ever logged.
//
// # Token lifecycle
//
// Every token [Authority.Mint] signs carries an id (its jti) that the
// caller records in the gateway's store, with its kind, name, expiry and
// note. Once [Authority.Load] has given the authority that store, a token
// is accepted only if its record exists and is not revoked. That is
// checked in memory, never with a query per request: the known records
// and the revoked ids are loaded at start and kept current by
// [Authority.Apply] with the store's change notifications. A validly
// signed token whose id is not known yet (minted by `token create` a
// moment ago) costs one store lookup, whose answer is kept; a missing
// record is remembered for a short while (unknownTTL), so only holders of
// a validly signed token can make the gateway query at all.
//
// Tokens signed before ids existed have none and cannot be revoked except
// by rotating the key; they are still accepted, with one warning per
// token in the log.
//
// # Refusals
//
// Every refusal is a [*Refusal] saying why: its Reason is a stable code
// for programs (the gateway answers {"error": Message, "reason": Reason})
// and its Message says it for people, never quoting the credential.
package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base32"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/uncaged/workflow/gateway/store"
)

// Roles a token can carry.
const (
	RoleConnector = "connector"
	RoleDashboard = "dashboard"
)

// CookieName is the HttpOnly cookie that carries a dashboard token for
// requests that cannot send headers (the browser's EventSource).
const CookieName = "uncaged_session"

// Classes of Verify's refusals, for errors.Is: every [*Refusal] is one of
// them. A caller maps them to 401 (unauthenticated) or 403 (authenticated
// but not allowed) with [Status].
var (
	// ErrNoCredentials: nothing was presented.
	ErrNoCredentials = errors.New("missing credentials")
	// ErrInvalid: the credential is not (or no longer) good: expired,
	// revoked, malformed, signed with another key, or unknown.
	ErrInvalid = errors.New("invalid or expired token")
	// ErrWrongRole: a good token of the other kind.
	ErrWrongRole = errors.New("token not valid for this use")
	// ErrWrongName: a good connector token bound to another name.
	ErrWrongName = errors.New("token is for another connector")
)

// ErrUnavailable is returned (wrapped) when a token's record could not be
// read from the store: the token may be good, so it is not a refusal (the
// gateway answers 503 and the client tries again).
var ErrUnavailable = errors.New("cannot check the token now")

// Reasons of a Refusal: stable codes, part of the gateway's API.
const (
	ReasonMissing        = "missing"
	ReasonExpired        = "expired"
	ReasonRevoked        = "revoked"
	ReasonWrongKind      = "wrong-kind"
	ReasonWrongConnector = "wrong-connector"
	ReasonMalformed      = "malformed"
	ReasonBadSignature   = "bad-signature"
	ReasonUnknown        = "unknown"
)

// Refusal is why Verify refused a credential. Its Message never holds the
// credential.
type Refusal struct {
	// Reason is one of the Reason constants.
	Reason string
	// Message says it for a person, e.g. "token expired at
	// 2026-01-02T03:04:05Z".
	Message string
}

// Error implements error.
func (r *Refusal) Error() string { return r.Message }

// Is makes a Refusal match its class (ErrNoCredentials, ErrInvalid,
// ErrWrongRole or ErrWrongName), so callers that only tell the classes
// apart need not know every reason.
func (r *Refusal) Is(target error) bool {
	switch r.Reason {
	case ReasonMissing:
		return target == ErrNoCredentials
	case ReasonWrongKind:
		return target == ErrWrongRole
	case ReasonWrongConnector:
		return target == ErrWrongName
	default:
		return target == ErrInvalid
	}
}

func refuse(reason, format string, args ...any) *Refusal {
	return &Refusal{Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// Tokens is what the authority reads from the store: store.Store has it.
type Tokens interface {
	GetToken(ctx context.Context, id string) (store.Token, error)
	ListTokens(ctx context.Context, f store.TokenFilter) ([]store.Token, error)
}

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
	// Expires is when the token expires; zero for none (and for the
	// shared secret). What the credential opens ends then (Hold).
	Expires time.Time
}

// Authority issues and checks credentials.
type Authority struct {
	key       []byte
	secret    string
	now       func() time.Time
	afterFunc func(time.Duration, func()) func() bool

	// verified remembers tokens that passed, so the dashboard's every
	// request does not re-parse and re-sign its JWT. Entries live at most
	// cacheTTL and never past the token's expiry, and one whose token id
	// is revoked is never served.
	mu       sync.Mutex
	verified map[cacheKey]cacheEntry

	// The token ledger, once Load has run (tokens != nil): the records
	// known, the ids revoked (kept apart from the records, so that a
	// lookup answered before a revocation cannot undo it), and ids the
	// store did not have, with when to ask again.
	tokens  Tokens
	known   map[string]store.Token
	revoked map[string]bool
	unknown map[string]time.Time
	// warned holds a hash of each token without an id already warned of.
	warned map[[32]byte]bool
	logger *slog.Logger
	// sessions are what credentials that can end hold open (hold.go), by
	// credential, for their revocation or expiry to end.
	sessions map[sessionKey]*session
}

type cacheKey struct{ token, role, name string }

type cacheEntry struct {
	p       Principal
	expires time.Time
}

const (
	cacheTTL  = time.Minute
	cacheSize = 4096
	// unknownTTL is how long a missing record is believed: a token created
	// in the meantime is recorded before it is handed out, so this only
	// delays a token whose record came from elsewhere (a restored backup).
	unknownTTL = 10 * time.Second
)

// New returns an authority signing with key (at least 32 bytes) and also
// accepting the shared secret when it is not empty.
func New(key []byte, sharedSecret string) (*Authority, error) {
	if len(key) < 32 {
		return nil, errors.New("gateway signing key must be at least 32 bytes")
	}
	return &Authority{key: key, secret: sharedSecret, now: time.Now, afterFunc: systemAfterFunc, verified: map[cacheKey]cacheEntry{},
		warned: map[[32]byte]bool{}, logger: slog.New(slog.DiscardHandler)}, nil
}

// SetLogger sets where the authority warns of tokens without an id.
func (a *Authority) SetLogger(l *slog.Logger) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.logger = l
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

// NewTokenID returns a random 128-bit token id, in lower-case base32.
func NewTokenID() string {
	b := make([]byte, 16)
	rand.Read(b)
	return strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b))
}

// Mint signs a token for role (and name, for a connector) valid for ttl
// (0: no expiry) with a new id, and returns the record the caller must
// keep (store.Store.CreateToken) before handing the token out: an
// authority with a ledger (Load) refuses it as unknown until then.
func (a *Authority) Mint(role, name string, ttl time.Duration, note string) (string, store.Token, error) {
	if err := checkIssue(role, name); err != nil {
		return "", store.Token{}, err
	}
	now := a.now()
	rec := store.Token{ID: NewTokenID(), Kind: store.TokenKind(role), Name: name, CreatedAt: now, Note: note}
	c := Claims{Role: role, RegisteredClaims: jwt.RegisteredClaims{ID: rec.ID, Subject: name, IssuedAt: jwt.NewNumericDate(now), Issuer: "uncaged-gateway"}}
	if ttl > 0 {
		exp := now.Add(ttl)
		c.ExpiresAt = jwt.NewNumericDate(exp)
		// The record says what the token says: JWT times are whole seconds.
		exp = c.ExpiresAt.Time
		rec.ExpiresAt = &exp
	}
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString(a.key)
	if err != nil {
		return "", store.Token{}, err
	}
	return tok, rec, nil
}

// Issue signs a token for role (and name, for a connector) valid for ttl
// (0: no expiry) without an id, as gateways did before tokens were
// recorded: such a token cannot be revoked except by rotating the key.
// Tests and in-process tools use it; tokens handed to people come from
// Mint and are recorded.
func (a *Authority) Issue(role, name string, ttl time.Duration) (string, error) {
	if err := checkIssue(role, name); err != nil {
		return "", err
	}
	now := a.now()
	c := Claims{Role: role, RegisteredClaims: jwt.RegisteredClaims{Subject: name, IssuedAt: jwt.NewNumericDate(now), Issuer: "uncaged-gateway"}}
	if ttl > 0 {
		c.ExpiresAt = jwt.NewNumericDate(now.Add(ttl))
	}
	return jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString(a.key)
}

// checkIssue checks a token's role and name before it is signed.
func checkIssue(role, name string) error {
	switch role {
	case RoleConnector:
		if name == "" {
			return errors.New("a connector token needs the connector's name")
		}
	case RoleDashboard:
		if name != "" {
			return errors.New("a dashboard token is not bound to a name")
		}
	default:
		return fmt.Errorf("unknown role %q", role)
	}
	return nil
}

// Verify checks a presented credential for role. For a connector, name is
// the name it wants: a token bound to another name is refused.
func (a *Authority) Verify(credential, role, name string) (Principal, error) {
	if credential == "" {
		return Principal{}, refuse(ReasonMissing, "missing credentials")
	}
	if a.secret != "" && subtle.ConstantTimeCompare([]byte(credential), []byte(a.secret)) == 1 {
		return Principal{Role: role, Shared: true}, nil
	}
	key := cacheKey{credential, role, name}
	now := a.now()
	a.mu.Lock()
	e, ok := a.verified[key]
	if ok && e.p.TokenID != "" && a.revoked[e.p.TokenID] {
		// Revoked since it was cached: never served again.
		delete(a.verified, key)
		ok = false
	}
	a.mu.Unlock()
	if ok && now.Before(e.expires) {
		return e.p, nil
	}
	p, exp, err := a.verify(credential, role, name)
	if err != nil {
		return p, err
	}
	if p, err = a.check(credential, p); err != nil {
		return Principal{}, err
	}
	expires := now.Add(cacheTTL)
	if !exp.IsZero() && exp.Before(expires) {
		expires = exp
	}
	a.mu.Lock()
	if len(a.verified) >= cacheSize {
		clear(a.verified)
	}
	// A revocation applied while this check ran must win over it.
	if p.TokenID != "" && a.revoked[p.TokenID] {
		a.mu.Unlock()
		return Principal{}, refuse(ReasonRevoked, "token revoked")
	}
	a.verified[key] = cacheEntry{p: p, expires: expires}
	a.mu.Unlock()
	return p, nil
}

// verify checks a JWT's signature and claims and returns its principal
// (TokenID set from the jti) and expiry (zero: none).
func (a *Authority) verify(credential, role, name string) (Principal, time.Time, error) {
	if r := a.malformed(credential); r != nil {
		return Principal{}, time.Time{}, r
	}
	var c Claims
	_, err := jwt.ParseWithClaims(credential, &c, func(t *jwt.Token) (any, error) { return a.key, nil },
		jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}), jwt.WithTimeFunc(a.now), jwt.WithIssuer("uncaged-gateway"))
	if err != nil {
		return Principal{}, time.Time{}, a.parseRefusal(err, &c)
	}
	if c.Role != role {
		switch {
		case c.Role == RoleConnector && role == RoleDashboard:
			return Principal{}, time.Time{}, refuse(ReasonWrongKind, "this is a connector token (for %q): log in with a dashboard token", c.Subject)
		case c.Role == RoleDashboard && role == RoleConnector:
			return Principal{}, time.Time{}, refuse(ReasonWrongKind, "this is a dashboard token: a connector needs a connector token (uncaged-gateway token create --connector NAME)")
		default:
			return Principal{}, time.Time{}, refuse(ReasonMalformed, "malformed token: its role is neither %q nor %q", RoleDashboard, RoleConnector)
		}
	}
	if role == RoleConnector && subtle.ConstantTimeCompare([]byte(c.Subject), []byte(name)) != 1 {
		return Principal{}, time.Time{}, refuse(ReasonWrongConnector, "this token is for connector %q, not %q", c.Subject, name)
	}
	var exp time.Time
	if c.ExpiresAt != nil {
		exp = c.ExpiresAt.Time
	}
	return Principal{Role: c.Role, Name: c.Subject, TokenID: c.ID, Expires: exp}, exp, nil
}

// parseRefusal says why the JWT library refused a token that has the
// shape of a gateway token (malformed passed it); c holds the claims it
// read.
func (a *Authority) parseRefusal(err error, c *Claims) *Refusal {
	switch {
	case errors.Is(err, jwt.ErrTokenExpired) && c.ExpiresAt != nil:
		return expiredRefusal(c.ExpiresAt.Time)
	case errors.Is(err, jwt.ErrTokenSignatureInvalid):
		return refuse(ReasonBadSignature, "token signed with another key: it is from another gateway, or this gateway's key has changed since")
	case errors.Is(err, jwt.ErrTokenNotValidYet), errors.Is(err, jwt.ErrTokenUsedBeforeIssued):
		return refuse(ReasonMalformed, "malformed token: not valid yet (is a clock wrong?)")
	case errors.Is(err, jwt.ErrTokenInvalidIssuer), errors.Is(err, jwt.ErrTokenRequiredClaimMissing):
		return refuse(ReasonMalformed, "malformed token: not issued by an uncaged gateway")
	}
	return refuse(ReasonMalformed, "malformed token: its claims do not read as a gateway token's")
}

// check applies the ledger to a validly signed token: a token with an id
// must be recorded and not revoked; one without is accepted with a
// warning. Without a ledger (no Load) every signed token passes.
func (a *Authority) check(credential string, p Principal) (Principal, error) {
	a.mu.Lock()
	if a.tokens == nil {
		a.mu.Unlock()
		return p, nil
	}
	if p.TokenID == "" {
		h := sha256.Sum256([]byte(credential))
		first := !a.warned[h]
		if first {
			if len(a.warned) >= cacheSize {
				clear(a.warned)
			}
			a.warned[h] = true
		}
		logger := a.logger
		a.mu.Unlock()
		if first {
			logger.Warn("token without an id accepted: it was issued before tokens were recorded and cannot be revoked except by rotating the key; issue a new one with `uncaged-gateway token create`",
				"role", p.Role, "connector", p.Name)
		}
		return p, nil
	}
	if a.revoked[p.TokenID] {
		a.mu.Unlock()
		return Principal{}, refuse(ReasonRevoked, "token revoked")
	}
	if rec, ok := a.known[p.TokenID]; ok {
		a.mu.Unlock()
		return withRecord(p, rec)
	}
	if until, ok := a.unknown[p.TokenID]; ok && a.now().Before(until) {
		a.mu.Unlock()
		return Principal{}, unknownToken()
	}
	tokens := a.tokens
	a.mu.Unlock()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rec, err := tokens.GetToken(ctx, p.TokenID)
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case errors.Is(err, store.ErrNotFound):
		if len(a.unknown) >= cacheSize {
			clear(a.unknown)
		}
		a.unknown[p.TokenID] = a.now().Add(unknownTTL)
		return Principal{}, unknownToken()
	case err != nil:
		return Principal{}, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	a.remember(rec)
	if a.revoked[rec.ID] {
		return Principal{}, refuse(ReasonRevoked, "token revoked")
	}
	return withRecord(p, rec)
}

func unknownToken() *Refusal {
	return refuse(ReasonUnknown, "unknown token: this gateway has no record of it (it may be from another gateway with the same key, or from before its database was replaced)")
}

// withRecord completes p with what the token's record says.
func withRecord(p Principal, rec store.Token) (Principal, error) {
	if rec.RevokedAt != nil {
		return Principal{}, refuse(ReasonRevoked, "token revoked")
	}
	p.Note = rec.Note
	return p, nil
}

// remember keeps a record (a.mu held).
func (a *Authority) remember(rec store.Token) {
	a.known[rec.ID] = rec
	delete(a.unknown, rec.ID)
	if rec.RevokedAt != nil {
		a.revoked[rec.ID] = true
	}
}

// Load gives the authority its ledger: every token record in tokens is
// read, and from then on a token with an id is accepted only if tokens
// has its record, unrevoked. Call it again to re-read everything (Apply
// does on a store.ChangeReload); revocations already applied are kept.
//
// If the records cannot be read, the ledger is still in force: every
// token with an id is then looked up on its first use, so a revoked one
// is never let in for want of the list.
func (a *Authority) Load(ctx context.Context, tokens Tokens) error {
	recs, err := tokens.ListTokens(ctx, store.TokenFilter{})
	if err != nil {
		a.mu.Lock()
		defer a.mu.Unlock()
		if a.tokens == nil {
			a.tokens, a.known, a.unknown = tokens, map[string]store.Token{}, map[string]time.Time{}
			if a.revoked == nil {
				a.revoked = map[string]bool{}
			}
		}
		return fmt.Errorf("auth: load tokens: %w", err)
	}
	known := make(map[string]store.Token, len(recs))
	for _, r := range recs {
		known[r.ID] = r
	}
	a.mu.Lock()
	a.tokens = tokens
	if a.revoked == nil {
		a.revoked = map[string]bool{}
	}
	a.known = known
	a.unknown = map[string]time.Time{}
	for _, r := range recs {
		if r.RevokedAt != nil {
			a.revoked[r.ID] = true
		}
	}
	a.dropRevokedLocked()
	ended := a.revokedHoldsLocked()
	a.mu.Unlock()
	endHolds(ended)
	return nil
}

// Apply brings the ledger up to date with one change from the store's
// Subscribe: a revocation takes effect before Apply returns (no cached
// verification of those tokens is served after), a reload re-reads
// everything. Registration changes are not the authority's.
func (a *Authority) Apply(ctx context.Context, c store.Change) error {
	switch c.Kind {
	case store.ChangeRevocation:
		a.Revoke(c.IDs...)
	case store.ChangeReload:
		a.mu.Lock()
		tokens := a.tokens
		a.mu.Unlock()
		if tokens != nil {
			return a.Load(ctx, tokens)
		}
	}
	return nil
}

// Revoke marks token ids revoked in memory (the store's revocation is
// the caller's), effective for every later Verify, and ends what they
// hold open (Hold) before it returns.
func (a *Authority) Revoke(ids ...string) {
	a.mu.Lock()
	if a.revoked == nil {
		a.revoked = map[string]bool{}
	}
	for _, id := range ids {
		a.revoked[id] = true
	}
	a.dropRevokedLocked()
	ended := a.revokedHoldsLocked()
	a.mu.Unlock()
	endHolds(ended)
}

// dropRevokedLocked empties the verification cache of revoked tokens
// (a.mu held). Verify checks again on every hit; this frees the memory.
func (a *Authority) dropRevokedLocked() {
	for k, e := range a.verified {
		if e.p.TokenID != "" && a.revoked[e.p.TokenID] {
			delete(a.verified, k)
		}
	}
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
	if tok, ok := BearerToken(r.Header.Get("Authorization")); ok {
		return tok, FromHeader
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

// BearerToken reads the token of an Authorization header of the Bearer
// scheme, which is case-insensitive as every HTTP authentication scheme
// is (RFC 9110, 11.1): "Bearer", "bearer" and "BEARER" alike, then spaces
// or tabs, then the token. ok is false for another scheme or no header;
// a Bearer header without a token is ok with an empty token, which
// Verify refuses as missing.
func BearerToken(header string) (token string, ok bool) {
	header = strings.Trim(header, " \t")
	scheme, rest := header, ""
	if i := strings.IndexAny(header, " \t"); i >= 0 {
		scheme, rest = header[:i], header[i:]
	}
	if !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	return strings.Trim(rest, " \t"), true
}

// Status maps a Verify error to its HTTP status: 403 for a good token of
// the wrong kind or name, 503 when the store could not be read, else 401.
func Status(err error) int {
	switch {
	case errors.Is(err, ErrWrongRole) || errors.Is(err, ErrWrongName):
		return http.StatusForbidden
	case errors.Is(err, ErrUnavailable):
		return http.StatusServiceUnavailable
	}
	return http.StatusUnauthorized
}

// ReasonOf is the Reason of err's Refusal, or "" when err is none.
func ReasonOf(err error) string {
	var r *Refusal
	if errors.As(err, &r) {
		return r.Reason
	}
	return ""
}
