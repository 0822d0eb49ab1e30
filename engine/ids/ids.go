// Package ids holds the identifiers of the store: content hashes (XXH64 in
// Crockford Base32, as the original TypeScript engine writes them) and thread
// ids (ULIDs).
package ids

import (
	"crypto/rand"
	"encoding/base32"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/oklog/ulid/v2"
)

// Alphabet is Crockford's Base32 alphabet (no I, L, O, U).
const Alphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

// HashLen is the length of an encoded content hash: 64 bits padded to 65 and
// written as 13 quintets.
const HashLen = 13

// ThreadIDLen is the length of a thread id: 128 bits as 26 quintets.
const ThreadIDLen = 26

// crockford encodes bytes as Crockford Base32 without padding. For 8 bytes the
// zero padding bits land at the least significant end, which is exactly what
// the original's encodeUint64AsCrockford does.
var crockford = base32.NewEncoding(Alphabet).WithPadding(base32.NoPadding)

// HashBytes returns the content hash of data: XXH64 with seed 0, big-endian,
// Crockford Base32.
func HashBytes(data []byte) string {
	return EncodeUint64(xxhash.Sum64(data))
}

// HashString returns the content hash of the UTF-8 bytes of s.
func HashString(s string) string {
	return EncodeUint64(xxhash.Sum64String(s))
}

// EncodeUint64 writes v as 13 Crockford characters, most significant first.
func EncodeUint64(v uint64) string {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], v)
	return crockford.EncodeToString(b[:])
}

// DecodeUint64 is the inverse of EncodeUint64. It is case-insensitive and
// rejects strings of the wrong length, characters outside the alphabet and a
// non-zero padding bit (a string no hash encodes to).
func DecodeUint64(s string) (uint64, error) {
	if len(s) != HashLen {
		return 0, fmt.Errorf("encoded length does not match bitLength: want %d characters, got %d", HashLen, len(s))
	}
	up, err := canonicalCrockford(s)
	if err != nil {
		return 0, err
	}
	if strings.IndexByte(Alphabet, up[HashLen-1])%2 != 0 {
		return 0, fmt.Errorf("not a canonical 64-bit encoding: %q has its padding bit set", s)
	}
	b, err := crockford.DecodeString(up)
	if err != nil {
		return 0, fmt.Errorf("invalid Crockford Base32 %q: %w", s, err)
	}
	return binary.BigEndian.Uint64(b), nil
}

// ErrInvalidHash is wrapped by every ParseHash error.
var ErrInvalidHash = errors.New("invalid hash")

// ParseHash validates a content hash given by a user or read from a file and
// returns it in canonical (upper-case) form. It accepts any 13 Crockford
// characters, because the original's fixtures use hand-written hashes whose
// last character is odd; what it guarantees is that the result is safe to use
// as a file name.
func ParseHash(s string) (string, error) {
	if s == "" {
		return "", fmt.Errorf("%w: empty", ErrInvalidHash)
	}
	if len(s) != HashLen {
		return "", fmt.Errorf("%w %q: want %d Crockford Base32 characters, got %d", ErrInvalidHash, clip(s), HashLen, len(s))
	}
	up, err := canonicalCrockford(s)
	if err != nil {
		return "", fmt.Errorf("%w %q: %w", ErrInvalidHash, clip(s), err)
	}
	return up, nil
}

// IsHash reports whether s is already a canonical hash (13 upper-case
// Crockford characters). It does not allocate, for scans over large stores.
func IsHash(s string) bool {
	if len(s) != HashLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isCrockfordUpper(s[i]) {
			return false
		}
	}
	return true
}

// ParseThreadID validates a thread id and returns it upper-cased. Any 26
// Crockford characters are accepted: the original's ids (which start "06…" in
// 2026 because its encoding pads at the low end) are not standard ULIDs.
func ParseThreadID(s string) (string, error) {
	if len(s) != ThreadIDLen {
		return "", fmt.Errorf("invalid thread id %q: want %d Crockford Base32 characters, got %d", clip(s), ThreadIDLen, len(s))
	}
	up, err := canonicalCrockford(s)
	if err != nil {
		return "", fmt.Errorf("invalid thread id %q: %w", clip(s), err)
	}
	return up, nil
}

var (
	entropyMu sync.Mutex
	entropy   = ulid.Monotonic(rand.Reader, 0)
)

// NewThreadID returns a new ULID for a thread started at t. Ids made in one
// process are strictly increasing, even within one millisecond.
func NewThreadID(t time.Time) string {
	entropyMu.Lock()
	defer entropyMu.Unlock()
	return ulid.MustNew(ulid.Timestamp(t), entropy).String()
}

func canonicalCrockford(s string) (string, error) {
	b := []byte(s)
	for i, c := range b {
		if c >= 'a' && c <= 'z' {
			c -= 'a' - 'A'
			b[i] = c
		}
		if !isCrockfordUpper(c) {
			return "", fmt.Errorf("invalid Crockford Base32 character: %q", rune(s[i]))
		}
	}
	return string(b), nil
}

var crockfordTable = func() (t [256]bool) {
	for i := 0; i < len(Alphabet); i++ {
		t[Alphabet[i]] = true
	}
	return t
}()

func isCrockfordUpper(c byte) bool { return crockfordTable[c] }

// clip keeps error messages readable when someone passes a whole file.
func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

// ThreadIDTime returns when a thread id was made. Two encodings are in use:
// standard ULIDs (this implementation: 48-bit milliseconds in the first 10
// characters) and the original's, which pads at the low end so the
// milliseconds sit two bits further left. An id is read both ways and the
// reading that falls in a plausible range wins; false when neither does.
func ThreadIDTime(id string) (time.Time, bool) {
	up, err := ParseThreadID(id)
	if err != nil {
		return time.Time{}, false
	}
	// 26 quintets = 130 bits; the top 50 bits hold the time either way.
	var top uint64
	for i := 0; i < 10; i++ {
		top = top<<5 | uint64(strings.IndexByte(Alphabet, up[i]))
	}
	plausible := func(ms uint64) bool {
		t := time.UnixMilli(int64(ms))
		return t.Year() >= 2015 && t.Year() < 2100
	}
	if ms := top & (1<<48 - 1); top>>48 == 0 && plausible(ms) { // standard: 2 pad bits lead
		return time.UnixMilli(int64(ms)), true
	}
	if ms := top >> 2; plausible(ms) { // original: 2 pad bits trail
		return time.UnixMilli(int64(ms)), true
	}
	return time.Time{}, false
}
