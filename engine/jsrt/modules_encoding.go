package jsrt

import (
	"crypto/hmac"
	"crypto/md5"
	"crypto/rand"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"fmt"
	"hash"
	"math/big"
	"strings"
	"unicode/utf8"

	"github.com/dop251/goja"
	"github.com/dop251/goja_nodejs/buffer"
)

// bufferHost gives buffer.js goja_nodejs's Buffer and the string codecs
// it lacks.
func (e *jsEnv) bufferHost() *goja.Object {
	module := e.vm.NewObject()
	exports := e.vm.NewObject()
	_ = module.Set("exports", exports)
	buffer.Require(e.vm, module)
	e.gateBuffer(exports)
	return e.obj(
		"Buffer", exports.Get("Buffer"),
		"encode", func(call goja.FunctionCall) goja.Value {
			enc := call.Argument(1).String()
			e.gate(atMost(encodedSize(call.Argument(0), enc)))
			return e.arrayBuffer(encodeString(call.Argument(0).String(), enc))
		},
		"decode", func(call goja.FunctionCall) goja.Value {
			b, ok := bytesOf(call.Argument(0))
			if !ok {
				e.throwTypeError("expected a Buffer")
			}
			enc := call.Argument(1).String()
			e.gate(atMost(decodedSize(b, enc)))
			return e.vm.ToValue(decodeBytes(b, enc))
		},
		"byteLength", func(call goja.FunctionCall) goja.Value {
			enc := call.Argument(1).String()
			e.gate(atMost(encodedSize(call.Argument(0), enc)))
			s := call.Argument(0).String()
			if enc == "utf8" {
				return e.vm.ToValue(len(s))
			}
			return e.vm.ToValue(len(encodeString(s, enc)))
		},
		"atob", func(call goja.FunctionCall) goja.Value {
			e.gate(atMost(satMul(strLen(call.Argument(0)), 10)))
			s := strings.Map(func(r rune) rune {
				if r == ' ' || r == '\t' || r == '\n' || r == '\f' || r == '\r' {
					return -1
				}
				return r
			}, call.Argument(0).String())
			if len(s)%4 == 0 {
				s = strings.TrimSuffix(strings.TrimSuffix(s, "="), "=")
			}
			b, err := base64.RawStdEncoding.DecodeString(s)
			if err != nil {
				panic(e.newError("DOMException", "The string to be decoded is not correctly encoded.", "name", "InvalidCharacterError"))
			}
			return e.vm.ToValue(decodeBytes(b, "latin1"))
		},
		"btoa", func(call goja.FunctionCall) goja.Value {
			e.gate(atMost(satMul(strLen(call.Argument(0)), 6)))
			s := call.Argument(0).String()
			b := make([]byte, 0, len(s))
			for _, r := range s {
				if r > 0xff {
					panic(e.newError("DOMException", "Invalid character", "name", "InvalidCharacterError"))
				}
				b = append(b, byte(r))
			}
			return e.vm.ToValue(base64.StdEncoding.EncodeToString(b))
		},
	)
}

// encodingHost backs TextEncoder and TextDecoder (UTF-8, WHATWG
// replacement, streaming).
func (e *jsEnv) encodingHost() *goja.Object {
	return e.obj(
		"encode", func(call goja.FunctionCall) goja.Value {
			e.gate(atMost(encodedSize(call.Argument(0), "utf8")))
			return e.arrayBuffer([]byte(call.Argument(0).String()))
		},
		"decode", func(call goja.FunctionCall) goja.Value {
			b, ok := bytesOf(call.Argument(0))
			if !ok {
				e.throwTypeError("The \"input\" argument must be an instance of ArrayBuffer or ArrayBufferView", "code", "ERR_INVALID_ARG_TYPE")
			}
			fatal, stripBOM, stream := call.Argument(1).ToBoolean(), call.Argument(2).ToBoolean(), call.Argument(3).ToBoolean()
			consumed := len(b)
			if stream {
				consumed -= incompleteUTF8Tail(b)
			}
			body := b[:consumed]
			if stripBOM && len(body) >= 3 && body[0] == 0xEF && body[1] == 0xBB && body[2] == 0xBF {
				body = body[3:]
			}
			if fatal && !utf8.Valid(body) {
				e.throwTypeError("The encoded data was not valid for encoding utf-8", "code", "ERR_ENCODING_INVALID_ENCODED_DATA")
			}
			e.gate(atMost(decodedSize(body, "utf8")))
			return e.vm.NewArray(decodeUTF8(body), consumed)
		},
	)
}

// cryptoHost backs node:crypto with Go's crypto packages.
func (e *jsEnv) cryptoHost() *goja.Object {
	return e.obj(
		"randomUUID", func(goja.FunctionCall) goja.Value {
			return e.vm.ToValue(newUUID())
		},
		"fillRandom", func(call goja.FunctionCall) goja.Value {
			b, ok := bytesOf(call.Argument(0))
			if !ok {
				e.throwTypeError("expected a typed array")
			}
			_, _ = rand.Read(b)
			return goja.Undefined()
		},
		"randomInt", func(call goja.FunctionCall) goja.Value {
			lo, hi := call.Argument(0).ToInteger(), call.Argument(1).ToInteger()
			if hi <= lo {
				e.throwError(fmt.Sprintf("The value of \"max\" is out of range. It must be greater than the value of \"min\" (%d). Received %d", lo, hi), "code", "ERR_OUT_OF_RANGE")
			}
			n, _ := rand.Int(rand.Reader, big.NewInt(hi-lo))
			return e.vm.ToValue(lo + n.Int64())
		},
		"digest", func(call goja.FunctionCall) goja.Value {
			data, _ := bytesOf(call.Argument(1))
			newHash := hashes[call.Argument(0).String()]
			if newHash == nil {
				e.throwError("Digest method not supported")
			}
			var h hash.Hash
			if key, ok := bytesOf(call.Argument(2)); ok {
				h = hmac.New(newHash, key)
			} else {
				h = newHash()
			}
			h.Write(data)
			return e.arrayBuffer(h.Sum(nil))
		},
	)
}

var hashes = map[string]func() hash.Hash{
	"md5":    md5.New,
	"sha1":   sha1.New,
	"sha224": sha256.New224,
	"sha256": sha256.New,
	"sha384": sha512.New384,
	"sha512": sha512.New,
}

// newUUID returns a random (version 4) UUID.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
