package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/uncaged/workflow/shared/testkit"
)

// TestSecretCannotTakeATokenBoundName runs a gateway that also accepts a
// shared secret, a connector with a token bound to alpha, and a second
// `connect --name alpha` with only the secret: the gateway refuses the
// second (409, saying why, which the connector prints) and every
// dashboard request for alpha reaches the token's machine.
func TestSecretCannotTakeATokenBoundName(t *testing.T) {
	t.Parallel()
	const secret = "a-shared-secret-for-simple-setups"
	g := newGateway(t, []string{"WORKFLOW_DASHBOARD_SECRET=" + secret}, 0)
	g.connector("alpha", map[string]string{"slow": "slow.esm.js"})

	cmd := exec.Command(filepath.Join(binDir, "uncaged-workflow"), "connect", "--name", "alpha", "--gateway", "http://"+g.front)
	cmd.Env = append(os.Environ(), "UNCAGED_WORKFLOW_STORAGE_ROOT="+engineRoot(t), "UNCAGED_WORKFLOW_TOKEN=", "WORKFLOW_DASHBOARD_SECRET="+secret)
	intruder := launch(t, cmd, "the intruder")
	out := intruder.logs
	testkit.WaitUntil(t, "the intruder to be refused", func() bool {
		return strings.Contains(out.String(), `gateway refused the connection (409): connector name "alpha" is held by a token-bound connector`)
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
