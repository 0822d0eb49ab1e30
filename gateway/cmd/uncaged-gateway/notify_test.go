package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Bad webhook flags stop serve before it listens, with an error naming
// the flag and never quoting a URL (it may be a secret).
func TestServeRefusesBadNotifyFlags(t *testing.T) {
	t.Setenv("UNCAGED_GATEWAY_KEY", strings.Repeat("k", 32))
	dir := t.TempDir()
	secret := filepath.Join(dir, "secret")
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(secret, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	hook := "https://hooks.example.com/services/SECRET-PATH"
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--notify-url", "hooks.example.com/services/SECRET-PATH", "--notify-secret-file", secret}, "--notify-url: receiver 1"},
		{[]string{"--notify-url", "ftp://hooks.example.com/SECRET-PATH", "--notify-secret-file", secret}, "--notify-url: receiver 1 (ftp://hooks.example.com)"},
		{[]string{"--notify-url", hook, "--notify-url", hook, "--notify-secret-file", secret}, "given twice"},
		{[]string{"--notify-url", hook, "--notify-on", "completed,done", "--notify-secret-file", secret}, `--notify-on: unknown status "done"`},
		{[]string{"--notify-url", hook, "--notify-secret-file", filepath.Join(dir, "none")}, "--notify-secret-file:"},
		{[]string{"--notify-url", hook, "--notify-secret-file", empty}, "--notify-secret-file:"},
		{[]string{"--notify-url", hook}, "needs --notify-secret-file"},
		{[]string{"--notify-url", hook, "--notify-format", "teams", "--notify-secret-file", secret}, "--notify-format: unknown format"},
		{[]string{"--notify-on", "completed"}, "need --notify-url"},
		{[]string{"--notify-url", hook, "--notify-secret-file", secret, "--public-url", "gw.example.com"}, "--public-url:"},
	} {
		cmd := serveCmd()
		cmd.SetOut(io.Discard)
		cmd.SetErr(io.Discard)
		cmd.SetArgs(append([]string{"--listen", "127.0.0.1:0", "--data-dir", t.TempDir()}, c.args...))
		err := cmd.Execute()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: err = %v, want %q", c.args, err, c.want)
			continue
		}
		if strings.Contains(err.Error(), "SECRET-PATH") || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%q: the error quotes a secret: %v", c.args, err)
		}
	}
}

// A Slack receiver needs no secret: Slack cannot verify one.
func TestNotifyFlagsSlackWithoutSecret(t *testing.T) {
	n := notifyFlags{urls: []string{"https://hooks.slack.com/services/T/B/X"}, format: "slack", publicURL: "https://gw.example.com/"}
	cfg, err := n.config()
	if err != nil || cfg == nil || cfg.Secret != nil || cfg.PublicURL != "https://gw.example.com" || len(cfg.On) != 3 {
		t.Fatalf("%+v %v", cfg, err)
	}
	if cfg, err := (&notifyFlags{format: "json"}).config(); err != nil || cfg != nil {
		t.Fatalf("no receiver: %+v %v", cfg, err)
	}
}
