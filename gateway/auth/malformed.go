package auth

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// maxTokenLen bounds a credential that is read as a token: the gateway's
// own are a few hundred bytes, so anything past this is not one (a file,
// a log pasted whole) and is not decoded at all.
const maxTokenLen = 8 << 10

// claimTypes are the JSON types the claims of a gateway token have; a
// token whose claim has another type was not made by a gateway.
var claimTypes = map[string][]string{
	"role": {"string"}, "sub": {"string"}, "jti": {"string"}, "iss": {"string"},
	"exp": {"number"}, "iat": {"number"}, "nbf": {"number"},
	"aud": {"string", "array"},
}

// malformed says what is wrong with the shape of a credential that is not
// the shared secret, or nil when it has the shape of a gateway token (an
// HS256 JWT with claims of the right types), whose signature and claims
// are then for the JWT library to check. Each answer names the first
// thing wrong, so that the person holding the credential knows whether
// they pasted half of it, something else, or a token of another system.
// It never quotes the credential.
func (a *Authority) malformed(credential string) *Refusal {
	if n := len(credential); n > maxTokenLen {
		return a.notAToken("it is %d bytes long, and a gateway token is a few hundred", n)
	}
	parts := strings.Split(credential, ".")
	if len(parts) != 3 {
		return a.notAToken("a token has three parts separated by dots, and this has %d", len(parts))
	}
	header, err := segment(parts[0])
	if err != nil {
		return refuse(ReasonMalformed, "malformed token: its header (the first part) is not base64url: %v", err)
	}
	var h map[string]json.RawMessage
	if err := json.Unmarshal(header, &h); err != nil || h == nil {
		return refuse(ReasonMalformed, "malformed token: its header (the first part) is not a JSON object")
	}
	var alg string
	if raw, ok := h["alg"]; !ok || json.Unmarshal(raw, &alg) != nil || alg == "" {
		return refuse(ReasonMalformed, "malformed token: its header names no signing algorithm (alg)")
	}
	if alg != "HS256" {
		return refuse(ReasonMalformed, "malformed token: not signed the way the gateway signs (HS256): its header says alg %s", printableAlg(alg))
	}
	payload, err := segment(parts[1])
	if err != nil {
		return refuse(ReasonMalformed, "malformed token: its payload (the second part) is not base64url: %v", err)
	}
	var claims map[string]json.RawMessage
	if err := json.Unmarshal(payload, &claims); err != nil || claims == nil {
		return refuse(ReasonMalformed, "malformed token: its payload (the second part) is not a JSON object")
	}
	for _, name := range []string{"role", "sub", "jti", "iss", "exp", "iat", "nbf", "aud"} {
		raw, ok := claims[name]
		if !ok {
			continue
		}
		if got, want := jsonType(raw), claimTypes[name]; !slices.Contains(want, got) {
			return refuse(ReasonMalformed, "malformed token: its claim %q is a JSON %s, where a gateway token has a %s", name, got, strings.Join(want, " or "))
		}
	}
	if _, ok := claims["role"]; !ok {
		return refuse(ReasonMalformed, "malformed token: it has no role claim, so it is not a dashboard or connector token of a gateway")
	}
	if parts[2] == "" {
		return refuse(ReasonMalformed, "malformed token: it has no signature (the third part is empty)")
	}
	if _, err := segment(parts[2]); err != nil {
		return refuse(ReasonMalformed, "malformed token: its signature (the third part) is not base64url: %v", err)
	}
	return nil
}

// notAToken refuses a credential that is not even shaped like a token,
// saying why; with a shared secret configured it may have been meant as
// that, so the message says it is neither.
func (a *Authority) notAToken(format string, args ...any) *Refusal {
	why := fmt.Sprintf(format, args...)
	if a.secret != "" {
		return refuse(ReasonMalformed, "malformed token: neither a token of this gateway nor the shared secret (%s)", why)
	}
	return refuse(ReasonMalformed, "malformed token: not a token of this gateway (%s; paste the whole token)", why)
}

// segment decodes one part of a JWT, unpadded base64url as RFC 7515 has
// it.
func segment(s string) ([]byte, error) {
	if s == "" {
		return nil, fmt.Errorf("it is empty")
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		if ce, ok := err.(base64.CorruptInputError); ok {
			return nil, fmt.Errorf("bad character or length at byte %d", int64(ce))
		}
		return nil, err
	}
	return b, nil
}

// jsonType names the JSON type of a claim's value (valid JSON: the
// payload was decoded).
func jsonType(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	switch raw[0] {
	case '"':
		return "string"
	case '{':
		return "object"
	case '[':
		return "array"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	}
	return "number"
}

// printableAlg is an alg value fit for a message: the header is the
// sender's, so anything but a short name of letters and digits is not
// repeated.
func printableAlg(alg string) string {
	if len(alg) > 16 {
		return "(a long value)"
	}
	for _, r := range alg {
		if !(r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9') {
			return "(an unusual value)"
		}
	}
	return alg
}
