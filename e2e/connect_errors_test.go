package e2e

import (
	"encoding/pem"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/uncaged/workflow/shared/testkit"
)

// startConnect runs `uncaged-workflow connect --name laptop --gateway
// gateway` on root with env added to its environment.
func startConnect(t *testing.T, root, gateway string, env []string, extra ...string) *proc {
	t.Helper()
	cmd := exec.Command(filepath.Join(binDir, "uncaged-workflow"), append([]string{"connect", "--name", "laptop", "--gateway", gateway}, extra...)...)
	cmd.Env = append(append(os.Environ(), "UNCAGED_WORKFLOW_STORAGE_ROOT="+root, "UNCAGED_WORKFLOW_TOKEN=", "WORKFLOW_DASHBOARD_SECRET="), env...)
	return launch(t, cmd, "connect to "+gateway)
}

// exitCode waits for p to stop by itself and returns its exit code.
func (p *proc) exitCode(t *testing.T) int {
	t.Helper()
	testkit.WaitUntil(t, "connect to stop by itself", p.exited)
	var ee *exec.ExitError
	if errors.As(p.exit, &ee) {
		return ee.ExitCode()
	}
	if p.exit != nil {
		t.Fatalf("connect: %v", p.exit)
	}
	return 0
}

// connectGivesUp runs connect against gateway and checks that it stops by
// itself with code, having said every one of want; `status` then shows
// why. It returns connect's output.
func connectGivesUp(t *testing.T, gateway string, env []string, code int, want ...string) string {
	t.Helper()
	root := engineRoot(t)
	p := startConnect(t, root, gateway, env)
	if got := p.exitCode(t); got != code {
		t.Fatalf("connect to %s exited %d, want %d:\n%s", gateway, got, code, p.logs.String())
	}
	out := p.logs.String()
	for _, w := range want {
		if !strings.Contains(strings.ToLower(out), strings.ToLower(w)) {
			t.Errorf("connect to %s did not say %q:\n%s", gateway, w, out)
		}
	}
	if strings.Contains(out, "retrying in") {
		t.Errorf("connect to %s retried what cannot succeed:\n%s", gateway, out)
	}
	status := run(t, root, "status").stdout
	if !strings.Contains(status, "gave up (exit ") || !strings.Contains(status, "why: ") {
		t.Errorf("status after connect to %s gave up:\n%s", gateway, status)
	}
	return out
}

// Every retry line says why: the gateway down, an https:// URL for a
// plain-HTTP gateway. The first time in full, a repeat shortened.
func TestConnectSaysWhyItRetries(t *testing.T) {
	t.Parallel()
	g := startGateway(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	for gateway, cause := range map[string]string{
		"http://" + down:    "cannot reach the gateway at " + down + ": connection refused (is it running, and on that port?)",
		"https://" + g.addr: g.addr + " does not speak TLS (an https:// URL for a plain-HTTP port?): use http://",
	} {
		p := startConnect(t, engineRoot(t), gateway, []string{"UNCAGED_WORKFLOW_TOKEN=" + gwCLI(t, g.key, "token", "create", "--connector", "laptop")})
		testkit.WaitUntil(t, "connect to "+gateway+" to retry twice", func() bool { return strings.Count(p.logs.String(), "retrying in ") >= 2 })
		p.stop(syscall.SIGTERM)
		var retries []string
		for _, line := range strings.Split(p.logs.String(), "\n") {
			if strings.HasPrefix(line, "retrying in ") {
				retries = append(retries, line)
			}
		}
		if !strings.Contains(retries[0], "s: "+cause) {
			t.Errorf("%s: first retry line %q lacks the cause %q", gateway, retries[0], cause)
		}
		if !strings.Contains(retries[1], "s (same: "+cause[:20]) {
			t.Errorf("%s: second retry line %q", gateway, retries[1])
		}
	}
}

// What can never succeed ends connect with its exit code and a message
// saying what to change: a URL without a scheme (before any dial), a path
// where the gateway's tunnel is not, a revoked token, a certificate this
// machine does not trust.
func TestConnectStopsOnWhatRetryingCannotFix(t *testing.T) {
	t.Parallel()
	g := startGateway(t)
	token := []string{"UNCAGED_WORKFLOW_TOKEN=" + gwCLI(t, g.key, "token", "create", "--connector", "laptop")}

	connectGivesUp(t, g.addr, token, 10, `gateway URL "`+g.addr+`" has no scheme: write https://`+g.addr, "stopped (exit 10)")

	// A path before the gateway's: its web app (or a proxy) answers with a
	// page, or the gateway with a 404 under /ws/.
	for _, path := range []string{"/dashboard", "/ws"} {
		connectGivesUp(t, "http://"+g.addr+path, token, 13, "check the path", "stopped (exit 13)")
	}

	// A revoked token: the gateway's reason, and whose token it was.
	revoked := gwCLI(t, g.key, "token", "create", "--connector", "laptop")
	gwCLI(t, g.key, "token", "revoke", jti(t, revoked))
	// The running gateway learns of a revocation from its store a moment
	// later; until then it would take the token, and close the tunnel
	// when it learns (which connect retries once, then stops on the 401).
	testkit.WaitUntil(t, "the gateway to know the token is revoked", func() bool {
		req, _ := http.NewRequest("GET", "http://"+g.addr+"/ws/connect?name=laptop", nil)
		req.Header.Set("Authorization", "Bearer "+revoked)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusUnauthorized && strings.Contains(string(body), "revoked")
	})
	connectGivesUp(t, "http://"+g.addr, []string{"UNCAGED_WORKFLOW_TOKEN=" + revoked}, 11,
		`gateway refused the connection (401): token revoked [revoked]; the token is for connector "laptop"`, "uncaged-gateway token create --connector laptop")

	// A TLS proxy in front of the gateway with a self-signed certificate:
	// refused until this machine trusts it (SSL_CERT_FILE), then fine.
	target, _ := url.Parse("http://" + g.addr)
	proxy := httptest.NewTLSServer(httputil.NewSingleHostReverseProxy(target))
	t.Cleanup(proxy.Close)
	connectGivesUp(t, proxy.URL, token, 12, "TLS verification of 127.0.0.1:", "certificate signed by unknown authority", "SSL_CERT_FILE")
	ca := filepath.Join(t.TempDir(), "proxy.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: proxy.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	p := startConnect(t, engineRoot(t), proxy.URL, append(token, "SSL_CERT_FILE="+ca))
	g.waitStatus("laptop", "online")
	if resp, body := g.do("GET", "/api/clients/laptop/workflows", ""); resp.StatusCode != http.StatusOK {
		t.Fatalf("through the trusted proxy: %d %s\n%s", resp.StatusCode, body, p.logs.String())
	}
}
