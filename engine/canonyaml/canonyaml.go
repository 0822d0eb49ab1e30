// Package canonyaml emits YAML that is byte-identical to what the npm library
// yaml 2.8.4 (eemeli/yaml) produces for JSON-like data with
//
//	YAML.stringify(value, {indent: 2})
//	YAML.stringify(value, {indent: 2, defaultStringType: "QUOTE_DOUBLE"})
//
// The output is hashed by a content-addressed store, so every byte matters:
// quoting decisions, escapes, block scalar headers and line folding all follow
// the reference implementation, including its habit of measuring lengths in
// UTF-16 code units (a character outside the Basic Multilingual Plane counts
// as two columns).
//
// Values are ordered mappings ([Map]), sequences, strings, numbers, booleans
// and null. Numbers are JavaScript numbers: every numeric Go type is converted
// to float64 and formatted the way JavaScript's Number#toString does.
package canonyaml

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"unicode/utf8"
)

// Pair is one key/value of an ordered mapping.
type Pair struct {
	Key   string
	Value any
}

// Map is an ordered mapping (JS object semantics: key order is insertion
// order). Marshal emits the pairs in slice order; it does not reorder
// integer-like keys, so a Map built by hand should already be in the order a
// JavaScript object would enumerate (FromJSON takes care of that).
type Map []Pair

// Get returns the value of the last pair whose key is key, and whether there
// was one.
func (m Map) Get(key string) (any, bool) {
	for i := len(m) - 1; i >= 0; i-- {
		if m[i].Key == key {
			return m[i].Value, true
		}
	}
	return nil, false
}

// StringStyle selects how strings are written when nothing forces a
// particular style.
type StringStyle int

const (
	// Plain is yaml's default string type: plain scalars where they read
	// back as the same string, otherwise quoted or block scalars.
	Plain StringStyle = iota
	// DoubleQuoted is yaml's defaultStringType "QUOTE_DOUBLE": every string,
	// mapping keys included, is double-quoted.
	DoubleQuoted
)

// Options adjusts the output of MarshalWith.
type Options struct {
	// DefaultStringType is the style used for strings (and keys).
	DefaultStringType StringStyle
}

// Marshal returns the YAML document yaml 2.8.4 produces for
// YAML.stringify(v, {indent: 2}).
//
// v may be nil, bool, string, float64, float32, int, int64, int32, uint,
// uint32, uint64, []any, []string, Map or map[string]any, nested arbitrarily.
// Go maps have no order, so a map[string]any is emitted with its keys sorted
// lexicographically (byte order); use Map to control the order. A nil slice
// or map is emitted as an empty collection. Integers are converted to
// float64 first, exactly as a JavaScript number would hold them. Strings must
// be valid UTF-8; any other type is an error naming it.
func Marshal(v any) ([]byte, error) {
	return MarshalWith(v, Options{})
}

// MarshalWith is Marshal with options; Options{DefaultStringType:
// DoubleQuoted} matches YAML.stringify(v, {indent: 2, defaultStringType:
// "QUOTE_DOUBLE"}).
func MarshalWith(v any, opts Options) ([]byte, error) {
	switch opts.DefaultStringType {
	case Plain, DoubleQuoted:
	default:
		return nil, fmt.Errorf("canonyaml: unknown string style %d", opts.DefaultStringType)
	}
	e := encoder{doubleQuoted: opts.DefaultStringType == DoubleQuoted}
	e.buf = make([]byte, 0, 256)
	if err := e.document(v); err != nil {
		return nil, err
	}
	return e.buf, nil
}

// maxDepth bounds the nesting of values accepted by Marshal and the decoders.
const maxDepth = 10000

type encoder struct {
	buf          []byte
	doubleQuoted bool
	scratch8     []uint8
	scratch16    []uint16
}

func (e *encoder) document(v any) error {
	switch kind(v) {
	case kindSeq, kindMap:
		if err := e.collection(v, 0, 0); err != nil {
			return err
		}
	default:
		if _, err := e.scalar(v, scalarCtx{indentAtStart: -1}); err != nil {
			return err
		}
	}
	e.buf = append(e.buf, '\n')
	return nil
}

type valueKind int

const (
	kindScalar valueKind = iota
	kindSeq
	kindMap
)

func kind(v any) valueKind {
	switch v.(type) {
	case []any, []string:
		return kindSeq
	case Map, map[string]any:
		return kindMap
	}
	return kindScalar
}

func collectionLen(v any) int {
	switch c := v.(type) {
	case []any:
		return len(c)
	case []string:
		return len(c)
	case Map:
		return len(c)
	case map[string]any:
		return len(c)
	}
	return 0
}

// collection appends a block sequence or mapping whose own indentation is
// indent spaces (the first line is written at the current position).
func (e *encoder) collection(v any, indent, depth int) error {
	if depth > maxDepth {
		return fmt.Errorf("canonyaml: value nested deeper than %d levels", maxDepth)
	}
	switch c := v.(type) {
	case []any:
		if len(c) == 0 {
			e.buf = append(e.buf, "[]"...)
			return nil
		}
		for i, item := range c {
			if i > 0 {
				e.newline(indent)
			}
			e.buf = append(e.buf, '-', ' ')
			if err := e.seqItem(item, indent+indentStep, depth); err != nil {
				return err
			}
		}
	case []string:
		if len(c) == 0 {
			e.buf = append(e.buf, "[]"...)
			return nil
		}
		for i, item := range c {
			if i > 0 {
				e.newline(indent)
			}
			e.buf = append(e.buf, '-', ' ')
			if _, err := e.str(item, scalarCtx{indent: indent + indentStep, indentAtStart: -1}); err != nil {
				return err
			}
		}
	case Map:
		if len(c) == 0 {
			e.buf = append(e.buf, "{}"...)
			return nil
		}
		for i, p := range c {
			if i > 0 {
				e.newline(indent)
			}
			if err := e.pair(p.Key, p.Value, indent, depth); err != nil {
				return err
			}
		}
	case map[string]any:
		if len(c) == 0 {
			e.buf = append(e.buf, "{}"...)
			return nil
		}
		for i, k := range sortedKeys(c) {
			if i > 0 {
				e.newline(indent)
			}
			if err := e.pair(k, c[k], indent, depth); err != nil {
				return err
			}
		}
	}
	return nil
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func (e *encoder) seqItem(item any, itemIndent, depth int) error {
	if kind(item) == kindScalar {
		_, err := e.scalar(item, scalarCtx{indent: itemIndent, indentAtStart: -1})
		return err
	}
	return e.collection(item, itemIndent, depth+1)
}

// pair appends one mapping entry of a mapping indented by indent spaces.
func (e *encoder) pair(key string, value any, indent, depth int) error {
	inner := indent + indentStep
	keyStart := len(e.buf)
	keyLen, err := e.str(key, scalarCtx{indent: inner, indentAtStart: -1, implicitKey: true})
	if err != nil {
		return err
	}
	// yaml writes keys longer than 1024 characters as explicit "? key" entries.
	explicit := keyLen > maxImplicitKeyLen
	if explicit {
		e.insert(keyStart, "? ")
		e.newline(indent)
	}
	e.buf = append(e.buf, ':')

	if kind(value) != kindScalar {
		if collectionLen(value) == 0 || explicit {
			e.buf = append(e.buf, ' ')
		} else {
			e.newline(inner)
		}
		return e.collection(value, inner, depth+1)
	}

	c := scalarCtx{indent: inner, indentAtStart: -1}
	if !explicit {
		// the value starts after "key: ", which is what the folding of long
		// plain and quoted values measures from.
		c.indentAtStart = keyLen + 2
	}
	e.buf = append(e.buf, ' ')
	valStart := len(e.buf)
	if _, err := e.scalar(value, c); err != nil {
		return err
	}
	if len(e.buf) > valStart && e.buf[valStart] == '\n' {
		// the value was moved to its own line: no space after the colon.
		copy(e.buf[valStart-1:], e.buf[valStart:])
		e.buf = e.buf[:len(e.buf)-1]
	}
	return nil
}

func (e *encoder) newline(indent int) {
	e.buf = append(e.buf, '\n')
	e.buf = appendSpaces(e.buf, indent)
}

// insert puts s into the buffer at byte offset at.
func (e *encoder) insert(at int, s string) {
	n := len(e.buf)
	e.buf = append(e.buf, s...)
	copy(e.buf[at+len(s):], e.buf[at:n])
	copy(e.buf[at:], s)
}

// scalar appends a non-collection value. It returns the UTF-16 length of what
// was written for strings (0 for other scalars, whose length is not needed).
func (e *encoder) scalar(v any, c scalarCtx) (int, error) {
	switch x := v.(type) {
	case nil:
		e.buf = append(e.buf, "null"...)
	case bool:
		if x {
			e.buf = append(e.buf, "true"...)
		} else {
			e.buf = append(e.buf, "false"...)
		}
	case string:
		return e.str(x, c)
	default:
		f, ok := toFloat(v)
		if !ok {
			return 0, fmt.Errorf("canonyaml: unsupported value of type %T", v)
		}
		e.buf = appendYAMLNumber(e.buf, f)
	}
	return 0, nil
}

// toFloat converts the supported numeric Go types to a JavaScript number.
func toFloat(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case float32:
		return float64(x), true
	case int:
		return float64(x), true
	case int64:
		return float64(x), true
	case int32:
		return float64(x), true
	case uint:
		return float64(x), true
	case uint32:
		return float64(x), true
	case uint64:
		return float64(x), true
	}
	return 0, false
}

// appendYAMLNumber formats f like yaml's stringifyNumber.
func appendYAMLNumber(b []byte, f float64) []byte {
	switch {
	case math.IsNaN(f):
		return append(b, ".nan"...)
	case math.IsInf(f, 1):
		return append(b, ".inf"...)
	case math.IsInf(f, -1):
		return append(b, "-.inf"...)
	case f == 0 && math.Signbit(f):
		return append(b, "-0"...)
	}
	return appendJSNumber(b, f)
}

// appendJSNumber formats a finite f like JavaScript's Number#toString (and
// JSON.stringify): shortest round-trip digits, exponent notation when the
// decimal exponent is >= 21 or <= -7. Negative zero is written as "0".
func appendJSNumber(b []byte, f float64) []byte {
	if f == 0 {
		return append(b, '0')
	}
	var tmp [32]byte
	s := strconv.AppendFloat(tmp[:0], f, 'e', -1, 64) // [-]d[.ddd]e±xx
	if s[0] == '-' {
		b = append(b, '-')
		s = s[1:]
	}
	ePos := 0
	for ePos < len(s) && s[ePos] != 'e' {
		ePos++
	}
	var digitsBuf [24]byte
	digits := append(digitsBuf[:0], s[0])
	if ePos > 1 {
		digits = append(digits, s[2:ePos]...)
	}
	exp, _ := strconv.Atoi(string(s[ePos+1:]))
	k := len(digits)
	n := exp + 1 // position of the decimal point relative to the digits
	switch {
	case k <= n && n <= 21:
		b = append(b, digits...)
		for i := k; i < n; i++ {
			b = append(b, '0')
		}
	case 0 < n && n <= 21:
		b = append(b, digits[:n]...)
		b = append(b, '.')
		b = append(b, digits[n:]...)
	case -6 < n && n <= 0:
		b = append(b, '0', '.')
		for i := n; i < 0; i++ {
			b = append(b, '0')
		}
		b = append(b, digits...)
	default:
		b = append(b, digits[0])
		if k > 1 {
			b = append(b, '.')
			b = append(b, digits[1:]...)
		}
		b = append(b, 'e')
		if n-1 >= 0 {
			b = append(b, '+')
		}
		b = strconv.AppendInt(b, int64(n-1), 10)
	}
	return b
}

// str appends the YAML form of the string s in context c and returns its
// length in UTF-16 code units.
func (e *encoder) str(s string, c scalarCtx) (int, error) {
	c.doubleQuoted = e.doubleQuoted
	ascii := true
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			ascii = false
			break
		}
	}
	if ascii {
		e.scratch8 = append(e.scratch8[:0], s...)
		out := stringifyString(e.scratch8, &c)
		e.buf = append(e.buf, out...)
		return len(out), nil
	}
	if !utf8.ValidString(s) {
		return 0, fmt.Errorf("canonyaml: string is not valid UTF-8: %q", s)
	}
	e.scratch16 = appendUTF16(e.scratch16[:0], s)
	out := stringifyString(e.scratch16, &c)
	e.buf = appendUTF8(e.buf, out)
	return len(out), nil
}

// appendUTF16 appends the UTF-16 encoding of the valid UTF-8 string s.
func appendUTF16(dst []uint16, s string) []uint16 {
	for _, r := range s {
		if r < 0x10000 {
			dst = append(dst, uint16(r))
		} else {
			r -= 0x10000
			dst = append(dst, uint16(0xD800+(r>>10)), uint16(0xDC00+(r&0x3FF)))
		}
	}
	return dst
}

// appendUTF8 appends UTF-16 code units as UTF-8. A surrogate that is not part
// of a pair becomes U+FFFD, as Node's UTF-8 encoder does. yaml can split a
// surrogate pair when it folds a long double-quoted line; the JavaScript
// string then holds lone surrogates and its UTF-8 bytes hold U+FFFD.
func appendUTF8[E unit](dst []byte, u []E) []byte {
	for i := 0; i < len(u); i++ {
		c := rune(u[i])
		if c < utf8.RuneSelf {
			dst = append(dst, byte(c))
			continue
		}
		if c >= 0xD800 && c < 0xDC00 && i+1 < len(u) {
			if lo := rune(u[i+1]); lo >= 0xDC00 && lo < 0xE000 {
				c = 0x10000 + (c-0xD800)<<10 + (lo - 0xDC00)
				i++
			}
		}
		if c >= 0xD800 && c < 0xE000 {
			c = utf8.RuneError
		}
		dst = utf8.AppendRune(dst, c)
	}
	return dst
}
