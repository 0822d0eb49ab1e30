package registry

import (
	"strings"
	"testing"
)

func TestConfigMemoryBudget(t *testing.T) {
	t.Parallel()
	const base = "workflows: {}\nconfig: {maxDepth: 1, providers: {}, models: {}"
	for in, want := range map[string]string{
		base + "}\n":                             "",
		base + ", memoryBudget: 256MiB}\n":       "256MiB",
		base + ", memoryBudget: off}\n":          "off",
		base + ", memoryBudget: 1073741824}\n":   "1073741824",
		base + ", memoryBudget: 8589934592}\n":   "8589934592",
		base + ", memoryBudget: '2 GiB'}\n":      "2 GiB",
		base + ", memoryBudget: \"1048576B\"}\n": "1048576B",
	} {
		r, err := Parse([]byte(in))
		if err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		if got := r.Config().MemoryBudget; got != want {
			t.Errorf("%s: memoryBudget %q, want %q", in, got, want)
		}
	}
	for in, want := range map[string]string{
		base + ", memoryBudget: 512}\n":    "write 512MiB",
		base + ", memoryBudget: 512MB}\n":  "unit B, KiB, MiB, GiB or TiB",
		base + ", memoryBudget: 1.5}\n":    "not a whole number",
		base + ", memoryBudget: -1}\n":     "not a whole number",
		base + ", memoryBudget: [1]}\n":    "must be a size",
		base + ", memoryBudget: true}\n":   "must be a size",
		base + ", memoryBudget: lots}\n":   "config.memoryBudget",
		base + ", memoryBudget: '0GiB'}\n": "below the minimum",
	} {
		_, err := Parse([]byte(in))
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "memoryBudget") {
			t.Errorf("%s: %v, want an error with %q", in, err, want)
		}
	}
}

// TestSetConfigKeepsMemoryBudget: setup rewrites the config section, and
// a budget written by hand must survive it, as a number when it was one.
func TestSetConfigKeepsMemoryBudget(t *testing.T) {
	t.Parallel()
	for _, budget := range []string{"768MiB", "off", "1073741824"} {
		r := New()
		if err := r.SetConfig(Config{MaxDepth: 3, Providers: map[string]Provider{}, Models: map[string]string{}, MemoryBudget: budget}); err != nil {
			t.Fatal(err)
		}
		b, err := r.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if budget == "1073741824" && !strings.Contains(string(b), `memoryBudget": 1073741824`+"\n") {
			t.Fatalf("a number of bytes became:\n%s", b)
		}
		back, err := Parse(b)
		if err != nil || back.Config().MemoryBudget != budget {
			t.Fatalf("%s: round trip gave %+v, %v:\n%s", budget, back.Config(), err, b)
		}
	}
	r := New()
	if err := r.SetConfig(Config{MaxDepth: 3, Providers: map[string]Provider{}, Models: map[string]string{}}); err != nil {
		t.Fatal(err)
	}
	if b, _ := r.Marshal(); strings.Contains(string(b), "memoryBudget") {
		t.Fatalf("an unset budget is written:\n%s", b)
	}
}
