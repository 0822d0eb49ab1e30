package deploy

import (
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/uncaged/workflow/shared/testkit"
	"github.com/uncaged/workflow/shared/testkit/pgtest"
)

// runGateway runs a gateway command with env and returns its stdout.
func runGateway(t *testing.T, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command(binary(t, gatewayBinary), args...)
	cmd.Env = env
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("uncaged-gateway %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out)
}

// serveGateway starts `uncaged-gateway serve` with env on a free loopback
// port, waits until it is ready, and returns its URL and a function that
// stops it (SIGTERM, then waits for a clean exit).
func serveGateway(t *testing.T, env []string) (url string, stop func()) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary(t, gatewayBinary), "serve", "--listen", addr)
	cmd.Env = env
	log := &testkit.Buffer{}
	cmd.Stderr = log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Error(err)
		}
		if err := cmd.Wait(); err != nil {
			t.Errorf("gateway: %v\n%s", err, log.String())
		}
	}
	t.Cleanup(stop)
	url = "http://" + addr
	testkit.WaitUntil(t, "the gateway to be ready", func() bool {
		resp, err := http.Get(url + "/readyz")
		if err != nil {
			return false
		}
		_ = resp.Body.Close() // only the status matters
		return resp.StatusCode == http.StatusOK
	})
	return url, stop
}

// statusWith is the status of GET path with a bearer token.
func statusWith(t *testing.T, url, path, token string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close() // only the status matters
	return resp.StatusCode
}

// TestPostgresBackupAndRestoreAsDocumented runs docs/operations.md's
// PostgreSQL backup and restore, with its commands, against a real
// gateway and a real PostgreSQL: pg_dump while the gateway runs, a token
// revoked after the dump, then the gateway stopped and pg_restore over
// the database. The restored gateway is back at the dump's moment, as the
// docs warn: the token revoked since is accepted again.
func TestPostgresBackupAndRestoreAsDocumented(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.URL(t)
	ops, err := os.ReadFile("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	dumpCmd := []string{"pg_dump", "--format=custom", "--file=DUMP", dbURL}
	restoreCmd := []string{"pg_restore", "--clean", "--if-exists", "--no-owner", "--dbname", dbURL, "DUMP"}
	for _, doc := range []string{
		`pg_dump --format=custom --file=gateway-$(date +%F).dump "$DATABASE_URL"`,
		`pg_restore --clean --if-exists --no-owner --dbname "$DATABASE_URL" gateway.dump`,
	} {
		if !strings.Contains(string(ops), doc) {
			t.Fatalf("docs/operations.md no longer says %q: update this test with it", doc)
		}
	}
	tool := func(args []string, dump string) {
		t.Helper()
		for i, a := range args {
			args[i] = strings.ReplaceAll(a, "DUMP", dump)
		}
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}

	env := append(os.Environ(), "UNCAGED_GATEWAY_KEY="+strings.Repeat("k", 32),
		"UNCAGED_GATEWAY_DATABASE_URL="+dbURL, "UNCAGED_GATEWAY_DATA_DIR="+t.TempDir(),
		"UNCAGED_GATEWAY_DATABASE_URL_FILE=", "UNCAGED_GATEWAY_NATS=", "UNCAGED_GATEWAY_SHARED_SECRET=", "WORKFLOW_DASHBOARD_SECRET=")
	url, stop := serveGateway(t, env)
	var created struct{ ID, Token string }
	if err := json.Unmarshal([]byte(runGateway(t, env, "token", "create", "--dashboard", "--note", "backup test", "--json")), &created); err != nil || created.Token == "" {
		t.Fatalf("token create --json: %v %+v", err, created)
	}
	testkit.WaitUntil(t, "the new token to be accepted", func() bool {
		return statusWith(t, url, "/api/gateway/endpoints", created.Token) == http.StatusOK
	})

	dump := filepath.Join(t.TempDir(), "gateway.dump")
	tool(dumpCmd, dump) // while the gateway runs

	runGateway(t, env, "token", "revoke", created.ID)
	testkit.WaitUntil(t, "the revoked token to be refused", func() bool {
		return statusWith(t, url, "/api/gateway/endpoints", created.Token) == http.StatusUnauthorized
	})

	stop()
	tool(restoreCmd, dump)
	url, _ = serveGateway(t, env)
	if got := statusWith(t, url, "/api/gateway/endpoints", created.Token); got != http.StatusOK {
		t.Errorf("after the restore the token revoked since the dump gets %d, want 200 (the dump's state)", got)
	}
	var listed []struct {
		ID      string
		Revoked *string
	}
	if err := json.Unmarshal([]byte(runGateway(t, env, "token", "list", "--json")), &listed); err != nil {
		t.Fatal(err)
	}
	if len(listed) != 1 || listed[0].ID != created.ID || listed[0].Revoked != nil {
		t.Errorf("token list after the restore: %+v, want %s, not revoked", listed, created.ID)
	}
}
