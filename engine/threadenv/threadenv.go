// Package threadenv is the environment a thread runs with: the variables
// and working directory of the command that started, forked or resumed it
// (or of the connector whose API did), and where they came from, so that
// an error about a missing variable can say whose environment lacked it.
//
// The engine host is one long-lived process per storage root, started by
// whichever command first needed it; its own environment says nothing
// about the command asking for a thread now. Every place a thread reads
// the environment — process.env and process.cwd() in a bundle, the
// environment and directory of the processes its agents start, the API
// keys of its models — reads an Env instead. An Env lives in memory only:
// it is never written into a thread's nodes or logs.
package threadenv

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// Env is one thread's environment. It does not change once made (With
// returns a copy), so runs may share it between goroutines. The nil Env
// has no variables, the host's working directory and no origin.
type Env struct {
	vars   map[string]string
	dir    string
	origin string
}

// New makes an Env of environ ("NAME=value" entries, later ones winning,
// as exec.Cmd treats them), dir (the working directory; "" means the
// engine host's own) and origin, which completes "the thread's environment
// is …" in messages. Entries are not checked here; see Check.
func New(environ []string, dir, origin string) *Env {
	e := &Env{vars: make(map[string]string, len(environ)), dir: dir, origin: origin}
	for _, kv := range environ {
		if name, value, ok := strings.Cut(kv, "="); ok && name != "" {
			e.vars[name] = value
		}
	}
	return e
}

// FromGetenv makes an Env of what getenv answers for the names of this
// process's environment: a stand-in for hosts configured with a lookup
// function rather than a list.
func FromGetenv(getenv func(string) string, dir, origin string) *Env {
	e := &Env{vars: map[string]string{}, dir: dir, origin: origin}
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if v := getenv(name); name != "" && v != "" {
			e.vars[name] = v
		}
	}
	return e
}

// Check refuses an environment and directory a request may not carry: an
// entry that is not NAME=value with a non-empty NAME, a NUL byte (no
// process could be started with it), or a directory that is not absolute.
// It is what the engine host applies to what a client sends.
func Check(environ []string, dir string) error {
	for i, kv := range environ {
		name, _, ok := strings.Cut(kv, "=")
		switch {
		case !ok || name == "":
			return fmt.Errorf("environment entry %d is not NAME=value", i)
		case strings.ContainsRune(kv, 0):
			// The name only: a value may be a secret.
			return fmt.Errorf("environment variable %q holds a NUL byte", name)
		}
	}
	if dir != "" && !filepath.IsAbs(dir) {
		return fmt.Errorf("working directory %q is not an absolute path", dir)
	}
	return nil
}

// Getenv returns the variable's value, "" when it is not set.
func (e *Env) Getenv(name string) string {
	v, _ := e.Lookup(name)
	return v
}

// Lookup returns the variable's value and whether it is set.
func (e *Env) Lookup(name string) (string, bool) {
	if e == nil {
		return "", false
	}
	v, ok := e.vars[name]
	return v, ok
}

// Names lists the variables' names, sorted.
func (e *Env) Names() []string {
	if e == nil {
		return nil
	}
	names := make([]string, 0, len(e.vars))
	for k := range e.vars {
		names = append(names, k)
	}
	slices.Sort(names)
	return names
}

// Environ is the environment as "NAME=value" entries sorted by name, for
// a child process.
func (e *Env) Environ() []string {
	names := e.Names()
	out := make([]string, len(names))
	for i, k := range names {
		out[i] = k + "=" + e.vars[k]
	}
	return out
}

// Dir is the working directory, "" for the engine host's own.
func (e *Env) Dir() string {
	if e == nil {
		return ""
	}
	return e.dir
}

// Origin says where the environment came from, e.g. "that of
// `uncaged-workflow run` in /home/me, pid 4242".
func (e *Env) Origin() string {
	if e == nil {
		return ""
	}
	return e.origin
}

// With returns a copy of e with one variable set.
func (e *Env) With(name, value string) *Env {
	c := &Env{vars: make(map[string]string, len(e.Names())+1), dir: e.Dir(), origin: e.Origin()}
	if e != nil {
		for k, v := range e.vars {
			c.vars[k] = v
		}
	}
	c.vars[name] = value
	return c
}

// NotSetError is a variable the thread needed and its environment lacks.
type NotSetError struct {
	Name string
	// Origin is the Env's origin, "" when not known.
	Origin string
}

func (err *NotSetError) Error() string {
	if err.Origin == "" {
		return fmt.Sprintf("environment variable %q is not set", err.Name)
	}
	return fmt.Sprintf("environment variable %q is not set (the thread's environment is %s)", err.Name, err.Origin)
}

// Explain returns err with the origin of e after the message of the
// NotSetError it wraps, e.g. `config.providers.x.apiKey: environment
// variable "K" is not set (the thread's environment is that of …)`. An
// error with no NotSetError, or one already explained, comes back as it
// is; the result still wraps err.
func (e *Env) Explain(err error) error {
	var ns *NotSetError
	if e.Origin() == "" || !errors.As(err, &ns) || ns.Origin != "" {
		return err
	}
	var done *explained
	if errors.As(err, &done) {
		return err
	}
	withOrigin := &NotSetError{Name: ns.Name, Origin: e.Origin()}
	return &explained{msg: strings.Replace(err.Error(), ns.Error(), withOrigin.Error(), 1), err: err}
}

// explained is an error Explain gave the origin: the wrapped message was
// formatted when it was made, so the origin is put into its text.
type explained struct {
	msg string
	err error
}

func (e *explained) Error() string { return e.msg }
func (e *explained) Unwrap() error { return e.err }

// Carrier is implemented by a workflow host that runs its thread with an
// Env (the executor's run); the runtimes and agents find it with Of.
type Carrier interface {
	ThreadEnv() *Env
}

// Of returns the Env host carries, nil when it carries none (a test's
// host, which then stands for the engine host's own environment).
func Of(host any) *Env {
	if c, ok := host.(Carrier); ok {
		return c.ThreadEnv()
	}
	return nil
}

// LookPath finds an executable as a shell of this environment would: a
// name with a slash is taken as it is (relative to Dir), any other is
// searched for in the environment's PATH, not the engine host's. The
// error is an *exec.Error, as exec.LookPath's.
func (e *Env) LookPath(file string) (string, error) {
	if strings.Contains(file, "/") {
		return e.Abs(file), nil
	}
	for _, dir := range filepath.SplitList(e.Getenv("PATH")) {
		if dir == "" {
			dir = "." // POSIX: an empty entry is the working directory
		}
		p := e.Abs(filepath.Join(dir, file))
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode().Perm()&0o111 != 0 {
			return p, nil
		}
	}
	return "", &exec.Error{Name: file, Err: exec.ErrNotFound}
}

// Abs resolves a relative path against Dir; with no Dir, or for an
// absolute path, it returns p unchanged (the host's own directory then
// applies).
func (e *Env) Abs(p string) string {
	if filepath.IsAbs(p) || e.Dir() == "" {
		return p
	}
	return filepath.Join(e.Dir(), p)
}
