package e2e

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/uncaged/workflow/shared/testkit"
)

// TestSecretCannotTakeATokenBoundName runs a gateway that also accepts a
// shared secret, a connector with a token bound to alpha, and a second
// `connect --name alpha` with only the secret: the gateway refuses the
// second (409, saying why, which the connector prints) and every
// dashboard request for alpha reaches the token's machine.
func TestSecretCannotTakeATokenBoundName(t *testing.T) {
	const secret = "a-shared-secret-for-simple-setups"
	g := &gatewayEnv{t: t, addr: freePort(t), client: &http.Client{Timeout: 60 * time.Second}}
	g.front = g.addr
	g.key = gwCLI(t, "", "key", "generate")
	g.dash = gwCLI(t, g.key, "token", "create", "--dashboard")
	g.gw = startProc(t, []string{"UNCAGED_GATEWAY_KEY=" + g.key, "WORKFLOW_DASHBOARD_SECRET=" + secret},
		"uncaged-gateway", "serve", "--listen", g.addr, "--heartbeat", "1s")
	waitFor(t, "the gateway to listen", func() bool {
		resp, err := http.Get("http://" + g.addr + "/healthz")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil && resp.StatusCode == 200
	})
	g.connector("alpha", map[string]string{"slow": "slow.esm.js"})

	// The intruder's output is read while it runs: a buffer safe for that.
	var out testkit.Buffer
	intruder := exec.Command(filepath.Join(binDir, "uncaged-workflow"), "connect", "--name", "alpha", "--gateway", "http://"+g.front)
	intruder.Env = append(os.Environ(), "UNCAGED_WORKFLOW_STORAGE_ROOT="+engineRoot(t), "UNCAGED_WORKFLOW_TOKEN=", "WORKFLOW_DASHBOARD_SECRET="+secret)
	intruder.Stdout, intruder.Stderr = &out, &out
	if err := intruder.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		intruder.Process.Signal(syscall.SIGKILL)
		intruder.Wait()
		if t.Failed() {
			t.Logf("the intruder's output:\n%s", out.String())
		}
	})
	waitFor(t, "the intruder to be refused", func() bool {
		return strings.Contains(out.String(), `gateway refused the connection (409): {"error":"connector name \"alpha\" is held by a token-bound connector`)
	})
	if strings.Contains(out.String(), "connected to") {
		t.Fatalf("the intruder connected:\n%s", out.String())
	}
	for i := range 20 {
		if resp, body := g.do("GET", "/api/clients/alpha/workflows", ""); resp.StatusCode != 200 || !strings.Contains(body, `"name":"slow"`) {
			t.Fatalf("request %d did not reach alpha's machine: %d %s", i, resp.StatusCode, body)
		}
	}
	if eps := g.endpoints(); eps["alpha"] != "online" {
		t.Fatalf("endpoints: %v", eps)
	}
}
