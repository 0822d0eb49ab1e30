package main

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/uncaged/workflow/gateway/server"
	"github.com/uncaged/workflow/shared/envflag"
)

// A read limit below the tunnel's largest message would drop every busy
// tunnel; serve refuses it before listening.
func TestServeRefusesAReadLimitBelowTheTunnelMessage(t *testing.T) {
	// Serial: running a command sets the package-level logFlags.
	cmd := serveCmd()
	cmd.SetArgs([]string{"--listen", "127.0.0.1:0", "--ws-read-limit", "65536"})
	err := cmd.Execute()
	if err == nil || !strings.Contains(err.Error(), "--ws-read-limit must be at least") {
		t.Fatalf("err = %v", err)
	}
}

// hardeningFlags are the client limits among serve's bound flags.
var hardeningFlags = []string{"body-timeout", "idle-timeout", "max-conns-per-ip", "trusted-proxy"}

// The hardening flags read UNCAGED_GATEWAY_<FLAG> when not given; the
// command line wins, and a bad value names its variable.
func TestServeFlagsFromTheEnvironment(t *testing.T) {
	t.Setenv("UNCAGED_GATEWAY_TRUSTED_PROXY", "10.0.0.0/8, 127.0.0.1")
	t.Setenv("UNCAGED_GATEWAY_BODY_TIMEOUT", "5s")
	t.Setenv("UNCAGED_GATEWAY_MAX_CONNS_PER_IP", "12")
	cmd := serveCmd()
	if err := cmd.ParseFlags([]string{"--body-timeout", "7s"}); err != nil {
		t.Fatal(err)
	}
	if err := envflag.ApplyFlags(cmd.Flags(), os.Getenv, hardeningFlags...); err != nil {
		t.Fatal(err)
	}
	body, _ := cmd.Flags().GetDuration("body-timeout")
	conns, _ := cmd.Flags().GetInt("max-conns-per-ip")
	idle, _ := cmd.Flags().GetDuration("idle-timeout")
	proxies, _ := cmd.Flags().GetStringArray("trusted-proxy")
	if body != 7*time.Second || conns != 12 || idle != server.DefaultIdleTimeout || strings.Join(proxies, "|") != "10.0.0.0/8, 127.0.0.1" {
		t.Fatalf("body %s, conns %d, idle %s, proxies %q", body, conns, idle, proxies)
	}

	t.Setenv("UNCAGED_GATEWAY_IDLE_TIMEOUT", "soon")
	if err := envflag.ApplyFlags(serveCmd().Flags(), os.Getenv, hardeningFlags...); err == nil || !strings.Contains(err.Error(), "UNCAGED_GATEWAY_IDLE_TIMEOUT") {
		t.Fatalf("a bad value: %v", err)
	}
}

func TestServeRefusesATrustedProxyThatIsNoAddress(t *testing.T) {
	t.Setenv("UNCAGED_GATEWAY_KEY", strings.Repeat("k", 32))
	cmd := serveCmd()
	cmd.SetArgs([]string{"--listen", "127.0.0.1:0", "--trusted-proxy", "127.0.0.1", "--trusted-proxy", "nginx"})
	if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), `--trusted-proxy: trusted proxy "nginx"`) {
		t.Fatalf("err = %v", err)
	}
}
