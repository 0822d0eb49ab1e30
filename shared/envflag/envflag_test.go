package envflag

import (
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

func TestPrecedence(t *testing.T) {
	t.Parallel()
	env := map[string]string{"NEW": "", "OLD": "from-old", "N": "7", "BAD": "x"}
	getenv := func(k string) string { return env[k] }
	newSet := func() (*pflag.FlagSet, *string, *int) {
		fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
		s := fs.String("root", "default", "")
		n := fs.Int("n", 1, "")
		fs.String("plain", "p", "")
		Bind(fs, "root", "NEW", "OLD")
		Bind(fs, "n", "N")
		return fs, s, n
	}

	// The flag wins over every variable.
	fs, s, n := newSet()
	if err := fs.Parse([]string{"--root", "from-flag"}); err != nil {
		t.Fatal(err)
	}
	if err := Apply(fs, getenv); err != nil {
		t.Fatal(err)
	}
	if *s != "from-flag" || *n != 7 {
		t.Fatalf("root=%q n=%d, want from-flag and 7", *s, *n)
	}

	// An empty first name falls through to the legacy one.
	env["NEW"] = ""
	fs, s, _ = newSet()
	_ = fs.Parse(nil)
	if err := Apply(fs, getenv); err != nil || *s != "from-old" {
		t.Fatalf("root=%q (%v), want from-old", *s, err)
	}
	env["NEW"] = "from-new"
	fs, s, _ = newSet()
	_ = fs.Parse(nil)
	if err := Apply(fs, getenv); err != nil || *s != "from-new" {
		t.Fatalf("root=%q (%v), want from-new", *s, err)
	}

	// Nothing set: the default stays.
	fs, s, _ = newSet()
	_ = fs.Parse(nil)
	if err := Apply(fs, func(string) string { return "" }); err != nil || *s != "default" {
		t.Fatalf("root=%q (%v), want default", *s, err)
	}

	// A value the flag cannot parse names the variable.
	fs, _, _ = newSet()
	Bind(fs, "n", "BAD")
	_ = fs.Parse(nil)
	if err := Apply(fs, getenv); err == nil || !strings.Contains(err.Error(), `BAD="x"`) {
		t.Fatalf("err = %v, want it to name BAD", err)
	}
}
