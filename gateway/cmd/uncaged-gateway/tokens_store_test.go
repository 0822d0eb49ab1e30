package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/uncaged/workflow/gateway/store"
	"github.com/uncaged/workflow/shared/testkit"
	"github.com/uncaged/workflow/shared/testkit/pgtest"
)

// TestMain gives the tests a home of their own: the commands they run
// (serve records itself under ~/.uncaged/run) must not write into the
// home of whoever runs the tests.
func TestMain(m *testing.M) {
	removeHome := testkit.PrivateHomeFor("uncaged-gateway-tests")
	code := pgtest.Main(m)
	removeHome()
	os.Exit(code)
}

// runTokenWith runs `token args...` with storeArgs naming the store.
func runTokenWith(t *testing.T, storeArgs []string, args ...string) (string, string, error) {
	t.Helper()
	cmd := tokenCmd()
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	full := append(append([]string{}, args...), storeArgs...)
	if args[0] == "create" {
		full = append(full, "--key", testKey)
	}
	cmd.SetArgs(full)
	err := cmd.Execute()
	return out.String(), errOut.String(), err
}

// Every token command names the database it used and says when no
// running gateway uses it; against a data directory whose running gateway
// uses another database — its file removed or replaced under it — it
// refuses, changes nothing and makes no database; where there is no
// database, only create makes one, and says so.
func TestTokenCommandsNameTheirDatabaseAndRefuseAnother(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	commands := [][]string{
		{"create", "--connector", "laptop"},
		{"list"},
		{"revoke", "--connector", "laptop"},
	}
	// gateway opens dir's store and claims it, as a running gateway does.
	gateway := func(t *testing.T, dir string) store.Store {
		st, err := store.Open(ctx, store.Config{DataDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		release, err := st.Claim(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { release(); _ = st.Close() })
		return st
	}
	dbFile := func(dir string) string { return filepath.Join(dir, store.SQLiteFile) }
	for _, v := range []struct {
		name    string
		prepare func(t *testing.T, dir string)
		// refused is what every command's error says; else warning is
		// what create's standard error says beyond the database's name
		// ("" for nothing).
		refused, warning string
		// noDB: list and revoke find no database; create makes one.
		noDB bool
	}{
		{"the running gateway's database", func(t *testing.T, dir string) { gateway(t, dir) }, "", "", false},
		{"no gateway running", func(t *testing.T, dir string) {
			st, err := store.Open(ctx, store.Config{DataDir: dir})
			if err != nil {
				t.Fatal(err)
			}
			_ = st.Close()
		}, "", "no running gateway uses this database", false},
		{"the file removed under the running gateway", func(t *testing.T, dir string) {
			gateway(t, dir)
			for _, suffix := range []string{"", "-wal", "-shm"} {
				_ = os.Remove(dbFile(dir) + suffix)
			}
		}, "it was removed while the gateway runs. Nothing was changed", "", false},
		{"the file replaced under the running gateway", func(t *testing.T, dir string) {
			gateway(t, dir)
			elsewhere := t.TempDir()
			other, err := store.Open(ctx, store.Config{DataDir: elsewhere})
			if err != nil {
				t.Fatal(err)
			}
			_ = other.Close()
			if err := os.Rename(dbFile(elsewhere), dbFile(dir)); err != nil {
				t.Fatal(err)
			}
		}, "the file was replaced while the gateway runs. Nothing was changed", "", false},
		{"no database and no gateway", func(t *testing.T, dir string) {}, "", "no running gateway uses this database", true},
	} {
		t.Run(v.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			v.prepare(t, dir)
			before, _ := os.ReadFile(dbFile(dir))
			for _, args := range commands {
				_, errOut, err := runTokenWith(t, []string{"--data-dir", dir}, args...)
				switch {
				case v.refused != "":
					if err == nil || !strings.Contains(err.Error(), v.refused) || !strings.Contains(err.Error(), dbFile(dir)) {
						t.Fatalf("%v: %v, want it refused: %q", args, err, v.refused)
					}
				case v.noDB && args[0] != "create":
					if err == nil || !strings.Contains(err.Error(), "no database at "+dbFile(dir)) {
						t.Fatalf("%v without a database: %v", args, err)
					}
				case v.noDB:
					if err != nil || !strings.Contains(errOut, "warning: no database at "+dbFile(dir)+": creating a new, empty one") {
						t.Fatalf("%v without a database: %v\n%s", args, err, errOut)
					}
					v.noDB = false // there is one now
				default:
					if err != nil || !strings.Contains(errOut, "database: "+dbFile(dir)+"\n") {
						t.Fatalf("%v: %v\n%s", args, err, errOut)
					}
					if got := strings.Contains(errOut, "no running gateway uses this database"); got != (v.warning != "") {
						t.Fatalf("%v: the no-gateway warning is %v:\n%s", args, got, errOut)
					}
				}
			}
			if v.refused == "" {
				return
			}
			after, _ := os.ReadFile(dbFile(dir))
			if !bytes.Equal(before, after) {
				t.Fatal("a refused command changed the database file, or made one")
			}
		})
	}
}

// Against PostgreSQL, the commands name the database (never its
// password) and warn while no gateway's heartbeat is fresh.
func TestTokenCommandsOnPostgresSayWhetherAGatewayUsesIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.URL(t)
	args := []string{"--database-url", url}
	_, errOut, err := runTokenWith(t, args, "create", "--dashboard")
	if err != nil || !strings.Contains(errOut, "database: PostgreSQL database ") || !strings.Contains(errOut, "no running gateway uses this database") {
		t.Fatalf("create with no gateway: %v\n%s", err, errOut)
	}
	st, err := store.Open(ctx, store.Config{DatabaseURL: url})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = st.Close() }()
	release, err := st.Claim(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	_, errOut, err = runTokenWith(t, args, "list")
	if err != nil || strings.Contains(errOut, "no running gateway") || strings.Contains(errOut, "password") {
		t.Fatalf("list with a gateway: %v\n%s", err, errOut)
	}
}
