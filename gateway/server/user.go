package server

import (
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/uncaged/workflow/gateway/auth"
	"github.com/uncaged/workflow/shared/tunnel"
)

// Who made a proxied request (tunnel.UserHeader): the gateway tells the
// connector on every request it proxies, and a connector believes it on
// requests that come through its tunnel, and only there — it records who
// answered a waiting thread's question with it. So the gateway alone
// decides it: whatever a client sent under that name, in any spelling,
// is dropped first. In cluster mode the replica the request entered
// decides; the replica holding the tunnel keeps what came over the
// replica-authenticated hop, and strips it from anything else.

// userKey is where requireDashboard leaves, in the echo context, who the
// request's credential names (userOf).
const userKey = "gateway.user"

// UserSecret is who the shared secret names.
const UserSecret = "secret"

// userAnonymous names the holder of a dashboard token that has neither
// a note nor an id (issued before tokens had ids).
const userAnonymous = "dashboard token"

// maxUserBytes bounds the header's value: a name, and a header line.
const maxUserBytes = 256

// userOf is who p names: the token's note, else its id; UserSecret for
// the shared secret.
func userOf(p auth.Principal) string {
	if p.Shared {
		return UserSecret
	}
	if u := headerText(p.Note); u != "" {
		return u
	}
	if u := headerText(p.TokenID); u != "" {
		return u
	}
	return userAnonymous
}

// headerText makes s a header value that every HTTP/2 transport sends: a
// note is free text, and a control character in it would fail the
// request. Such characters become spaces; the value is trimmed and
// bounded (at a rune's start).
func headerText(s string) string {
	clean := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == 0x7f {
			clean = false
			break
		}
	}
	if !clean {
		s = strings.Map(func(r rune) rune {
			if r < 0x20 || r == 0x7f {
				return ' '
			}
			return r
		}, s)
	}
	s = strings.TrimSpace(strings.ToValidUTF8(s, "\uFFFD"))
	if len(s) > maxUserBytes {
		end := maxUserBytes
		for end > 0 && !utf8.RuneStart(s[end]) {
			end--
		}
		s = strings.TrimSpace(s[:end])
	}
	return s
}

// setUser makes h name user as who made the request, and nobody else:
// every value under tunnel.UserHeader is dropped, whatever the spelling
// of its name — an incoming header's names are canonical, but a map
// built otherwise need not be, and some servers read '_' as '-'. No user
// (a request no credential named) leaves none.
func setUser(h http.Header, user string) {
	for k := range h {
		if tunnel.IsUserHeader(k) {
			delete(h, k)
		}
	}
	if user != "" {
		h[tunnel.UserHeader] = []string{user}
	}
}

// proxiedUser sets, on a request about to be proxied, who made it: the
// holder of the credential requireDashboard checked. A request another
// replica forwarded (hopped, its hop verified) keeps what that replica
// set.
func proxiedUser(c echo.Context, hopped bool) {
	if hopped {
		return
	}
	user, _ := c.Get(userKey).(string)
	setUser(c.Request().Header, user)
}
