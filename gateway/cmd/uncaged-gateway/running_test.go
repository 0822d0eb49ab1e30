package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/uncaged/workflow/gateway/store"
)

// aloneAt makes this (sequential) test's home dir, where the running
// gateways are recorded, a fresh one, and clears the store's variables.
func aloneAt(t *testing.T) string {
	home := t.TempDir()
	t.Setenv("HOME", home)
	for _, name := range []string{"data-dir", "database-url", "database-url-file"} {
		t.Setenv(envName(name), "")
	}
	return home
}

// A token command whose database no running gateway uses says so, and
// names the database each gateway running on this machine uses and how to
// point the command at it — the case of a gateway started with --data-dir
// and a command that defaulted to ~/.uncaged/gateway included, where it
// also says its database is the default. A gateway that stopped without a
// word (its record left, unlocked) is not named; one using PostgreSQL is
// named without its password.
func TestTokenCommandsNameTheGatewaysRunningElsewhere(t *testing.T) {
	home := aloneAt(t)
	gatewayDir := t.TempDir()
	release, err := recordRunning(store.Config{DataDir: gatewayDir}, "127.0.0.1:8080")
	if err != nil {
		t.Fatal(err)
	}
	defaultDB := filepath.Join(home, ".uncaged", "gateway", store.SQLiteFile)
	named := fmt.Sprintf("  the gateway running here as pid %d (--listen 127.0.0.1:8080, since ", os.Getpid())
	pointer := fmt.Sprintf(") uses --data-dir %s: to change its tokens, pass --data-dir %s (or set UNCAGED_GATEWAY_DATA_DIR=%s)\n", gatewayDir, gatewayDir, gatewayDir)
	for _, args := range [][]string{{"create", "--connector", "laptop"}, {"list"}, {"revoke", "--connector", "laptop"}} {
		_, errOut, err := runTokenWith(t, nil, args...)
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		for _, want := range []string{
			"database: " + defaultDB + " (the default: no --data-dir, UNCAGED_GATEWAY_DATA_DIR or --database-url given)\n",
			"warning: no running gateway uses this database: only a gateway started with --data-dir " + filepath.Dir(defaultDB) + " will see this command's changes\n",
			named, pointer,
		} {
			if !strings.Contains(errOut, want) {
				t.Errorf("%v: stderr lacks %q:\n%s", args, want, errOut)
			}
		}
	}

	// Pointed at the gateway's database, which it uses: no warning.
	ctx := context.Background()
	st, err := store.Open(ctx, store.Config{DataDir: gatewayDir})
	if err != nil {
		t.Fatal(err)
	}
	claim, err := st.Claim(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, errOut, err := runTokenWith(t, []string{"--data-dir", gatewayDir}, "create", "--connector", "laptop")
	if err != nil || strings.Contains(errOut, "warning") || strings.Contains(errOut, "the default") {
		t.Fatalf("with the gateway's --data-dir: %v\n%s", err, errOut)
	}
	claim()
	_ = st.Close()

	// A PostgreSQL gateway: named without its password.
	releasePG, err := recordRunning(store.Config{DatabaseURL: "postgres://gw:s3cret@db.example.com:5432/gateway?sslmode=require&password=s3cret"}, ":8081")
	if err != nil {
		t.Fatal(err)
	}
	_, errOut, _ = runTokenWith(t, nil, "list")
	if !strings.Contains(errOut, "uses PostgreSQL postgres://gw@db.example.com:5432/gateway: to change its tokens, pass that database's --database-url-file or --database-url (or set UNCAGED_GATEWAY_DATABASE_URL)") ||
		strings.Contains(errOut, "s3cret") || !strings.Contains(errOut, pointer) {
		t.Fatalf("with a PostgreSQL gateway too:\n%s", errOut)
	}
	releasePG()

	// Stopped: no record is left to name it.
	release()
	_, errOut, _ = runTokenWith(t, nil, "list")
	if strings.Contains(errOut, named) || !strings.Contains(errOut, "  no gateway runs on this machine as this user; if yours runs elsewhere, point this command at its database: --data-dir DIR (or UNCAGED_GATEWAY_DATA_DIR)") {
		t.Fatalf("after the gateway stopped:\n%s", errOut)
	}

	// Killed: its record is there, but nobody holds it.
	dir, err := runningDir()
	if err != nil {
		t.Fatal(err)
	}
	stale, _ := json.Marshal(runningGateway{PID: os.Getpid(), Listen: ":9", DataDir: gatewayDir, Since: time.Now()})
	if err := os.WriteFile(filepath.Join(dir, "1-1.json"), stale, 0o600); err != nil {
		t.Fatal(err)
	}
	_, errOut, _ = runTokenWith(t, nil, "list")
	if strings.Contains(errOut, "--listen :9") || !strings.Contains(errOut, "no gateway runs on this machine") {
		t.Fatalf("with a killed gateway's record:\n%s", errOut)
	}
}

// A gateway's record is locked from before anyone can read it to its
// release; the next gateway to start removes the records of those that
// stopped without removing theirs, and only those.
func TestRunningRecordsOutliveNoGateway(t *testing.T) {
	aloneAt(t)
	dir, err := runningDir()
	if err != nil {
		t.Fatal(err)
	}
	first, err := recordRunning(store.Config{DataDir: "relative/dir"}, ":1")
	if err != nil {
		t.Fatal(err)
	}
	defer first()
	stale := filepath.Join(dir, "7-7.json")
	if err := os.WriteFile(stale, []byte(`{"pid":7}`), 0o600); err != nil {
		t.Fatal(err)
	}
	second, err := recordRunning(store.Config{DataDir: t.TempDir()}, ":2")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Fatalf("a stopped gateway's record was kept: %v", err)
	}
	got, err := runningGateways()
	if err != nil || len(got) != 2 {
		t.Fatalf("running: %+v, %v", got, err)
	}
	abs, _ := filepath.Abs("relative/dir")
	listens := map[string]string{}
	for _, g := range got {
		listens[g.Listen] = g.DataDir
	}
	if listens[":1"] != abs {
		t.Fatalf("the first gateway's record: %+v", got)
	}
	second()
	if got, _ := runningGateways(); len(got) != 1 || got[0].Listen != ":1" {
		t.Fatalf("after one stopped: %+v", got)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("files left: %v", entries)
	}
}
