package jsrt

import (
	"encoding/base64"
	"encoding/hex"
	"reflect"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/dop251/goja"
)

// bytesOf returns the bytes behind an ArrayBuffer, typed array, DataView or
// Buffer. The slice aliases JavaScript memory: copy it before another
// goroutine sees it.
func bytesOf(v goja.Value) ([]byte, bool) {
	if v == nil || goja.IsUndefined(v) || goja.IsNull(v) {
		return nil, false
	}
	obj, ok := v.(*goja.Object)
	if !ok {
		return nil, false
	}
	// Only these export without a copy; Export would copy any other
	// object whole.
	switch obj.ExportType() {
	case bytesType:
		if x, ok := obj.Export().([]byte); ok {
			return x, true
		}
	case arrayBufferType:
		return obj.Export().(goja.ArrayBuffer).Bytes(), true
	}
	bufV := obj.Get("buffer")
	if bufV == nil {
		return nil, false
	}
	ab, ok := bufV.Export().(goja.ArrayBuffer)
	if !ok {
		return nil, false
	}
	off := obj.Get("byteOffset").ToInteger()
	n := obj.Get("byteLength").ToInteger()
	b := ab.Bytes()
	if off < 0 || n < 0 || off+n > int64(len(b)) {
		return nil, false
	}
	return b[off : off+n], true
}

// copyBytes is bytesOf with a private copy, safe to hand to other
// goroutines.
func copyBytes(v goja.Value) ([]byte, bool) {
	b, ok := bytesOf(v)
	if !ok {
		return nil, false
	}
	return append([]byte(nil), b...), true
}

var bytesType = reflect.TypeOf([]byte(nil))

func (e *jsEnv) arrayBuffer(b []byte) goja.Value {
	return e.vm.ToValue(e.vm.NewArrayBuffer(b))
}

// encodeString implements Buffer.from(string, encoding) for Node's
// encodings (names already normalized by buffer.js).
func encodeString(s, enc string) []byte {
	switch enc {
	case "hex":
		return decodeHexLenient(s)
	case "base64", "base64url":
		return decodeBase64Lenient(s)
	case "latin1", "ascii":
		units := utf16.Encode([]rune(s))
		out := make([]byte, len(units))
		for i, u := range units {
			out[i] = byte(u)
		}
		return out
	case "utf16le":
		units := utf16.Encode([]rune(s))
		out := make([]byte, 2*len(units))
		for i, u := range units {
			out[2*i] = byte(u)
			out[2*i+1] = byte(u >> 8)
		}
		return out
	}
	return []byte(s)
}

// decodeBytes implements buf.toString(encoding).
func decodeBytes(b []byte, enc string) string {
	switch enc {
	case "hex":
		return hex.EncodeToString(b)
	case "base64":
		return base64.StdEncoding.EncodeToString(b)
	case "base64url":
		return base64.RawURLEncoding.EncodeToString(b)
	case "latin1":
		r := make([]rune, len(b))
		for i, c := range b {
			r[i] = rune(c)
		}
		return string(r)
	case "ascii":
		r := make([]rune, len(b))
		for i, c := range b {
			r[i] = rune(c & 0x7f)
		}
		return string(r)
	case "utf16le":
		units := make([]uint16, len(b)/2)
		for i := range units {
			units[i] = uint16(b[2*i]) | uint16(b[2*i+1])<<8
		}
		return string(utf16.Decode(units))
	}
	return decodeUTF8(b)
}

// decodeUTF8 replaces each invalid byte with U+FFFD, as TextDecoder and
// Buffer do (Go's string conversion would keep the raw bytes, which goja
// would then mangle).
func decodeUTF8(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	var sb strings.Builder
	sb.Grow(len(b) + 8)
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		sb.WriteRune(r) // RuneError for an invalid byte, which is U+FFFD
		b = b[n:]
	}
	return sb.String()
}

// incompleteUTF8Tail reports how many trailing bytes of b start a UTF-8
// sequence that more bytes could complete (for streaming decode).
func incompleteUTF8Tail(b []byte) int {
	for n := 1; n <= 3 && n <= len(b); n++ {
		c := b[len(b)-n]
		if c&0xC0 == 0x80 { // continuation byte: keep looking for the lead
			continue
		}
		need := 0
		switch {
		case c&0xE0 == 0xC0:
			need = 2
		case c&0xF0 == 0xE0:
			need = 3
		case c&0xF8 == 0xF0:
			need = 4
		}
		if need > n {
			return n
		}
		return 0
	}
	return 0
}

func decodeHexLenient(s string) []byte {
	out := make([]byte, 0, len(s)/2)
	for i := 0; i+1 < len(s); i += 2 {
		b, err := hex.DecodeString(s[i : i+2])
		if err != nil {
			break // Node stops at the first pair that is not hex
		}
		out = append(out, b[0])
	}
	return out
}

// decodeBase64Lenient accepts both alphabets, missing padding and stray
// whitespace, as Node does.
func decodeBase64Lenient(s string) []byte {
	clean := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '+', c == '/':
			clean = append(clean, c)
		case c == '-':
			clean = append(clean, '+')
		case c == '_':
			clean = append(clean, '/')
		case c == '=':
			i = len(s)
		}
	}
	if len(clean)%4 == 1 {
		clean = clean[:len(clean)-1]
	}
	out, err := base64.RawStdEncoding.DecodeString(string(clean))
	if err != nil {
		return nil
	}
	return out
}

// encodedSize bounds what encodeString(s, enc) allocates, with the
// conversion of s to a Go string (UTF-8, when goja holds it as UTF-16).
func encodedSize(v goja.Value, enc string) int64 {
	l := strLen(v)
	conv := int64(0)
	utf8Len := l
	if charSize(v) == 2 {
		conv, utf8Len = 3*l, 3*l
	}
	per := int64(0)
	switch enc {
	case "hex":
		per = l
	case "base64", "base64url":
		per = 3 * l
	case "latin1", "ascii":
		per = 7 * l
	case "utf16le":
		per = 8 * l
	default:
		per = utf8Len
	}
	return satAdd(conv, per)
}

// decodedSize bounds what decodeBytes(b, enc) allocates, with goja's own
// copy of the string (UTF-16, unless it is ASCII). UTF-8, the common case,
// is measured rather than bounded.
func decodedSize(b []byte, enc string) int64 {
	n := int64(len(b))
	switch enc {
	case "hex":
		return 2 * n
	case "base64", "base64url":
		return 2 * n
	case "latin1", "ascii":
		return 8 * n
	case "utf16le":
		return 6 * n
	}
	if n < 1<<20 {
		return n // below the gate's floor: not worth the scan
	}
	ascii := true
	for _, c := range b {
		if c >= utf8.RuneSelf {
			ascii = false
			break
		}
	}
	switch {
	case ascii:
		return n
	case utf8.Valid(b):
		return n + 2*int64(utf8.RuneCount(b))
	}
	return 5 * n
}
