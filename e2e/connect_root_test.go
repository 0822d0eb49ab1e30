package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/uncaged/workflow/shared/testkit"
)

// rootConnect starts connect for name on root with a token of its own and
// env added to its environment (and so to the threads it starts).
func rootConnect(t *testing.T, g *gatewayEnv, root, name string, env ...string) *proc {
	t.Helper()
	tok := gwCLI(t, g.key, "token", "create", "--connector", name)
	env = append([]string{"UNCAGED_WORKFLOW_STORAGE_ROOT=" + root, "UNCAGED_WORKFLOW_TOKEN=" + tok, "WORKFLOW_DASHBOARD_SECRET="}, env...)
	return startProc(t, env, "uncaged-workflow", "connect", "--name", name, "--gateway", "http://"+g.addr)
}

// Only one connect may serve a root. A second one on it, with the name
// of the first or another, stops at once with exit 16 and a message that
// names the first (pid, name, gateway) and how to stop it: the gateway
// sees no second connection, so nothing is replaced and the machine does
// not flicker. A connect killed with SIGKILL holds nothing: the next one
// on its root starts.
func TestOneConnectPerRoot(t *testing.T) {
	t.Parallel()
	g := startGateway(t)
	root := engineRoot(t)
	first := rootConnect(t, g, root, "laptop")
	g.waitStatus("laptop", "online")
	pid := first.cmd.Process.Pid
	for _, name := range []string{"laptop", "desk"} {
		second := rootConnect(t, g, root, name)
		if code := second.exitCode(t); code != 16 {
			t.Fatalf("a second connect (--name %s) on the root exited %d:\n%s", name, code, second.logs.String())
		}
		out := second.logs.String()
		for _, want := range []string{
			fmt.Sprintf(`another connect already serves this storage root (%s): pid %d, "laptop" to http://%s, connected since `, root, pid, g.addr),
			fmt.Sprintf("stop that one first (kill %d)", pid),
			"stopped (exit 16)",
		} {
			if strings.Count(out, want) != 1 {
				t.Errorf("--name %s: the refusal does not say %q once:\n%s", name, want, out)
			}
		}
		if strings.Contains(out, "connected to") {
			t.Errorf("--name %s: the second connect dialed:\n%s", name, out)
		}
	}
	if first.exited() || g.endpoints()["laptop"] != "online" || strings.Contains(first.logs.String(), "replaced") {
		t.Fatalf("the first connect was disturbed:\n%s", first.logs.String())
	}
	if logs := g.gw.logs.String(); strings.Contains(logs, `"msg":"connector replaced"`) {
		t.Fatalf("the gateway saw the connector replaced:\n%s", logs)
	}

	first.stop(syscall.SIGKILL)
	again := rootConnect(t, g, root, "laptop")
	testkit.WaitUntil(t, "a connect after one that was killed to connect", func() bool {
		return strings.Contains(again.logs.String(), `connected to http://`+g.addr+` as "laptop"`) || again.exited()
	})
	if again.exited() {
		t.Fatalf("the connect after a killed one stopped:\n%s", again.logs.String())
	}
}

// Stopping connect stops no thread: a thread started through the gateway
// and one started with the CLI beside it run on in the root's engine host
// and complete, and connect says so as it stops.
func TestStoppingConnectLeavesItsThreadsRunning(t *testing.T) {
	t.Parallel()
	g := startGateway(t)
	root := engineRoot(t)
	add(t, root, "slow", "slow.esm.js")
	// Past their first step the threads wait for the gate, so both are
	// still running when connect stops, however slow the machine.
	gate := filepath.Join(t.TempDir(), "gate")
	conn := rootConnect(t, g, root, "laptop", "SLOW_GATE="+gate)
	g.waitStatus("laptop", "online")
	viaGateway := g.startThread("laptop", "slow", "through the gateway")
	viaCLI := startEnv(t, root, []string{"SLOW_GATE=" + gate}, "slow", "--prompt", "through the CLI")
	for _, id := range []string{viaGateway, viaCLI} {
		testkit.WaitUntil(t, "thread "+id+" to finish a step", func() bool { return len(show(t, root, id).Steps) > 0 })
	}
	conn.stop(syscall.SIGTERM)
	want := fmt.Sprintf("disconnected; 2 threads keep running in the engine host (pid %d); `uncaged-workflow engine stop` stops it", hostPID(root))
	if out := conn.logs.String(); !strings.Contains(out, want) {
		t.Fatalf("connect's last words lack %q:\n%s", want, out)
	}
	for _, id := range []string{viaGateway, viaCLI} {
		if s := show(t, root, id); s.Status != "running" {
			t.Fatalf("thread %s after connect stopped: %s", id, s.Status)
		}
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{viaGateway, viaCLI} {
		if s := finished(t, root, id); s.Status != "completed" || len(s.Steps) != 5 {
			t.Fatalf("thread %s: %s after %d steps", id, s.Status, len(s.Steps))
		}
	}
	// The host, not connect, logged them.
	b, err := os.ReadFile(filepath.Join(root, "logs", "engine.log"))
	if err != nil || strings.Count(string(b), `"msg":"thread finished"`) != 2 {
		t.Fatalf("the engine host's log (%v):\n%s", err, b)
	}
}

// Each refusal that stops connect is said once, on standard error, with
// its documented exit code; standard output has none of it. On a pipe,
// every line is text by default and JSON with --log-format json, never
// both.
func TestConnectRefusalsAreSaidOnce(t *testing.T) {
	t.Parallel()
	g := startGateway(t)
	_, heldRoot := g.connector("laptop", nil)
	dir := t.TempDir()
	tokenFile := func(name, content string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	laptop := tokenFile("laptop", gwCLI(t, g.key, "token", "create", "--connector", "laptop"))
	desk := tokenFile("desk", gwCLI(t, g.key, "token", "create", "--connector", "desk"))
	dash := tokenFile("dash", gwCLI(t, g.key, "token", "create", "--dashboard"))
	bogus := tokenFile("bogus", "not-a-token")
	gw := "http://" + g.addr
	for _, tc := range []struct {
		what    string
		root    string // "" a fresh one
		gateway string
		args    []string
		code    int
		says    string
	}{
		{"a URL without a scheme", "", g.addr, []string{"--token-file", laptop}, 10, `gateway URL "` + g.addr + `" has no scheme`},
		{"a token that is none", "", gw, []string{"--token-file", bogus}, 11, "gateway refused the connection (401): malformed token"},
		{"another connector's token", "", gw, []string{"--token-file", desk}, 11, `this token is for connector "desk", not "laptop" [wrong-connector]`},
		{"a dashboard token", "", gw, []string{"--token-file", dash}, 11, "this is a dashboard token"},
		{"a token file that is not there", "", gw, []string{"--token-file", filepath.Join(dir, "nosuch")}, 11, "--token-file " + filepath.Join(dir, "nosuch") + ": no such file"},
		{"a path that is not the tunnel", "", gw + "/ws", []string{"--token-file", laptop}, 13, "no gateway tunnel at"},
		{"a name another root holds", "", gw, []string{"--token-file", laptop}, 14, `connector name "laptop" is held by instance`},
		{"a root another connect serves", heldRoot, gw, []string{"--token-file", laptop}, 16, "another connect already serves this storage root"},
	} {
		for _, jsonLines := range []bool{false, true} {
			root := tc.root
			if root == "" {
				root = engineRoot(t)
			}
			args := append([]string{"connect", "--name", "laptop", "--gateway", tc.gateway}, tc.args...)
			if jsonLines {
				args = append([]string{"--log-format", "json"}, args...)
			}
			cmd := exec.Command(filepath.Join(binDir, "uncaged-workflow"), args...)
			cmd.Env = append(os.Environ(), "UNCAGED_WORKFLOW_STORAGE_ROOT="+root, "UNCAGED_WORKFLOW_TOKEN=", "WORKFLOW_DASHBOARD_SECRET=")
			r := runCommand(t, cmd)
			what := fmt.Sprintf("%s (json %v)", tc.what, jsonLines)
			if r.code != tc.code || r.stdout != "" {
				t.Errorf("%s: exit %d, want %d\nstdout: %s\nstderr: %s", what, r.code, tc.code, r.stdout, r.stderr)
				continue
			}
			if n := strings.Count(r.stderr, jsonQuoted(tc.says, jsonLines)); n != 1 {
				t.Errorf("%s: stderr says %q %d times:\n%s", what, tc.says, n, r.stderr)
			}
			for _, line := range strings.Split(strings.TrimSpace(r.stderr), "\n") {
				if isJSON := json.Valid([]byte(line)); isJSON != jsonLines {
					t.Errorf("%s: a line of another kind: %s", what, line)
				}
			}
		}
	}
}

// jsonQuoted is s as it appears in a JSON string when inJSON.
func jsonQuoted(s string, inJSON bool) string {
	if !inJSON {
		return s
	}
	b, _ := json.Marshal(s)
	return string(b[1 : len(b)-1])
}
