package link

import (
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/uncaged/workflow/gateway/auth"
	"github.com/uncaged/workflow/shared/tunnel"
)

// repeatedRun is the first run of n words that msg says twice ("" when
// none): a hint that restates the gateway's own words.
func repeatedRun(msg string, n int) string {
	words := strings.FieldsFunc(strings.ToLower(msg), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '-'
	})
	seen := map[string]bool{}
	for i := 0; i+n <= len(words); i++ {
		run := strings.Join(words[i:i+n], " ")
		if seen[run] {
			return run
		}
		seen[run] = true
	}
	return ""
}

// Every refusal of a credential, as the gateway words it and as older
// gateways and proxies did, is explained without saying anything twice,
// whatever credential connect held: the hint adds only what the gateway's
// own message leaves out, and still names the way forward.
func TestCredentialRefusalsNeverRepeatThemselves(t *testing.T) {
	t.Parallel()
	key := []byte("0123456789abcdef0123456789abcdef")
	a, err := auth.New(key, "")
	if err != nil {
		t.Fatal(err)
	}
	other, err := auth.New([]byte("fedcba9876543210fedcba9876543210"), "")
	if err != nil {
		t.Fatal(err)
	}
	mint := func(a *auth.Authority, role, name string) string {
		tok, err := a.Issue(role, name, 0)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	expired, err := a.Issue(auth.RoleConnector, "laptop", time.Nanosecond)
	if err != nil {
		t.Fatal(err)
	}
	credentials := map[string]string{
		"a token for laptop":        mint(a, auth.RoleConnector, "laptop"),
		"another connector's token": mint(a, auth.RoleConnector, "desk"),
		"a dashboard token":         mint(a, auth.RoleDashboard, ""),
		"another gateway's token":   mint(other, auth.RoleConnector, "laptop"),
		"an expired token":          expired,
		"a shared secret":           "correct horse battery staple",
		"a cut token":               strings.SplitN(mint(a, auth.RoleConnector, "laptop"), ".", 2)[0],
		"three parts of nothing":    "a.b.c",
	}
	// What the gateway answers now (its own Verify), and what older
	// gateways answered.
	type refusal struct {
		status int
		body   string
	}
	var refusals []refusal
	for _, cred := range credentials {
		_, err := a.Verify(cred, auth.RoleConnector, "laptop")
		if r, ok := err.(*auth.Refusal); ok {
			refusals = append(refusals, refusal{403, fmt.Sprintf(`{"error":%q,"reason":%q}`, r.Message, r.Reason)})
		}
	}
	if len(refusals) < 5 {
		t.Fatalf("only %d refusals from the gateway's Verify", len(refusals))
	}
	refusals = append(refusals,
		refusal{401, `{"error":"token revoked","reason":"revoked"}`},
		refusal{401, `{"error":"unknown token: this gateway has no record of it","reason":"unknown"}`},
		refusal{401, `{"error":"invalid or expired token"}`},
		refusal{403, `{"error":"token not valid for this use"}`},
		refusal{403, `{"error":"token is for another connector"}`},
		refusal{401, `Unauthorized`},
	)
	for what, cred := range credentials {
		x := explainer{gateway: "https://gw.example.com", name: "laptop", token: cred}
		for _, r := range refusals {
			_, perm := x.rejected(&tunnel.RejectedError{Status: r.status, ContentType: "application/json", Message: r.body})
			if perm == nil || perm.Kind != KindCredential {
				t.Fatalf("%s, %s: %v", what, r.body, perm)
			}
			if run := repeatedRun(perm.Message, 4); run != "" {
				t.Errorf("%s, %s: says %q twice: %s", what, r.body, run, perm.Message)
			}
			if !strings.Contains(perm.Message, "token create --connector") && !strings.Contains(perm.Message, "--name ") {
				t.Errorf("%s, %s: no way forward: %s", what, r.body, perm.Message)
			}
		}
	}
}
