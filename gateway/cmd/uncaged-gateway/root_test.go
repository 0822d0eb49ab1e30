package main

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/uncaged/workflow/shared/logging"
)

// The root's --log-level and --log-format, or UNCAGED_GATEWAY_LOG_LEVEL
// and _FORMAT, decide how serve logs; the flag wins.
func TestLogFlags(t *testing.T) {
	t.Cleanup(func() { logOptions = logging.Options{} })
	run := func(args ...string) error {
		root := newRoot()
		root.SetOut(&bytes.Buffer{})
		root.SetArgs(append(args, "key", "generate"))
		return root.Execute()
	}
	t.Setenv("UNCAGED_GATEWAY_LOG_LEVEL", "warn")
	if err := run("--log-format", "text"); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	l := logOptions.New(&buf)
	l.Info("dropped")
	l.Warn("kept", "k", "v")
	if got := buf.String(); !strings.Contains(got, "level=WARN msg=kept k=v") || strings.Contains(got, "dropped") {
		t.Fatalf("got %q, want only the warning, as text", got)
	}
	if err := run("--log-level", "debug"); err != nil || logOptions.Level != slog.LevelDebug {
		t.Fatalf("level %v (%v), want the flag's debug", logOptions.Level, err)
	}
	t.Setenv("UNCAGED_GATEWAY_LOG_FORMAT", "xml")
	if err := run(); err == nil || !strings.Contains(err.Error(), "UNCAGED_GATEWAY_LOG_FORMAT") {
		t.Fatalf("a bad variable: %v", err)
	}
}
