package threads

import (
	"errors"
	"fmt"
	"strings"

	"github.com/uncaged/workflow/engine/storage"
)

// ErrInvalidRef is returned for a thread id that cannot name a thread.
var ErrInvalidRef = errors.New("invalid thread id")

// MaxRefLen is the longest thread reference looked up.
const MaxRefLen = 64

// CheckRef accepts what could name a thread as a person or a client gives
// it: 1 to MaxRefLen letters, digits, '-' or '_' (so a made-up id such as
// "nonexistent-id" is simply not found). Anything else — dots, slashes,
// spaces, quotes — could leave the logs directory or break a log line, and
// is refused before any lookup.
func CheckRef(id string) error {
	if id == "" || len(id) > MaxRefLen {
		return fmt.Errorf("%w %q: thread ids are the 26 letters and digits that thread lists show", ErrInvalidRef, id)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= '0' && c <= '9' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c == '-' || c == '_') {
			return fmt.Errorf("%w %q: thread ids are letters and digits only", ErrInvalidRef, id)
		}
	}
	return nil
}

// ResolveRef is Resolve for a reference a person typed: checked with
// CheckRef, and a lower-case id also finds its upper-case thread.
func ResolveRef(l storage.Layout, id string) (Record, error) {
	if err := CheckRef(id); err != nil {
		return Record{}, err
	}
	rec, err := Resolve(l, id)
	if errors.Is(err, ErrNotFound) && strings.ToUpper(id) != id {
		rec, err = Resolve(l, strings.ToUpper(id))
	}
	return rec, err
}
