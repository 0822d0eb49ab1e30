// Package envflag binds command-line flags to environment variables, so
// each binary declares once, next to the flag, which variables may set it,
// and the configuration docs can list them from the command tree.
//
// Precedence is: the flag given on the command line, then the first of the
// flag's variables that is set to a non-empty value, then the flag's
// default. An empty variable counts as unset, as it always has for these
// binaries, so `VAR= cmd` cannot blank a default.
package envflag

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/pflag"
)

// Annotation is the flag annotation key holding a flag's variable names,
// first name first. Bind also appends "(env NAME, ...)" to the flag's help.
const Annotation = "env"

// Bind records that flag name may also be set from the variables envs (the
// first set one wins; later names are kept for compatibility). It panics
// when the flag does not exist: that is a mistake in the command's code.
func Bind(fs *pflag.FlagSet, name string, envs ...string) {
	if err := fs.SetAnnotation(name, Annotation, envs); err != nil {
		panic(fmt.Sprintf("envflag: %v", err))
	}
	// The help names the variables, so they are written down once, here.
	f := fs.Lookup(name)
	f.Usage += " (env " + strings.Join(envs, ", ") + ")"
}

// Names returns the variables bound to f, or nil.
func Names(f *pflag.Flag) []string { return f.Annotations[Annotation] }

// Lookup returns the value of the first of f's variables that getenv
// reports non-empty, and that variable's name.
func Lookup(f *pflag.Flag, getenv func(string) string) (value, env string) {
	for _, env := range Names(f) {
		if v := getenv(env); v != "" {
			return v, env
		}
	}
	return "", ""
}

// Apply sets every flag in fs that has variables and was not given on the
// command line from the first of its variables that is set, parsed as the
// flag would parse it. Call it once the command line is parsed (in a
// PreRunE, or at the start of RunE); fs should be the command's Flags(),
// which then include the inherited persistent flags. A flag Apply set
// counts as changed, so calling it again changes nothing.
func Apply(fs *pflag.FlagSet, getenv func(string) string) error {
	var err error
	fs.VisitAll(func(f *pflag.Flag) {
		if err == nil {
			err = apply(fs, f, getenv)
		}
	})
	return err
}

// ApplyFlags is Apply for the named flags only.
func ApplyFlags(fs *pflag.FlagSet, getenv func(string) string, names ...string) error {
	for _, name := range names {
		f := fs.Lookup(name)
		if f == nil {
			return fmt.Errorf("envflag: no flag --%s", name)
		}
		if err := apply(fs, f, getenv); err != nil {
			return err
		}
	}
	return nil
}

func apply(fs *pflag.FlagSet, f *pflag.Flag, getenv func(string) string) error {
	if f.Changed {
		return nil
	}
	v, env := Lookup(f, getenv)
	if env == "" {
		return nil
	}
	if err := fs.Set(f.Name, v); err != nil {
		return fmt.Errorf("%s=%q: %w", env, v, err)
	}
	return nil
}

// ReadSecret returns the contents of file, trimmed of surrounding
// whitespace (the newline editors and `echo` add), or value when file is
// empty. Secrets come in pairs of flags, --x and --x-file, because a file
// (a Docker or Kubernetes secret) keeps the value out of the process list
// and the environment.
func ReadSecret(value, file string) (string, error) {
	if file == "" {
		return value, nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}
