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
	"net/url"
	"os"
	"os/user"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/dop251/goja"
	"github.com/dop251/goja_nodejs/buffer"
	nodeurl "github.com/dop251/goja_nodejs/url"
)

// nodePlatform is process.platform: Node's names for Go's GOOS.
func nodePlatform() string {
	if runtime.GOOS == "windows" {
		return "win32"
	}
	return runtime.GOOS
}

func nodeArch() string {
	switch runtime.GOARCH {
	case "amd64":
		return "x64"
	case "386":
		return "ia32"
	}
	return runtime.GOARCH
}

// --- process ---------------------------------------------------------------

func (e *jsEnv) processHost() *goja.Object {
	return e.obj(
		"env", e.vm.NewDynamicObject(&envObject{e}),
		"platform", nodePlatform(),
		"arch", nodeArch(),
		"pid", os.Getpid(),
		"ppid", os.Getppid(),
		"bundle", e.bundleName,
		"cwd", func(goja.FunctionCall) goja.Value {
			wd, err := os.Getwd()
			if err != nil {
				e.throwError(err.Error())
			}
			return e.vm.ToValue(wd)
		},
		"hrtime", func(goja.FunctionCall) goja.Value {
			return e.vm.ToValue(float64(time.Since(e.started).Nanoseconds()))
		},
		"log", e.consoleLog,
	)
}

// envObject is process.env: the thread's environment through
// Host.Getenv, read-only. While a bundle is validated its top level sees
// the loader's environment, and reading a variable that is not set throws:
// a descriptor must not depend on the environment, and the original
// silently read undefined there.
type envObject struct{ e *jsEnv }

// notEnvKeys are property names generic code probes on any object
// (JSON.stringify, await, String(), inspection); they are never
// environment reads.
var notEnvKeys = map[string]bool{
	"toJSON": true, "then": true, "constructor": true, "toString": true, "valueOf": true,
	"hasOwnProperty": true, "isPrototypeOf": true, "propertyIsEnumerable": true,
	"toLocaleString": true, "__proto__": true, "inspect": true,
}

func (o *envObject) Get(key string) goja.Value {
	e := o.e
	if e.validating {
		if v, ok := e.lookupEnv(key); ok {
			return e.vm.ToValue(v)
		}
		if notEnvKeys[key] {
			return nil
		}
		e.throwError(fmt.Sprintf("environment variable %s is not set; bundles must read the environment lazily, inside run", key))
	}
	if v := e.host.Getenv(key); v != "" {
		return e.vm.ToValue(v)
	}
	return nil
}

func (o *envObject) Set(key string, _ goja.Value) bool {
	o.e.throwTypeError(fmt.Sprintf("cannot set process.env.%s: process.env is read-only in workflow bundles (pass env to child processes explicitly)", key))
	return false
}

func (o *envObject) Has(key string) bool {
	if o.e.validating {
		_, ok := o.e.lookupEnv(key)
		return ok
	}
	return o.e.host.Getenv(key) != ""
}

func (o *envObject) Delete(key string) bool {
	o.e.throwTypeError(fmt.Sprintf("cannot delete process.env.%s: process.env is read-only in workflow bundles", key))
	return false
}

// Keys lists the process environment's names that the thread's
// environment also has, so {...process.env} works for child processes.
// Host has no way to enumerate its own additions.
func (o *envObject) Keys() []string {
	if o.e.validating {
		return nil
	}
	var keys []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if k != "" && o.e.host.Getenv(k) != "" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	return keys
}

// --- console ---------------------------------------------------------------

func (e *jsEnv) consoleLog(call goja.FunctionCall) goja.Value {
	if e.host != nil && !e.validating {
		e.host.Log("CONSOLE", call.Argument(0).String())
	}
	return goja.Undefined()
}

func (e *jsEnv) consoleHost() *goja.Object {
	return e.obj("log", e.consoleLog)
}

// --- timers ----------------------------------------------------------------

func (e *jsEnv) timersHost() *goja.Object {
	l := e.loop
	callback := func(v goja.Value) goja.Callable {
		fn, ok := goja.AssertFunction(v)
		if !ok {
			e.throwTypeError("timer callback must be a function")
		}
		return fn
	}
	argsOf := func(v goja.Value) []goja.Value {
		var out []goja.Value
		if obj, ok := v.(*goja.Object); ok {
			e.vm.ForOf(obj, func(x goja.Value) bool {
				out = append(out, x)
				return true
			})
		}
		return out
	}
	return e.obj(
		"start", func(call goja.FunctionCall) goja.Value {
			id := l.startTimer(callback(call.Argument(0)), argsOf(call.Argument(2)), timerDelay(call.Argument(1)), call.Argument(3).ToBoolean(), false)
			return e.vm.ToValue(id)
		},
		"immediate", func(call goja.FunctionCall) goja.Value {
			return e.vm.ToValue(l.startTimer(callback(call.Argument(0)), argsOf(call.Argument(1)), 0, false, true))
		},
		"clear", func(call goja.FunctionCall) goja.Value {
			l.clearTimer(call.Argument(0).ToInteger())
			return goja.Undefined()
		},
		"ref", func(call goja.FunctionCall) goja.Value {
			l.setTimerRef(call.Argument(0).ToInteger(), call.Argument(1).ToBoolean())
			return goja.Undefined()
		},
		"hasRef", func(call goja.FunctionCall) goja.Value {
			t, ok := l.timers[call.Argument(0).ToInteger()]
			return e.vm.ToValue(ok && t.ref)
		},
		"refresh", func(call goja.FunctionCall) goja.Value {
			l.refreshTimer(call.Argument(0).ToInteger())
			return goja.Undefined()
		},
		"uncaught", func(call goja.FunctionCall) goja.Value {
			if l.fatal == nil {
				l.fatal = &uncaughtError{valueError(call.Argument(0), e.bundleName)}
			}
			return goja.Undefined()
		},
	)
}

// --- web globals -----------------------------------------------------------

func (e *jsEnv) webHost() *goja.Object {
	return e.obj(
		"now", func(goja.FunctionCall) goja.Value {
			return e.vm.ToValue(float64(time.Since(e.started).Nanoseconds()) / 1e6)
		},
		"timeOrigin", float64(e.started.UnixNano())/1e6,
	)
}

// --- os ----------------------------------------------------------------------

func (e *jsEnv) osModule() *goja.Object {
	str := func(f func() (string, error)) func(goja.FunctionCall) goja.Value {
		return func(goja.FunctionCall) goja.Value {
			s, err := f()
			if err != nil {
				e.throwError(err.Error())
			}
			return e.vm.ToValue(s)
		}
	}
	osType := map[string]string{"linux": "Linux", "darwin": "Darwin", "windows": "Windows_NT", "freebsd": "FreeBSD"}[runtime.GOOS]
	if osType == "" {
		osType = runtime.GOOS
	}
	return e.obj(
		"EOL", "\n",
		"devNull", os.DevNull,
		"homedir", str(os.UserHomeDir),
		"tmpdir", func(goja.FunctionCall) goja.Value {
			d := os.TempDir()
			if len(d) > 1 {
				d = strings.TrimSuffix(d, "/")
			}
			return e.vm.ToValue(d)
		},
		"hostname", str(os.Hostname),
		"platform", func(goja.FunctionCall) goja.Value { return e.vm.ToValue(nodePlatform()) },
		"type", func(goja.FunctionCall) goja.Value { return e.vm.ToValue(osType) },
		"arch", func(goja.FunctionCall) goja.Value { return e.vm.ToValue(nodeArch()) },
		"machine", func(goja.FunctionCall) goja.Value { return e.vm.ToValue(runtime.GOARCH) },
		"release", func(goja.FunctionCall) goja.Value { return e.vm.ToValue(osRelease()) },
		"endianness", func(goja.FunctionCall) goja.Value { return e.vm.ToValue("LE") },
		"availableParallelism", func(goja.FunctionCall) goja.Value { return e.vm.ToValue(runtime.NumCPU()) },
		"cpus", func(goja.FunctionCall) goja.Value {
			cpus := make([]any, runtime.NumCPU())
			for i := range cpus {
				cpus[i] = e.obj("model", "unknown", "speed", 0,
					"times", e.obj("user", 0, "nice", 0, "sys", 0, "idle", 0, "irq", 0))
			}
			return e.vm.NewArray(cpus...)
		},
		"userInfo", func(goja.FunctionCall) goja.Value {
			u, err := user.Current()
			if err != nil {
				e.throwError(err.Error())
			}
			home, _ := os.UserHomeDir()
			return e.obj("username", u.Username, "uid", os.Getuid(), "gid", os.Getgid(), "homedir", home, "shell", os.Getenv("SHELL"))
		},
	)
}

// --- url ---------------------------------------------------------------------

func (e *jsEnv) urlModule() *goja.Object {
	module := e.vm.NewObject()
	exports := e.vm.NewObject()
	_ = module.Set("exports", exports)
	nodeurl.Require(e.vm, module)
	_ = exports.Set("fileURLToPath", func(call goja.FunctionCall) goja.Value {
		arg := call.Argument(0)
		s := arg.String()
		if obj, ok := arg.(*goja.Object); ok {
			if href := obj.Get("href"); href != nil && !goja.IsUndefined(href) {
				s = href.String()
			}
		}
		u, err := url.Parse(s)
		if err != nil || u.Scheme != "file" {
			e.throwTypeError("The URL must be of scheme file", "code", "ERR_INVALID_URL_SCHEME")
		}
		return e.vm.ToValue(u.Path)
	})
	_ = exports.Set("pathToFileURL", func(call goja.FunctionCall) goja.Value {
		p, err := filepath.Abs(call.Argument(0).String())
		if err != nil {
			e.throwError(err.Error())
		}
		u := url.URL{Scheme: "file", Path: p}
		obj, err := e.vm.New(exports.Get("URL"), e.vm.ToValue(u.String()))
		if err != nil {
			panic(err)
		}
		return obj
	})
	return exports
}

// --- buffer ------------------------------------------------------------------

func (e *jsEnv) bufferHost() *goja.Object {
	module := e.vm.NewObject()
	exports := e.vm.NewObject()
	_ = module.Set("exports", exports)
	buffer.Require(e.vm, module)
	return e.obj(
		"Buffer", exports.Get("Buffer"),
		"encode", func(call goja.FunctionCall) goja.Value {
			return e.arrayBuffer(encodeString(call.Argument(0).String(), call.Argument(1).String()))
		},
		"decode", func(call goja.FunctionCall) goja.Value {
			b, ok := bytesOf(call.Argument(0))
			if !ok {
				e.throwTypeError("expected a Buffer")
			}
			return e.vm.ToValue(decodeBytes(b, call.Argument(1).String()))
		},
		"byteLength", func(call goja.FunctionCall) goja.Value {
			s, enc := call.Argument(0).String(), call.Argument(1).String()
			if enc == "utf8" {
				return e.vm.ToValue(len(s))
			}
			return e.vm.ToValue(len(encodeString(s, enc)))
		},
		"atob", func(call goja.FunctionCall) goja.Value {
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

// --- encoding ------------------------------------------------------------------

func (e *jsEnv) encodingHost() *goja.Object {
	return e.obj(
		"encode", func(call goja.FunctionCall) goja.Value {
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
			return e.vm.NewArray(decodeUTF8(body), consumed)
		},
	)
}

// --- crypto --------------------------------------------------------------------

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
