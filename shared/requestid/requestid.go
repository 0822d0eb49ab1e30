// Package requestid is the request id the gateway and the connector share:
// the gateway assigns one to every request (or keeps a sane one the client
// sent), forwards it to the connector in the X-Request-Id header, and both
// log it, so one request can be followed across the two processes.
// Middleware is the echo middleware both use to do that.
package requestid

import (
	"crypto/rand"
	"encoding/hex"
)

// Header carries the id on requests and responses.
const Header = "X-Request-Id"

// MaxLen is the longest id accepted from a client.
const MaxLen = 64

// Valid says whether id may be kept as it came: 1 to MaxLen characters of
// [A-Za-z0-9._-]. Anything else (empty, too long, spaces, quotes, control
// characters) could forge or break a log line, so it is replaced.
func Valid(id string) bool {
	if id == "" || len(id) > MaxLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}

// New returns a fresh random id: 32 hex digits.
func New() string {
	var b [16]byte
	rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b[:])
}

// From returns incoming when it is Valid, else a New id.
func From(incoming string) string {
	if Valid(incoming) {
		return incoming
	}
	return New()
}
