package deploy

import (
	"database/sql"
	"encoding/json"
	"errors"
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
	_ "modernc.org/sqlite" // VACUUM INTO where the sqlite3 program is missing
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

// TestSQLiteBackupAndRestoreAsDocumented runs docs/operations.md's SQLite
// backup and restore against a real gateway: an online backup while it
// serves, a token revoked after it, then the gateway stopped, the WAL
// files deleted and the backup put in place of gateway.db. The restored
// gateway is back at the backup's moment. The backup is sqlite3's
// .backup, as documented, where the sqlite3 program is installed, and
// otherwise SQLite's VACUUM INTO through the gateway's own driver (also a
// consistent copy of a live database), so the restore is tested either
// way.
func TestSQLiteBackupAndRestoreAsDocumented(t *testing.T) {
	t.Parallel()
	ops, err := os.ReadFile("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range []string{
		`sqlite3 ~/.uncaged/gateway/gateway.db ".backup /backups/gateway-$(date +%F).db"`,
		`rm -f gateway.db-wal gateway.db-shm && cp /backups/gateway-2026-01-31.db gateway.db`,
	} {
		if !strings.Contains(string(ops), doc) {
			t.Fatalf("docs/operations.md no longer says %q: update this test with it", doc)
		}
	}
	dataDir := t.TempDir()
	db := filepath.Join(dataDir, "gateway.db")
	backup := filepath.Join(t.TempDir(), "gateway-backup.db")
	env := append(os.Environ(), "UNCAGED_GATEWAY_KEY="+strings.Repeat("k", 32), "UNCAGED_GATEWAY_DATA_DIR="+dataDir,
		"UNCAGED_GATEWAY_DATABASE_URL=", "UNCAGED_GATEWAY_DATABASE_URL_FILE=", "UNCAGED_GATEWAY_NATS=",
		"UNCAGED_GATEWAY_SHARED_SECRET=", "WORKFLOW_DASHBOARD_SECRET=")
	url, stop := serveGateway(t, env)
	var created struct{ ID, Token string }
	if err := json.Unmarshal([]byte(runGateway(t, env, "token", "create", "--dashboard", "--note", "backup test", "--json")), &created); err != nil || created.Token == "" {
		t.Fatalf("token create --json: %v %+v", err, created)
	}
	testkit.WaitUntil(t, "the new token to be accepted", func() bool {
		return statusWith(t, url, "/api/gateway/endpoints", created.Token) == http.StatusOK
	})

	// While the gateway runs.
	if sqlite3, err := exec.LookPath("sqlite3"); err == nil {
		if out, err := exec.Command(sqlite3, db, ".backup "+backup).CombinedOutput(); err != nil {
			t.Fatalf("sqlite3 .backup: %v\n%s", err, out)
		}
	} else {
		t.Log("sqlite3 is not installed: backing up with VACUUM INTO instead of .backup")
		conn, err := sql.Open("sqlite", "file:"+db+"?_pragma=busy_timeout(10000)") // the gateway writes meanwhile
		if err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Exec(`VACUUM INTO ?`, backup); err != nil {
			t.Fatal(err)
		}
		if err := conn.Close(); err != nil {
			t.Fatal(err)
		}
	}

	runGateway(t, env, "token", "revoke", created.ID)
	testkit.WaitUntil(t, "the revoked token to be refused", func() bool {
		return statusWith(t, url, "/api/gateway/endpoints", created.Token) == http.StatusUnauthorized
	})

	stop()
	for _, f := range []string{db + "-wal", db + "-shm"} {
		if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(backup)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(db, b, 0o600); err != nil {
		t.Fatal(err)
	}
	url, _ = serveGateway(t, env)
	if got := statusWith(t, url, "/api/gateway/endpoints", created.Token); got != http.StatusOK {
		t.Errorf("after the restore the token revoked since the backup gets %d, want 200 (the backup's state)", got)
	}
}
