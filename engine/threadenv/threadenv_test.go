package threadenv

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestNewKeepsTheLastOfEachNameAndSkipsMalformedEntries(t *testing.T) {
	t.Parallel()
	e := New([]string{"A=1", "B=x=y", "A=2", "noequals", "=C", "EMPTY="}, "/work", "that of a test")
	if got := e.Environ(); !slices.Equal(got, []string{"A=2", "B=x=y", "EMPTY="}) {
		t.Fatalf("Environ = %q", got)
	}
	if v, ok := e.Lookup("EMPTY"); !ok || v != "" {
		t.Fatalf("Lookup(EMPTY) = %q, %v; want set and empty", v, ok)
	}
	if _, ok := e.Lookup("noequals"); ok {
		t.Fatal("an entry without = became a variable")
	}
	if e.Dir() != "/work" || e.Origin() != "that of a test" {
		t.Fatalf("Dir %q, Origin %q", e.Dir(), e.Origin())
	}
}

func TestNilEnvIsEmpty(t *testing.T) {
	t.Parallel()
	var e *Env
	if e.Getenv("PATH") != "" || e.Environ() == nil || len(e.Environ()) != 0 || e.Names() != nil || e.Dir() != "" || e.Origin() != "" {
		t.Fatal("the nil Env is not empty")
	}
	if got := e.With("A", "1").Environ(); !slices.Equal(got, []string{"A=1"}) {
		t.Fatalf("nil.With = %q", got)
	}
	err := errors.New("x")
	if e.Explain(err) != err {
		t.Fatal("the nil Env explained an error")
	}
}

func TestWithCopies(t *testing.T) {
	t.Parallel()
	e := New([]string{"A=1"}, "/d", "o")
	w := e.With("A", "2").With("B", "3")
	if e.Getenv("A") != "1" || e.Getenv("B") != "" {
		t.Fatal("With changed the original")
	}
	if !slices.Equal(w.Environ(), []string{"A=2", "B=3"}) || w.Dir() != "/d" || w.Origin() != "o" {
		t.Fatalf("With = %q %q %q", w.Environ(), w.Dir(), w.Origin())
	}
}

func TestFromGetenvAsksForTheProcessNames(t *testing.T) {
	t.Parallel()
	e := FromGetenv(func(name string) string {
		if name == "PATH" {
			return "/only"
		}
		return ""
	}, "", "the host's own")
	if !slices.Equal(e.Environ(), []string{"PATH=/only"}) {
		t.Fatalf("Environ = %q", e.Environ())
	}
}

func TestCheckRefusesWhatNoProcessCouldGet(t *testing.T) {
	t.Parallel()
	if err := Check([]string{"A=1", "B=", "C=x=y"}, "/abs"); err != nil {
		t.Fatalf("a good environment: %v", err)
	}
	if err := Check(nil, ""); err != nil {
		t.Fatalf("an empty one: %v", err)
	}
	for _, tc := range []struct {
		env  []string
		dir  string
		want string
	}{
		{[]string{"A=1", "noequals"}, "", "environment entry 1 is not NAME=value"},
		{[]string{"=value"}, "", "environment entry 0 is not NAME=value"},
		{[]string{"KEY=se\x00cret"}, "", `environment variable "KEY" holds a NUL byte`},
		{nil, "relative/dir", `working directory "relative/dir" is not an absolute path`},
	} {
		err := Check(tc.env, tc.dir)
		if err == nil || err.Error() != tc.want {
			t.Errorf("Check(%q, %q) = %v, want %q", tc.env, tc.dir, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "cret") {
			t.Errorf("the error shows a value: %v", err)
		}
	}
}

func TestExplainNamesTheOrigin(t *testing.T) {
	t.Parallel()
	e := New(nil, "/", "that of `uncaged-workflow run` in /home/me, pid 42")
	base := fmt.Errorf("config.providers.p.apiKey: %w", &NotSetError{Name: "KEY"})
	got := e.Explain(base)
	want := "config.providers.p.apiKey: environment variable \"KEY\" is not set (the thread's environment is that of `uncaged-workflow run` in /home/me, pid 42)"
	if got.Error() != want {
		t.Fatalf("Explain = %q\nwant      %q", got, want)
	}
	if !errors.Is(got, base) {
		t.Fatal("the explained error does not wrap the original")
	}
	if again := e.Explain(fmt.Errorf("role: %w", got)); strings.Count(again.Error(), "the thread's environment") != 1 {
		t.Fatalf("explained twice: %q", again)
	}
	other := errors.New("something else")
	if e.Explain(other) != other || e.Explain(nil) != nil {
		t.Fatal("Explain changed an error with no NotSetError")
	}
}

func TestLookPathSearchesTheEnvironmentsPATH(t *testing.T) {
	t.Parallel()
	bin := t.TempDir()
	tool := filepath.Join(bin, "thread-only-tool")
	if err := os.WriteFile(tool, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "not-executable"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	e := New([]string{"PATH=/nonexistent:" + bin}, "/work", "")
	if p, err := e.LookPath("thread-only-tool"); err != nil || p != tool {
		t.Fatalf("LookPath = %q, %v; want %s", p, err, tool)
	}
	for _, name := range []string{"not-executable", "no-such-tool"} {
		_, err := e.LookPath(name)
		var ee *exec.Error
		if !errors.As(err, &ee) || !errors.Is(err, exec.ErrNotFound) {
			t.Errorf("LookPath(%s) = %v, want exec.ErrNotFound", name, err)
		}
	}
	if p, err := e.LookPath("./script.sh"); err != nil || p != "/work/script.sh" {
		t.Fatalf("a path with a slash = %q, %v; want it against Dir", p, err)
	}
	// A relative PATH entry is relative to Dir.
	rel := New([]string{"PATH=" + filepath.Base(bin)}, filepath.Dir(bin), "")
	if p, err := rel.LookPath("thread-only-tool"); err != nil || p != tool {
		t.Fatalf("relative PATH entry: %q, %v", p, err)
	}
}

func TestAbs(t *testing.T) {
	t.Parallel()
	e := New(nil, "/work", "")
	if e.Abs("a/b") != "/work/a/b" || e.Abs("/x") != "/x" {
		t.Fatalf("Abs: %q %q", e.Abs("a/b"), e.Abs("/x"))
	}
	var none *Env
	if none.Abs("a") != "a" {
		t.Fatal("with no Dir, Abs changed a relative path")
	}
}

type carrier struct{ e *Env }

func (c carrier) ThreadEnv() *Env { return c.e }

func TestOf(t *testing.T) {
	t.Parallel()
	e := New([]string{"A=1"}, "", "")
	if Of(carrier{e}) != e || Of(struct{}{}) != nil || Of(nil) != nil {
		t.Fatal("Of")
	}
}
