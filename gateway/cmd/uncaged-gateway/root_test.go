package main

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/uncaged/workflow/shared/envflag"
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

// Every variable serve reads is a flag's: the flag wins, then the first
// variable set (the shared secret keeps its original name as a second),
// then the default; a secret's -file flag wins over its value.
func TestServeSecretsFromFlagsAndEnvironment(t *testing.T) {
	t.Setenv("WORKFLOW_DASHBOARD_SECRET", "old")
	t.Setenv("UNCAGED_GATEWAY_METRICS_TOKEN", "m1")
	t.Setenv("UNCAGED_GATEWAY_LISTEN", "127.0.0.1:1")
	cmd := serveCmd()
	if err := cmd.ParseFlags([]string{"--listen", "127.0.0.1:2"}); err != nil {
		t.Fatal(err)
	}
	if err := fromEnv(cmd, nil); err != nil {
		t.Fatal(err)
	}
	get := func(name string) string { v, _ := cmd.Flags().GetString(name); return v }
	if get("shared-secret") != "old" || get("metrics-token") != "m1" || get("listen") != "127.0.0.1:2" {
		t.Fatalf("shared-secret %q, metrics-token %q, listen %q", get("shared-secret"), get("metrics-token"), get("listen"))
	}

	t.Setenv("UNCAGED_GATEWAY_SHARED_SECRET", "new")
	cmd = serveCmd()
	_ = cmd.ParseFlags(nil)
	if err := fromEnv(cmd, nil); err != nil || get("shared-secret") != "new" {
		t.Fatalf("shared-secret %q (%v), want the new name's", get("shared-secret"), err)
	}

	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte("from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := envflag.ReadSecret("m1", file); err != nil || got != "from-file" {
		t.Fatalf("ReadSecret = %q, %v", got, err)
	}
}

// The signing key comes from --key-file, else --key or UNCAGED_GATEWAY_KEY.
func TestKeyFlags(t *testing.T) {
	// token create records the token: in this test's store, never in the
	// default one under the home directory of whoever runs the tests.
	t.Setenv("UNCAGED_GATEWAY_DATA_DIR", t.TempDir())
	t.Setenv("UNCAGED_GATEWAY_KEY", strings.Repeat("e", 32))
	root := newRoot()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetArgs([]string{"token", "create", "--dashboard"})
	if err := root.Execute(); err != nil {
		t.Fatalf("key from the variable: %v", err)
	}
	t.Setenv("UNCAGED_GATEWAY_KEY", "")
	root = newRoot()
	root.SetArgs([]string{"token", "create", "--dashboard"})
	if err := root.Execute(); err == nil || !strings.Contains(err.Error(), "no signing key") {
		t.Fatalf("no key: %v", err)
	}
}
