package jsrt

import (
	"net/url"
	"os"
	"os/user"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/dop251/goja"
	nodeurl "github.com/dop251/goja_nodejs/url"

	"github.com/uncaged/workflow/engine/threadenv"
)

// osModule is node:os, in Go: the facts of the machine the engine runs on.
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
		"homedir", str(e.homeDir),
		"tmpdir", func(goja.FunctionCall) goja.Value {
			// As Node: $TMPDIR of the thread's environment, else /tmp.
			d := os.TempDir()
			if th := threadenv.Of(e.host); th != nil {
				if d = th.Getenv("TMPDIR"); d == "" {
					d = "/tmp"
				}
			}
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
			home, _ := e.homeDir()
			shell := os.Getenv("SHELL")
			if th := threadenv.Of(e.host); th != nil {
				shell = th.Getenv("SHELL")
			}
			return e.obj("username", u.Username, "uid", os.Getuid(), "gid", os.Getgid(), "homedir", home, "shell", shell)
		},
	)
}

// urlModule is node:url: goja_nodejs's WHATWG URL and URLSearchParams, plus
// the file-URL helpers bundles use with paths.
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
		p, err := filepath.Abs(threadenv.Of(e.host).Abs(call.Argument(0).String()))
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

// homeDir is os.homedir(): as Node, $HOME of the thread's environment
// when set, else the user's home directory. A host that carries no thread
// environment (tests) has the process's.
func (e *jsEnv) homeDir() (string, error) {
	th := threadenv.Of(e.host)
	if th == nil {
		return os.UserHomeDir()
	}
	if home := th.Getenv("HOME"); home != "" {
		return home, nil
	}
	u, err := user.Current()
	if err != nil {
		return "", err
	}
	return u.HomeDir, nil
}
