package requestid

import (
	"strings"
	"testing"
)

func TestValid(t *testing.T) {
	t.Parallel()
	good := []string{"a", "abc-DEF_0.9", strings.Repeat("x", MaxLen), "01HZX3Q5V6Y7Z8"}
	for _, id := range good {
		if !Valid(id) {
			t.Errorf("Valid(%q) = false", id)
		}
	}
	bad := []string{"", strings.Repeat("x", MaxLen+1), "a b", "a\nb", `a"b`, "a/b", "ä", "a\x00", "id=1;x", "a,b"}
	for _, id := range bad {
		if Valid(id) {
			t.Errorf("Valid(%q) = true", id)
		}
	}
}

func TestFromKeepsSaneIDsAndReplacesOthers(t *testing.T) {
	t.Parallel()
	if got := From("keep-me.1"); got != "keep-me.1" {
		t.Fatalf("From kept %q", got)
	}
	for _, in := range []string{"", "bad id", strings.Repeat("y", 65), "evil\r\nX-Injected: 1"} {
		got := From(in)
		if got == in || !Valid(got) || len(got) != 32 {
			t.Errorf("From(%q) = %q, want a fresh 32-char id", in, got)
		}
	}
	if a, b := New(), New(); a == b {
		t.Fatal("two New ids are equal")
	}
}

func FuzzFrom(f *testing.F) {
	for _, s := range []string{"", "abc", "a b", strings.Repeat("z", 70)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		out := From(in)
		if !Valid(out) {
			t.Fatalf("From(%q) = %q is not valid", in, out)
		}
		if Valid(in) != (out == in) {
			t.Fatalf("From(%q) = %q: kept %v, valid %v", in, out, out == in, Valid(in))
		}
	})
}
