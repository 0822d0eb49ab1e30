package e2e

import (
	"encoding/json"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
)

// TestThroughCaddy runs the same flows as TestThroughNginx with Caddy in
// front of the gateway, configured with deploy/caddy/Caddyfile exactly as
// docker-compose.yml uses it: WebSocket tunnels, live streams unbuffered,
// each client's own address seen by the gateway, which trusts Caddy.
func TestThroughCaddy(t *testing.T) {
	t.Parallel()
	g := startGateway(t, "--trusted-proxy", "127.0.0.1")
	g.front = startCaddy(t, g.addr)
	twoMachines(t, g)
	clientAddressesThroughProxy(t, g)
}

// startCaddy runs Caddy on a free port in front of upstream with the
// repository's Caddyfile and returns its address.
func startCaddy(t *testing.T, upstream string) string {
	t.Helper()
	host, port, err := net.SplitHostPort(upstream)
	if err != nil {
		t.Fatal(err)
	}
	return runCaddy(t, "../deploy/caddy/Caddyfile", "UNCAGED_GATEWAY_UPSTREAM="+host, "UNCAGED_GATEWAY_PORT="+port)
}

// runCaddy runs Caddy on a free port with caddyfile and the variables in
// env, waits until the gateway's /healthz answers through it, and returns
// its address.
func runCaddy(t *testing.T, caddyfile string, env ...string) string {
	t.Helper()
	bin := requireProxy(t, "caddy", "apt-get install caddy")
	caddyfile, err := filepath.Abs(caddyfile)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	addr := freePort(t)
	// The Caddyfile's own knobs, as compose sets them; a plain-HTTP site
	// address keeps Caddy from issuing certificates.
	env = append(append(os.Environ(), "HOME="+dir, "XDG_DATA_HOME="+dir, "XDG_CONFIG_HOME="+dir,
		"UNCAGED_DOMAIN=http://"+addr), env...)
	adapt := exec.Command(bin, "adapt", "--config", caddyfile, "--adapter", "caddyfile")
	adapt.Env = env
	out, err := adapt.Output()
	if err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			t.Fatalf("caddy adapt %s: %v\n%s", caddyfile, err, exit.Stderr)
		}
		t.Fatalf("caddy adapt %s: %v", caddyfile, err)
	}
	// Turn off the admin endpoint only: its fixed port would clash with any
	// other Caddy on the machine. Everything else is the Caddyfile's.
	var cfg map[string]any
	if err := json.Unmarshal(out, &cfg); err != nil {
		t.Fatal(err)
	}
	cfg["admin"] = map[string]any{"disabled": true}
	b, _ := json.Marshal(cfg)
	confPath := filepath.Join(dir, "caddy.json")
	if err := os.WriteFile(confPath, b, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "run", "--config", confPath)
	cmd.Env = env
	runProxy(t, "caddy", cmd, syscall.SIGTERM, addr, nil)
	return addr
}
