package threads

import (
	"fmt"
	"strconv"
	"strings"
)

// The index files are read on every list, so the layouts this package and
// the original write (plain ASCII ids and hashes, integer timestamps) are
// scanned directly; anything else — escapes, non-ASCII, nested values, odd
// types — makes the scanner give up and encoding/json read the file with
// its full rules. Both paths give the same result, damage included.

type scanner struct {
	b []byte
	i int
}

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\n', '\r', '\t':
			s.i++
		default:
			return
		}
	}
}

func (s *scanner) eat(c byte) bool {
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

func (s *scanner) peek() byte {
	s.ws()
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

// str reads a string of printable ASCII without escapes.
func (s *scanner) str() (string, bool) {
	if !s.eat('"') {
		return "", false
	}
	start := s.i
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			v := string(s.b[start:s.i])
			s.i++
			return v, true
		case c == '\\' || c < 0x20 || c >= 0x80:
			return "", false
		}
		s.i++
	}
	return "", false
}

// num reads a number in strict JSON grammar:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *scanner) num() (float64, bool) {
	s.ws()
	b, start := s.b, s.i
	i := start
	digits := func() int {
		n := 0
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
			n++
		}
		return n
	}
	if i < len(b) && b[i] == '-' {
		i++
	}
	if i < len(b) && b[i] == '0' {
		i++
	} else if digits() == 0 {
		return 0, false
	}
	if i < len(b) && b[i] == '.' {
		i++
		if digits() == 0 {
			return 0, false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if digits() == 0 {
			return 0, false
		}
	}
	f, err := strconv.ParseFloat(string(b[start:i]), 64)
	if err != nil {
		return 0, false
	}
	s.i = i
	return f, true
}

// flatObject reads {"key": string-or-number, ...} and reports each field.
// It fails on any other value type.
func (s *scanner) flatObject(field func(key, str string, num float64, isStr bool)) bool {
	if !s.eat('{') {
		return false
	}
	if s.eat('}') {
		return true
	}
	for {
		key, ok := s.str()
		if !ok || !s.eat(':') {
			return false
		}
		if s.peek() == '"' {
			v, ok := s.str()
			if !ok {
				return false
			}
			field(key, v, 0, true)
		} else {
			n, ok := s.num()
			if !ok {
				return false
			}
			field(key, "", n, false)
		}
		if s.eat(',') {
			continue
		}
		return s.eat('}')
	}
}

func (s *scanner) end() bool {
	s.ws()
	return s.i == len(s.b)
}

// fastEntry is an index or history object's known fields.
type fastEntry struct {
	threadID, head, start string
	at                    float64
	has                   uint8
	// odd marks a key that encoding/json would match case-insensitively
	// (e.g. "HEAD"): leave such files to it.
	odd bool
}

const (
	hasThreadID = 1 << iota
	hasHead
	hasStart
	hasAt
)

func (e *fastEntry) field(atKey string) func(key, str string, num float64, isStr bool) {
	return func(key, str string, num float64, isStr bool) {
		// A later duplicate key wins, as in encoding/json; a wrong type
		// clears the field.
		set := func(bit uint8, ok bool) {
			if ok {
				e.has |= bit
			} else {
				e.has &^= bit
			}
		}
		switch key {
		case "threadId":
			e.threadID = str
			set(hasThreadID, isStr)
		case "head":
			e.head = str
			set(hasHead, isStr)
		case "start":
			e.start = str
			set(hasStart, isStr)
		case atKey:
			e.at = num
			set(hasAt, !isStr)
		default:
			for _, known := range [...]string{"threadId", "head", "start", atKey} {
				if strings.EqualFold(key, known) {
					e.odd = true
				}
			}
		}
	}
}

// scanIndex reads threads.json in the common layout. ok is false when the
// file needs the general decoder. An entry without a string head, a string
// start and a numeric updatedAt is left out and the first such entry is
// returned as a flaw.
func scanIndex(b []byte) (Index, *flaw, bool) {
	s := &scanner{b: b}
	idx := Index{}
	if !s.eat('{') {
		return nil, nil, false
	}
	if s.eat('}') {
		return idx, nil, s.end()
	}
	var first *flaw
	seen := map[string]bool{}
	for {
		s.ws()
		keyAt := s.i
		id, ok := s.str()
		if !ok || !s.eat(':') {
			return nil, nil, false
		}
		var e fastEntry
		if !s.flatObject(e.field("updatedAt")) || e.odd {
			return nil, nil, false
		}
		if seen[id] && first == nil {
			first = &flaw{keyAt, duplicateReason(id)}
		}
		seen[id] = true
		reason := ""
		if e.has&(hasHead|hasStart|hasAt) != hasHead|hasStart|hasAt {
			reason = entryReason(id, e.has)
		} else if bad := badHashes(e.head, e.start); bad != "" {
			reason = fmt.Sprintf("thread %q: %s", clip(id), bad)
		}
		if reason == "" {
			idx[id] = Entry{Head: e.head, Start: e.start, UpdatedAt: int64(e.at)}
		} else {
			delete(idx, id)
			if first == nil {
				first = &flaw{keyAt, reason}
			}
		}
		if s.eat(',') {
			continue
		}
		if !s.eat('}') || !s.end() {
			return nil, nil, false
		}
		return idx, first, true
	}
}

// duplicateReason says that an index names a thread twice: no writer
// does (each writes a map), and whichever entry a reader took, the other's
// nodes would be named by nothing.
func duplicateReason(id string) string {
	return fmt.Sprintf("thread %q appears more than once; only one entry can be the thread's", clip(id))
}

// entryReason says what is wrong with an index entry.
func entryReason(id string, has uint8) string {
	return fmt.Sprintf("thread %q %s", clip(id), missingFields(has, "updatedAt", false))
}

// clip shortens what a damaged file holds to what a message can show.
func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}

// scanHistoryLine reads one history line in the common layout. ok is false
// when the line needs the general decoder; reason is empty when the line
// holds a complete entry and says what it lacks otherwise.
func scanHistoryLine(line []byte) (e HistoryEntry, reason string, ok bool) {
	s := &scanner{b: line}
	var f fastEntry
	if !s.flatObject(f.field("completedAt")) || f.odd || !s.end() {
		return HistoryEntry{}, "", false
	}
	const all = hasThreadID | hasHead | hasStart | hasAt
	if f.has&all != all {
		return HistoryEntry{}, missingFields(f.has, "completedAt", true), true
	}
	if bad := badHashes(f.head, f.start); bad != "" {
		return HistoryEntry{}, bad, true
	}
	return HistoryEntry{ThreadID: f.threadID, Head: f.head, Start: f.start, CompletedAt: int64(f.at)}, "", true
}
