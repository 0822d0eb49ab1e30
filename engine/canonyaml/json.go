package canonyaml

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// MarshalJSON encodes m as compact JSON with the pairs in order, the way
// JavaScript's JSON.stringify would encode the equivalent object: numbers in
// JavaScript form (NaN and infinities become null, -0 becomes 0), and only
// '"', '\\' and control characters escaped in strings. Nested values follow
// the same rules as Marshal (a map[string]any has its keys sorted).
func (m Map) MarshalJSON() ([]byte, error) {
	return appendJSONValue(make([]byte, 0, 128), m, 0)
}

func appendJSONValue(b []byte, v any, depth int) ([]byte, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("canonyaml: value nested deeper than %d levels", maxDepth)
	}
	var err error
	switch x := v.(type) {
	case nil:
		return append(b, "null"...), nil
	case bool:
		if x {
			return append(b, "true"...), nil
		}
		return append(b, "false"...), nil
	case string:
		return appendJSONString(b, x)
	case Map:
		b = append(b, '{')
		for i, p := range x {
			if i > 0 {
				b = append(b, ',')
			}
			if b, err = appendJSONString(b, p.Key); err != nil {
				return nil, err
			}
			b = append(b, ':')
			if b, err = appendJSONValue(b, p.Value, depth+1); err != nil {
				return nil, err
			}
		}
		return append(b, '}'), nil
	case map[string]any:
		b = append(b, '{')
		for i, k := range sortedKeys(x) {
			if i > 0 {
				b = append(b, ',')
			}
			if b, err = appendJSONString(b, k); err != nil {
				return nil, err
			}
			b = append(b, ':')
			if b, err = appendJSONValue(b, x[k], depth+1); err != nil {
				return nil, err
			}
		}
		return append(b, '}'), nil
	case []any:
		b = append(b, '[')
		for i, item := range x {
			if i > 0 {
				b = append(b, ',')
			}
			if b, err = appendJSONValue(b, item, depth+1); err != nil {
				return nil, err
			}
		}
		return append(b, ']'), nil
	case []string:
		b = append(b, '[')
		for i, item := range x {
			if i > 0 {
				b = append(b, ',')
			}
			if b, err = appendJSONString(b, item); err != nil {
				return nil, err
			}
		}
		return append(b, ']'), nil
	}
	f, ok := toFloat(v)
	if !ok {
		return nil, fmt.Errorf("canonyaml: unsupported value of type %T", v)
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(b, "null"...), nil
	}
	return appendJSNumber(b, f), nil
}

// appendJSONString appends JSON.stringify(s). It is the same escaping as
// double-quoted YAML starts from (appendJSONQuoted), over UTF-8 bytes.
func appendJSONString(b []byte, s string) ([]byte, error) {
	if !utf8.ValidString(s) {
		return nil, fmt.Errorf("canonyaml: string is not valid UTF-8: %q", s)
	}
	return appendJSONQuoted(b, []byte(s)), nil
}

// FromJSON decodes JSON into the value tree Marshal accepts: Map, []any,
// string, float64, bool and nil.
//
// Objects follow JSON.parse semantics for key order: keys that are array
// indices ("0" to "4294967294" in canonical form, without leading zeros or
// sign) come first in ascending numeric order, then the other keys in order of
// first appearance. A duplicated key keeps its first position and its last
// value. Numbers become float64, rounded as JavaScript rounds them (out of
// range values become ±Inf). Invalid JSON, trailing data, invalid UTF-8 and
// \u escapes of unpaired surrogates (which a Go string cannot hold) are
// errors.
func FromJSON(data []byte) (any, error) {
	p := jsonParser{data: data}
	p.skipSpace()
	v, err := p.value(0)
	if err != nil {
		return nil, err
	}
	p.skipSpace()
	if p.pos < len(p.data) {
		return nil, p.errorf("unexpected data after the JSON value")
	}
	return v, nil
}

type jsonParser struct {
	data []byte
	pos  int
	sb   []byte
}

// JSONError reports invalid JSON input to FromJSON.
type JSONError struct {
	Offset int    // byte offset of the problem in the input
	Msg    string // what is wrong
}

// Error implements error.
func (e *JSONError) Error() string {
	return fmt.Sprintf("canonyaml: invalid JSON at offset %d: %s", e.Offset, e.Msg)
}

func (p *jsonParser) errorf(format string, args ...any) error {
	return &JSONError{Offset: p.pos, Msg: fmt.Sprintf(format, args...)}
}

func (p *jsonParser) skipSpace() {
	for p.pos < len(p.data) {
		switch p.data[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

func (p *jsonParser) value(depth int) (any, error) {
	if depth > maxDepth {
		return nil, p.errorf("nested deeper than %d levels", maxDepth)
	}
	if p.pos >= len(p.data) {
		return nil, p.errorf("unexpected end of input")
	}
	switch c := p.data[p.pos]; {
	case c == '{':
		return p.object(depth)
	case c == '[':
		return p.array(depth)
	case c == '"':
		return p.string()
	case c == '-' || c >= '0' && c <= '9':
		return p.number()
	case p.literal("true"):
		return true, nil
	case p.literal("false"):
		return false, nil
	case p.literal("null"):
		return nil, nil
	default:
		return nil, p.errorf("unexpected character %q", c)
	}
}

func (p *jsonParser) literal(word string) bool {
	if len(p.data)-p.pos >= len(word) && string(p.data[p.pos:p.pos+len(word)]) == word {
		p.pos += len(word)
		return true
	}
	return false
}

func (p *jsonParser) array(depth int) (any, error) {
	p.pos++ // [
	out := []any{}
	p.skipSpace()
	if p.pos < len(p.data) && p.data[p.pos] == ']' {
		p.pos++
		return out, nil
	}
	for {
		p.skipSpace()
		v, err := p.value(depth + 1)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
		p.skipSpace()
		if p.pos >= len(p.data) {
			return nil, p.errorf("unexpected end of input in array")
		}
		switch p.data[p.pos] {
		case ',':
			p.pos++
		case ']':
			p.pos++
			return out, nil
		default:
			return nil, p.errorf("expected ',' or ']' in array, found %q", p.data[p.pos])
		}
	}
}

func (p *jsonParser) object(depth int) (any, error) {
	p.pos++ // {
	out := Map{}
	var index map[string]int // key positions, once the object is large
	p.skipSpace()
	if p.pos < len(p.data) && p.data[p.pos] == '}' {
		p.pos++
		return out, nil
	}
	for {
		p.skipSpace()
		if p.pos >= len(p.data) || p.data[p.pos] != '"' {
			return nil, p.errorf("expected a string key in object")
		}
		key, err := p.string()
		if err != nil {
			return nil, err
		}
		p.skipSpace()
		if p.pos >= len(p.data) || p.data[p.pos] != ':' {
			return nil, p.errorf("expected ':' after object key")
		}
		p.pos++
		p.skipSpace()
		v, err := p.value(depth + 1)
		if err != nil {
			return nil, err
		}
		out, index = setKey(out, index, key, v)
		p.skipSpace()
		if p.pos >= len(p.data) {
			return nil, p.errorf("unexpected end of input in object")
		}
		switch p.data[p.pos] {
		case ',':
			p.pos++
		case '}':
			p.pos++
			return orderLikeJS(out), nil
		default:
			return nil, p.errorf("expected ',' or '}' in object, found %q", p.data[p.pos])
		}
	}
}

// setKey sets key to v in m, keeping the position of an existing key.
func setKey(m Map, index map[string]int, key string, v any) (Map, map[string]int) {
	if index == nil {
		for i := range m {
			if m[i].Key == key {
				m[i].Value = v
				return m, nil
			}
		}
		m = append(m, Pair{Key: key, Value: v})
		if len(m) > 16 {
			index = make(map[string]int, 2*len(m))
			for i, p := range m {
				index[p.Key] = i
			}
		}
		return m, index
	}
	if i, ok := index[key]; ok {
		m[i].Value = v
		return m, index
	}
	index[key] = len(m)
	return append(m, Pair{Key: key, Value: v}), index
}

// arrayIndex reports whether key is an array index in canonical form, as
// JavaScript orders such object keys first, and returns its value.
func arrayIndex(key string) (uint64, bool) {
	if key == "" || len(key) > 10 || (key[0] == '0' && len(key) > 1) {
		return 0, false
	}
	var n uint64
	for i := 0; i < len(key); i++ {
		c := key[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + uint64(c-'0')
	}
	return n, n <= math.MaxUint32-1
}

// orderLikeJS moves array-index keys to the front in ascending order and
// keeps the remaining keys in their order.
func orderLikeJS(m Map) Map {
	nIdx := 0
	for _, p := range m {
		if _, ok := arrayIndex(p.Key); ok {
			nIdx++
		}
	}
	if nIdx == 0 {
		return m
	}
	type indexed struct {
		n uint64
		p Pair
	}
	idx := make([]indexed, 0, nIdx)
	rest := make(Map, 0, len(m)-nIdx)
	for _, p := range m {
		if n, ok := arrayIndex(p.Key); ok {
			idx = append(idx, indexed{n, p})
		} else {
			rest = append(rest, p)
		}
	}
	sort.Slice(idx, func(i, j int) bool { return idx[i].n < idx[j].n })
	out := make(Map, 0, len(m))
	for _, x := range idx {
		out = append(out, x.p)
	}
	return append(out, rest...)
}

func (p *jsonParser) number() (any, error) {
	start := p.pos
	d := p.data
	digits := func() int {
		n := 0
		for p.pos < len(d) && d[p.pos] >= '0' && d[p.pos] <= '9' {
			p.pos++
			n++
		}
		return n
	}
	if d[p.pos] == '-' {
		p.pos++
	}
	switch {
	case p.pos < len(d) && d[p.pos] == '0':
		p.pos++
	case digits() == 0:
		return nil, p.errorf("invalid number")
	}
	if p.pos < len(d) && d[p.pos] == '.' {
		p.pos++
		if digits() == 0 {
			return nil, p.errorf("invalid number: digits expected after '.'")
		}
	}
	if p.pos < len(d) && (d[p.pos] == 'e' || d[p.pos] == 'E') {
		p.pos++
		if p.pos < len(d) && (d[p.pos] == '+' || d[p.pos] == '-') {
			p.pos++
		}
		if digits() == 0 {
			return nil, p.errorf("invalid number: digits expected in exponent")
		}
	}
	f, err := strconv.ParseFloat(string(d[start:p.pos]), 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return nil, &JSONError{Offset: start, Msg: err.Error()}
	}
	return f, nil
}

func (p *jsonParser) string() (string, error) {
	p.pos++ // opening quote
	d := p.data
	start := p.pos
	// fast path: no escapes
	for p.pos < len(d) {
		c := d[p.pos]
		if c == '"' {
			s := d[start:p.pos]
			if !utf8.Valid(s) {
				return "", &JSONError{Offset: start, Msg: "string is not valid UTF-8"}
			}
			p.pos++
			return string(s), nil
		}
		if c == '\\' || c < 0x20 {
			break
		}
		p.pos++
	}
	sb := append(p.sb[:0], d[start:p.pos]...)
	for {
		if p.pos >= len(d) {
			return "", p.errorf("unterminated string")
		}
		c := d[p.pos]
		switch {
		case c == '"':
			p.pos++
			if !utf8.Valid(sb) {
				return "", &JSONError{Offset: start, Msg: "string is not valid UTF-8"}
			}
			p.sb = sb
			return string(sb), nil
		case c < 0x20:
			return "", p.errorf("control character %q in string", c)
		case c != '\\':
			sb = append(sb, c)
			p.pos++
			continue
		}
		p.pos++ // backslash
		if p.pos >= len(d) {
			return "", p.errorf("unterminated string")
		}
		e := d[p.pos]
		p.pos++
		switch e {
		case '"', '\\', '/':
			sb = append(sb, e)
		case 'b':
			sb = append(sb, '\b')
		case 'f':
			sb = append(sb, '\f')
		case 'n':
			sb = append(sb, '\n')
		case 'r':
			sb = append(sb, '\r')
		case 't':
			sb = append(sb, '\t')
		case 'u':
			r, ok := p.hex4()
			if !ok {
				return "", p.errorf("invalid \\u escape")
			}
			if utf16.IsSurrogate(r) {
				r2 := rune(-1)
				if r < 0xDC00 && p.pos+1 < len(d) && d[p.pos] == '\\' && d[p.pos+1] == 'u' {
					save := p.pos
					p.pos += 2
					var ok2 bool
					if r2, ok2 = p.hex4(); !ok2 {
						return "", p.errorf("invalid \\u escape")
					}
					if r2 < 0xDC00 || r2 > 0xDFFF {
						p.pos = save
						r2 = -1
					}
				}
				if r2 < 0 {
					return "", p.errorf("unpaired surrogate \\u%04x cannot be represented", r)
				}
				r = utf16.DecodeRune(r, r2)
			}
			sb = utf8.AppendRune(sb, r)
		default:
			return "", p.errorf("invalid escape \\%c", e)
		}
	}
}

func (p *jsonParser) hex4() (rune, bool) {
	if len(p.data)-p.pos < 4 {
		return 0, false
	}
	var r rune
	for _, c := range p.data[p.pos : p.pos+4] {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c-'a') + 10
		case c >= 'A' && c <= 'F':
			r |= rune(c-'A') + 10
		default:
			return 0, false
		}
	}
	p.pos += 4
	return r, true
}
