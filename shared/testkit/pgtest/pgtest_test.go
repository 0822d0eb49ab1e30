package pgtest

import (
	"context"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) { os.Exit(Main(m)) }

// TestURL checks that each call gives its own empty, writable database on
// one shared server.
func TestURL(t *testing.T) {
	ctx := context.Background()
	a, b := URL(t), URL(t)
	if a == b {
		t.Fatalf("two tests got the same database %s", a)
	}
	for _, u := range []string{a, b} {
		c, err := pgx.Connect(ctx, u)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Exec(ctx, "CREATE TABLE t (x int)"); err != nil {
			t.Fatalf("%s: %v", u, err)
		}
		if err := c.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if srv == nil || srv.port == 0 {
		t.Fatal("no server recorded")
	}
}

func TestBinDirAndCredential(t *testing.T) {
	dir, ok := binDir()
	if !ok {
		t.Skip("no PostgreSQL binaries: install the postgresql package")
	}
	if _, err := os.Stat(dir + "/initdb"); err != nil {
		t.Fatalf("binDir %s has no initdb: %v", dir, err)
	}
	cred, err := credential()
	if err != nil {
		t.Fatal(err)
	}
	if (os.Getuid() == 0) != (cred != nil) || (cred != nil && cred.Uid == 0) {
		t.Fatalf("uid %d got credential %+v; want an unprivileged one exactly when root", os.Getuid(), cred)
	}
}
