package membudget

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestParseSize(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want int64
	}{
		{"512MiB", 512 << 20},
		{" 1GiB ", 1 << 30},
		{"1 GiB", 1 << 30},
		{"2048KiB", 2 << 20},
		{"1048576", 1 << 20},
		{"1048576B", 1 << 20},
		{"1TiB", 1 << 40},
		{"off", Off},
		{"OFF", Off},
	} {
		got, err := ParseSize(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
	for _, in := range []string{"", "512", "512MB", "1.5GiB", "-1GiB", "GiB", "99999999999TiB", "lots"} {
		if _, err := ParseSize(in); err == nil {
			t.Errorf("ParseSize(%q) accepted", in)
		}
	}
	if _, err := ParseSize("512"); err == nil || !strings.Contains(err.Error(), "write 512MiB") {
		t.Errorf("a bare small number: %v", err)
	}
}

func TestFormatSize(t *testing.T) {
	t.Parallel()
	for n, want := range map[int64]string{512 << 20: "512MiB", 1 << 30: "1GiB", 3 << 29: "1.5GiB", 100: "100B", 1536: "1.5KiB"} {
		if got := FormatSize(n); got != want {
			t.Errorf("FormatSize(%d) = %q, want %q", n, got, want)
		}
		if n >= MinBudget && !strings.Contains(want, ".") {
			if back, err := ParseSize(FormatSize(n)); err != nil || back != n {
				t.Errorf("ParseSize(FormatSize(%d)) = %d, %v", n, back, err)
			}
		}
	}
}

func TestResolve(t *testing.T) {
	t.Parallel()
	defer ClearOverride()
	if got := Resolve(""); got != DefaultBudget {
		t.Fatalf("Resolve(\"\") = %d", got)
	}
	if got := Resolve("64MiB"); got != 64<<20 {
		t.Fatalf("Resolve(64MiB) = %d", got)
	}
	if got := Resolve("off"); got != Off {
		t.Fatalf("Resolve(off) = %d", got)
	}
	SetOverride(32 << 20)
	if got := Resolve("64MiB"); got != 32<<20 {
		t.Fatalf("the host's flag lost to workflow.yaml: %d", got)
	}
}

func TestExceededErrorSaysWhatAndHow(t *testing.T) {
	t.Parallel()
	err := fmt.Errorf("workflow run failed: %w", &ExceededError{Budget: 64 << 20, Held: 70 << 20})
	if !errors.Is(err, ErrExceeded) {
		t.Fatal("errors.Is(ErrExceeded) is false")
	}
	for _, want := range []string{"memory budget exceeded", "about 70MiB", "budget of 64MiB", "memoryBudget: 128MiB", "--memory-budget 128MiB", `"off"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q lacks %q", err, want)
		}
	}
	// Every summary names the thread's budget, whichever limit bound.
	for _, e := range []*ExceededError{
		{Budget: 512 << 20, Held: 70 << 20},
		{Budget: 512 << 20, Held: 300 << 20, HostLimit: 400 << 20},
		{Budget: 512 << 20, Held: 150 << 20, HostLimit: 400 << 20, Share: true},
		{Budget: 512 << 20, Held: 40 << 20, HostLimit: 600 << 20, Burst: 130 << 20},
		{Budget: 512 << 20, Held: 40 << 20, HostLimit: 600 << 20, Share: true, Burst: 130 << 20},
	} {
		if msg := e.Error(); !strings.Contains(msg, "512MiB") {
			t.Errorf("%+v: %q does not name the thread's budget", *e, msg)
		}
	}
	if msg := (&ExceededError{Budget: Off, Held: 40 << 20, HostLimit: 600 << 20, Burst: 130 << 20}).Error(); !strings.Contains(msg, "no memory budget of its own") {
		t.Errorf("a thread without a budget: %q", msg)
	}
	host := (&ExceededError{Budget: Off, Held: 300 << 20, HostLimit: 400 << 20}).Error()
	for _, want := range []string{"limit of 400MiB", "about 300MiB", "GOMEMLIMIT", "--max-threads"} {
		if !strings.Contains(host, want) {
			t.Errorf("%q lacks %q", host, want)
		}
	}
}
