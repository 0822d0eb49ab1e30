package presence

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"regexp"
	"strings"
)

// Instances. A storage root is one instance of a connector. It proves
// itself with its instance key, a secret made once per root
// (tunnel.InstanceKeyHeader); an older connector only names itself with
// its instance id (tunnel.InstanceHeader), which is no secret: it used to
// be shown in the 409 body, the endpoints list and the cluster's presence
// messages, and anyone holding the name's credential could copy it into
// another root.
//
// The gateway keeps neither. It knows an instance by a fingerprint, a
// truncated SHA-256 of the key ("key:…") or, for an older connector, of
// the id ("id:…"), and that is all it shows or sends to other replicas.
// Knowing a fingerprint does not let anyone make a connection with it:
// that takes the key (or the id) behind it.
//
// Who is the same instance as the holder of a name (Differs):
//
//   - a holder that proved a key: only a connection with the same key.
//     An id, however copied, and a connection with no instance at all are
//     other instances;
//   - a holder that gave only an id (an older connector): a connection
//     with the same id, or one with no instance (as before instances);
//     a key is another instance, since an id cannot be matched to a key;
//   - a holder with no instance (an original client): anyone.
//
// A copied key is the same instance by definition: two roots holding
// one key replace each other at every reconnection, which the audit log
// records (coalesced).

// Fingerprint prefixes.
const (
	keyFingerprint = "key:"
	idFingerprint  = "id:"
)

// fingerprintBytes is how much of the hash a fingerprint keeps: 128 bits,
// beyond any search for a second key with the same fingerprint.
const fingerprintBytes = 16

// instanceIDRule is what an instance id may be: short, and safe in a
// header.
var instanceIDRule = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// instanceKeyRule is what an instance key may be: long enough to be a
// secret if it is random (a connector makes 52 base32 characters).
var instanceKeyRule = regexp.MustCompile(`^[A-Za-z0-9_-]{32,128}$`)

// fingerprintRule is what a fingerprint looks like.
var fingerprintRule = regexp.MustCompile(`^(key|id):[0-9a-f]{32}$`)

// Refusals of InstanceOf.
var (
	ErrBadInstanceID  = errors.New("invalid instance id: 1 to 64 letters, digits, '-' and '_'")
	ErrBadInstanceKey = errors.New("invalid instance key: 32 to 128 letters, digits, '-' and '_'")
)

// InstanceOf is the fingerprint of the instance a connection names with
// its instance id and key (either may be empty): the key's when there is
// one, else the id's, else "" (no instance). A malformed id or key is an
// error, never taken for none.
func InstanceOf(id, key string) (string, error) {
	if id != "" && !instanceIDRule.MatchString(id) {
		return "", ErrBadInstanceID
	}
	switch {
	case key != "":
		if !instanceKeyRule.MatchString(key) {
			return "", ErrBadInstanceKey
		}
		return fingerprint(keyFingerprint, key), nil
	case id != "":
		return fingerprint(idFingerprint, id), nil
	}
	return "", nil
}

func fingerprint(kind, secret string) string {
	sum := sha256.Sum256([]byte("uncaged-workflow instance " + kind + secret))
	return kind + hex.EncodeToString(sum[:fingerprintBytes])
}

// ValidFingerprint reports whether s is a fingerprint InstanceOf makes.
func ValidFingerprint(s string) bool { return fingerprintRule.MatchString(s) }

// Proven says whether the fingerprint is of a key, not of a bare id.
func Proven(fingerprint string) bool { return strings.HasPrefix(fingerprint, keyFingerprint) }

// Differs says whether a connection of instance newer is another instance
// than the holder's (held), both fingerprints: see the rules above.
func Differs(held, newer string) bool {
	switch {
	case held == "":
		return false
	case Proven(held):
		return newer != held
	default:
		return newer != "" && newer != held
	}
}
