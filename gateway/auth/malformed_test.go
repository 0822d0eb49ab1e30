package auth

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"strings"
	"testing"
	"time"
)

// b64 is one JWT part.
func b64(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }

// signedWith makes a JWT of header and payload signed with key (HS256),
// whatever they say: a token of the right key but the wrong shape.
func signedWith(key []byte, header, payload string) string {
	text := b64(header) + "." + b64(payload)
	m := hmac.New(sha256.New, key)
	m.Write([]byte(text))
	return text + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// Every kind of malformed token is refused with a message naming what is
// wrong with it, never quoting it; only a token whose header names
// another algorithm than HS256 is told it is not signed the way the
// gateway signs.
func TestMalformedTokensSayWhatIsWrong(t *testing.T) {
	t.Parallel()
	key := []byte(strings.Repeat("k", 32))
	a, _ := New(key, "")
	withSecret, _ := New(key, "the-shared-secret")
	good, _ := a.Issue(RoleDashboard, "", time.Hour)
	parts := strings.Split(good, ".")
	hs256 := `{"alg":"HS256","typ":"JWT"}`
	claims := func(extra string) string {
		return `{"role":"dashboard","iss":"uncaged-gateway","iat":1700000000` + extra + `}`
	}
	unsigned := func(header, payload string) string { return b64(header) + "." + b64(payload) + "." + parts[2] }
	other, _ := New([]byte(strings.Repeat("x", 32)), "")
	foreign, _ := other.Issue(RoleDashboard, "", time.Hour)

	for _, c := range []struct {
		what, cred string
		a          *Authority
		reason     string
		says       string
	}{
		{"one part", "abcdef", a, ReasonMalformed, "three parts separated by dots, and this has 1"},
		{"two parts", parts[0] + "." + parts[1], a, ReasonMalformed, "this has 2"},
		{"four parts", good + ".extra", a, ReasonMalformed, "this has 4"},
		{"one part, with a shared secret", "not-the-secret", withSecret, ReasonMalformed, "neither a token of this gateway nor the shared secret"},
		{"huge", strings.Repeat("a", 20000) + "." + parts[1] + "." + parts[2], a, ReasonMalformed, "bytes long"},
		{"empty parts", "..", a, ReasonMalformed, "header (the first part) is not base64url: it is empty"},
		{"header not base64", "!!!." + parts[1] + "." + parts[2], a, ReasonMalformed, "header (the first part) is not base64url"},
		{"header not JSON", unsigned("not json", claims("")), a, ReasonMalformed, "header (the first part) is not a JSON object"},
		{"header a JSON array", unsigned(`["HS256"]`, claims("")), a, ReasonMalformed, "header (the first part) is not a JSON object"},
		{"header without alg", unsigned(`{"typ":"JWT"}`, claims("")), a, ReasonMalformed, "names no signing algorithm"},
		{"numeric alg", unsigned(`{"alg":256}`, claims("")), a, ReasonMalformed, "names no signing algorithm"},
		{"alg none", unsigned(`{"alg":"none"}`, claims("")), a, ReasonMalformed, "not signed the way the gateway signs (HS256): its header says alg none"},
		{"alg RS256", unsigned(`{"alg":"RS256"}`, claims("")), a, ReasonMalformed, "not signed the way the gateway signs (HS256): its header says alg RS256"},
		{"alg HS512", unsigned(`{"alg":"HS512"}`, claims("")), a, ReasonMalformed, "(HS256): its header says alg HS512"},
		{"alg odd", unsigned(`{"alg":"<b>x</b>"}`, claims("")), a, ReasonMalformed, "(HS256): its header says alg (an unusual value)"},
		{"payload not base64", parts[0] + ".***." + parts[2], a, ReasonMalformed, "payload (the second part) is not base64url"},
		{"payload not JSON", unsigned(hs256, "{role:dashboard}"), a, ReasonMalformed, "payload (the second part) is not a JSON object"},
		{"payload a JSON string", unsigned(hs256, `"dashboard"`), a, ReasonMalformed, "payload (the second part) is not a JSON object"},
		{"role a number", signedWith(key, hs256, `{"role":7,"iss":"uncaged-gateway"}`), a, ReasonMalformed, `claim "role" is a JSON number, where a gateway token has a string`},
		{"exp a string", signedWith(key, hs256, claims(`,"exp":"tomorrow"`)), a, ReasonMalformed, `claim "exp" is a JSON string, where a gateway token has a number`},
		{"sub an object", unsigned(hs256, claims(`,"sub":{"name":"x"}`)), a, ReasonMalformed, `claim "sub" is a JSON object`},
		{"jti an array", unsigned(hs256, claims(`,"jti":["a"]`)), a, ReasonMalformed, `claim "jti" is a JSON array`},
		{"iat a boolean", unsigned(hs256, `{"role":"dashboard","iat":true}`), a, ReasonMalformed, `claim "iat" is a JSON boolean`},
		{"nbf null", unsigned(hs256, claims(`,"nbf":null`)), a, ReasonMalformed, `claim "nbf" is a JSON null`},
		{"aud a number", unsigned(hs256, claims(`,"aud":3`)), a, ReasonMalformed, `claim "aud" is a JSON number, where a gateway token has a string or array`},
		{"no role", unsigned(hs256, `{"sub":"x","iss":"uncaged-gateway"}`), a, ReasonMalformed, "it has no role claim"},
		{"no signature", parts[0] + "." + parts[1] + ".", a, ReasonMalformed, "it has no signature"},
		{"signature not base64", parts[0] + "." + parts[1] + ".%%%", a, ReasonMalformed, "signature (the third part) is not base64url"},
		{"another key", foreign, a, ReasonBadSignature, "signed with another key"},
		{"tampered payload", parts[0] + "." + b64(claims(`,"exp":4000000000`)) + "." + parts[2], a, ReasonBadSignature, "signed with another key"},
		{"signed, unknown role", signedWith(key, hs256, `{"role":"admin","iss":"uncaged-gateway"}`), a, ReasonMalformed, `its role is neither "dashboard" nor "connector"`},
		{"signed, no issuer", signedWith(key, hs256, `{"role":"dashboard"}`), a, ReasonMalformed, "not issued by an uncaged gateway"},
		{"signed, aud of numbers", signedWith(key, hs256, claims(`,"aud":[1,2]`)), a, ReasonMalformed, "its claims do not read as a gateway token's"},
	} {
		_, err := c.a.Verify(c.cred, RoleDashboard, "")
		r := wantRefusal(t, c.what, err, c.reason, 401)
		if !strings.Contains(r.Message, c.says) {
			t.Errorf("%s: %q does not say %q", c.what, r.Message, c.says)
		}
		if strings.HasPrefix(c.what, "alg ") != strings.Contains(r.Message, "HS256") {
			t.Errorf("%s: %q (only another alg is told about HS256)", c.what, r.Message)
		}
		if len(c.cred) > 3 && strings.Contains(r.Message, c.cred) {
			t.Errorf("%s: the message quotes the credential", c.what)
		}
	}
}

// Whatever bytes are presented, a refusal that speaks of HS256 is one for
// a token whose header names another algorithm.
func FuzzMalformedMessages(f *testing.F) {
	a, _ := New([]byte(strings.Repeat("k", 32)), "")
	good, _ := a.Issue(RoleDashboard, "", time.Hour)
	f.Add(good)
	f.Add(b64(`{"alg":"none"}`) + "." + b64(`{"role":1}`) + ".")
	f.Add("a.b.c")
	f.Fuzz(func(t *testing.T, cred string) {
		_, err := a.Verify(cred, RoleDashboard, "")
		if err == nil || !strings.Contains(err.Error(), "HS256") {
			return
		}
		header, herr := base64.RawURLEncoding.DecodeString(strings.Split(cred, ".")[0])
		if herr != nil || strings.Contains(string(header), `"HS256"`) {
			t.Fatalf("%q refused with %q", cred, err)
		}
	})
}
