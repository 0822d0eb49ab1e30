package auth

import (
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func newAuthority(t *testing.T, secret string) *Authority {
	a, err := New([]byte(strings.Repeat("k", 32)), secret)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestIssueAndVerify(t *testing.T) {
	t.Parallel()
	a := newAuthority(t, "")
	tok, err := a.Issue(RoleConnector, "laptop", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	p, err := a.Verify(tok, RoleConnector, "laptop")
	if err != nil || p.Name != "laptop" || p.Role != RoleConnector {
		t.Fatalf("verify = %+v, %v", p, err)
	}
	if _, err := a.Verify(tok, RoleConnector, "ci-box"); !errors.Is(err, ErrWrongName) || Status(err) != 403 {
		t.Fatalf("other name: %v", err)
	}
	if _, err := a.Verify(tok, RoleDashboard, ""); !errors.Is(err, ErrWrongRole) || Status(err) != 403 {
		t.Fatalf("wrong role: %v", err)
	}
	dash, _ := a.Issue(RoleDashboard, "", 0)
	if _, err := a.Verify(dash, RoleDashboard, ""); err != nil {
		t.Fatal(err)
	}
	// Expired, tampered, foreign-key and garbage tokens are all 401.
	a.now = func() time.Time { return time.Now().Add(-2 * time.Hour) }
	old, _ := a.Issue(RoleDashboard, "", time.Hour)
	a.now = time.Now
	other, _ := New([]byte(strings.Repeat("x", 32)), "")
	foreign, _ := other.Issue(RoleDashboard, "", time.Hour)
	for name, bad := range map[string]string{"expired": old, "tampered": dash[:len(dash)-2] + "xx", "foreign": foreign, "garbage": "not.a.jwt", "none-alg": "eyJhbGciOiJub25lIn0.eyJyb2xlIjoiZGFzaGJvYXJkIn0."} {
		if _, err := a.Verify(bad, RoleDashboard, ""); !errors.Is(err, ErrInvalid) || Status(err) != 401 {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := a.Verify("", RoleDashboard, ""); !errors.Is(err, ErrNoCredentials) {
		t.Fatalf("empty: %v", err)
	}
	if _, err := a.Issue(RoleConnector, "", 0); err == nil {
		t.Fatal("connector token without a name")
	}
	if _, err := a.Issue("admin", "", 0); err == nil {
		t.Fatal("unknown role issued")
	}
	if _, err := New([]byte("short"), ""); err == nil {
		t.Fatal("short key accepted")
	}
}

func TestSharedSecret(t *testing.T) {
	t.Parallel()
	a := newAuthority(t, "s3cret")
	p, err := a.Verify("s3cret", RoleDashboard, "")
	if err != nil || !p.Shared {
		t.Fatalf("shared secret: %+v %v", p, err)
	}
	if _, err := a.Verify("s3cre", RoleDashboard, ""); err == nil {
		t.Fatal("prefix of the secret accepted")
	}
	if _, err := newAuthority(t, "").Verify("", RoleDashboard, ""); err == nil {
		t.Fatal("empty secret matched")
	}
}

func TestCredentialSources(t *testing.T) {
	t.Parallel()
	r := httptest.NewRequest("GET", "/x?key=q", nil)
	if Credential(r) != "q" {
		t.Fatal("?key= not read")
	}
	r = httptest.NewRequest("GET", "/ws/connect?name=a&secret=s", nil)
	if Credential(r) != "s" {
		t.Fatal("?secret= not read")
	}
	r.Header.Set("Cookie", CookieName+"=c")
	if Credential(r) != "c" {
		t.Fatal("cookie not preferred over the query")
	}
	r.Header.Set("Authorization", "Bearer b")
	if Credential(r) != "b" {
		t.Fatal("bearer not preferred")
	}
}

// Where a credential came from decides whether its request needs an
// origin check: only the cookie does (the browser adds it by itself).
func TestCredentialFromSaysWhere(t *testing.T) {
	t.Parallel()
	r := httptest.NewRequest("POST", "/x?key=q&secret=s", nil)
	for _, c := range []struct {
		set     func()
		want    string
		wantSrc Source
	}{
		{func() {}, "q", FromQuery},
		{func() { r.Header.Set("Cookie", CookieName+"=c") }, "c", FromCookie},
		// Another scheme in Authorization leaves the cookie in charge.
		{func() { r.Header.Set("Authorization", "Basic dTpw") }, "c", FromCookie},
		{func() { r.Header.Set("Authorization", "Bearer b") }, "b", FromHeader},
	} {
		c.set()
		if got, src := CredentialFrom(r); got != c.want || src != c.wantSrc {
			t.Errorf("got %q from %d, want %q from %d", got, src, c.want, c.wantSrc)
		}
	}
	if got, src := CredentialFrom(httptest.NewRequest("GET", "/x", nil)); got != "" || src != FromNone {
		t.Errorf("nothing: %q %d", got, src)
	}
}

func TestLoadKey(t *testing.T) {
	t.Parallel()
	env := map[string]string{"UNCAGED_GATEWAY_KEY": GenerateKey()}
	k, err := LoadKey("", func(s string) string { return env[s] })
	if err != nil || len(k) != 32 {
		t.Fatalf("base64 key: %d %v", len(k), err)
	}
	if _, err := LoadKey("", func(string) string { return "" }); err == nil {
		t.Fatal("no key accepted")
	}
	if _, err := LoadKey("/nonexistent", nil); err == nil {
		t.Fatal("missing key file accepted")
	}
}

func FuzzVerify(f *testing.F) {
	a, _ := New([]byte(strings.Repeat("k", 32)), "secret")
	good, _ := a.Issue(RoleConnector, "n", time.Hour)
	f.Add(good, "n")
	f.Add("secret", "x")
	f.Add("a.b.c", "")
	f.Fuzz(func(t *testing.T, tok, name string) {
		p, err := a.Verify(tok, RoleConnector, name)
		if err == nil && !p.Shared && p.Name != name {
			t.Fatalf("token for %q accepted for %q", p.Name, name)
		}
	})
}

func TestCachedTokenStillExpires(t *testing.T) {
	t.Parallel()
	a := newAuthority(t, "")
	now := time.Now()
	a.now = func() time.Time { return now }
	tok, _ := a.Issue(RoleDashboard, "", 10*time.Second)
	if _, err := a.Verify(tok, RoleDashboard, ""); err != nil {
		t.Fatal(err)
	}
	// A cached pass is per role and name, not per token alone.
	if _, err := a.Verify(tok, RoleConnector, "x"); !errors.Is(err, ErrWrongRole) {
		t.Fatalf("cache leaked across roles: %v", err)
	}
	now = now.Add(11 * time.Second)
	if _, err := a.Verify(tok, RoleDashboard, ""); !errors.Is(err, ErrInvalid) {
		t.Fatalf("expired token served from the cache: %v", err)
	}
}

// The Bearer scheme is read in any case, with any run of spaces or tabs
// before the token; another scheme is not a bearer token, and a Bearer
// header without a token presents nothing.
func TestBearerScheme(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		header, token string
		bearer        bool
	}{
		{"Bearer tok", "tok", true},
		{"bearer tok", "tok", true},
		{"BEARER tok", "tok", true},
		{"bEaReR tok", "tok", true},
		{"Bearer  tok", "tok", true},
		{"Bearer\ttok", "tok", true},
		{"Bearer \t tok \t", "tok", true},
		{" Bearer tok", "tok", true},
		{"Bearer", "", true},
		{"Bearer ", "", true},
		{"bearer\t", "", true},
		{"Bearertok", "", false},
		{"Basic dTpw", "", false},
		{"basic dTpw", "", false},
		{"Token tok", "", false},
		{"tok", "", false},
		{"", "", false},
	} {
		tok, ok := BearerToken(c.header)
		if tok != c.token || ok != c.bearer {
			t.Errorf("BearerToken(%q) = %q, %v; want %q, %v", c.header, tok, ok, c.token, c.bearer)
		}
		// What a request presents follows: a bearer header wins over the
		// cookie, another scheme leaves the cookie in charge.
		r := httptest.NewRequest("GET", "/x", nil)
		r.Header.Set("Authorization", c.header)
		r.Header.Set("Cookie", CookieName+"=from-cookie")
		got, src := CredentialFrom(r)
		switch {
		case c.bearer && (got != c.token || src != FromHeader):
			t.Errorf("%q with a cookie: %q from %d, want the header's %q", c.header, got, src, c.token)
		case !c.bearer && (got != "from-cookie" || src != FromCookie):
			t.Errorf("%q with a cookie: %q from %d, want the cookie", c.header, got, src)
		}
	}
	// A lower-case scheme authenticates as the canonical one does.
	a := newAuthority(t, "")
	tok, _ := a.Issue(RoleDashboard, "", time.Hour)
	for _, scheme := range []string{"Bearer ", "bearer ", "BEARER\t"} {
		r := httptest.NewRequest("GET", "/x", nil)
		r.Header.Set("Authorization", scheme+tok)
		if _, err := a.Verify(Credential(r), RoleDashboard, ""); err != nil {
			t.Errorf("%q: %v", scheme, err)
		}
	}
}
