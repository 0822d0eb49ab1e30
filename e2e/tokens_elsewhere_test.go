package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// The first hour's case: the gateway runs with --data-dir, and `token
// create` without it uses ~/.uncaged/gateway. Every token command names
// the database it used (and that it is the default), warns that no
// running gateway uses it, and names the running gateway's --data-dir and
// the variable that points the command there. Pointed there, it warns of
// nothing. A gateway killed with SIGKILL is named no more.
func TestTokenCommandsPointAtTheRunningGateway(t *testing.T) {
	t.Parallel()
	home, dataDir := t.TempDir(), t.TempDir()
	env := []string{"HOME=" + home, "UNCAGED_GATEWAY_KEY=" + gwCLI(t, "", "key", "generate"),
		"UNCAGED_GATEWAY_DATA_DIR=", "UNCAGED_GATEWAY_DATABASE_URL=", "UNCAGED_GATEWAY_DATABASE_URL_FILE="}
	gw := startProc(t, env, "uncaged-gateway", "serve", "--listen", "127.0.0.1:0", "--data-dir", dataDir)
	gw.listening(t)
	token := func(args ...string) result {
		cmd := exec.Command(filepath.Join(binDir, "uncaged-gateway"), append([]string{"token"}, args...)...)
		cmd.Env = append(os.Environ(), env...)
		return runCommand(t, cmd)
	}
	for _, args := range [][]string{{"create", "--connector", "laptop"}, {"list"}, {"revoke", "--connector", "laptop"}} {
		r := token(args...)
		for _, want := range []string{
			"database: " + filepath.Join(home, ".uncaged", "gateway", "gateway.db") + " (the default: no --data-dir, UNCAGED_GATEWAY_DATA_DIR or --database-url given)\n",
			"warning: no running gateway uses this database",
			fmt.Sprintf("the gateway running here as pid %d (--listen 127.0.0.1:0, since ", gw.cmd.Process.Pid),
			fmt.Sprintf("uses --data-dir %s: to change its tokens, pass --data-dir %s (or set UNCAGED_GATEWAY_DATA_DIR=%s)\n", dataDir, dataDir, dataDir),
		} {
			if strings.Count(r.stderr, want) != 1 {
				t.Errorf("token %v: stderr does not say %q once:\n%s", args, want, r.stderr)
			}
		}
	}
	r := token("create", "--connector", "laptop", "--data-dir", dataDir)
	if r.code != 0 || strings.Contains(r.stderr, "warning") || !strings.Contains(r.stderr, "database: "+filepath.Join(dataDir, "gateway.db")+"\n") {
		t.Fatalf("token create --data-dir %s: %+v", dataDir, r)
	}
	gw.stop(syscall.SIGKILL)
	r = token("list", "--data-dir", dataDir)
	if !strings.Contains(r.stderr, "warning: no running gateway uses this database") || !strings.Contains(r.stderr, "no gateway runs on this machine as this user") ||
		strings.Contains(r.stderr, "the gateway running here") {
		t.Fatalf("after the gateway was killed: %+v", r)
	}
}
