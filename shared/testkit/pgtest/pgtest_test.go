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

// TestAServerOfItsOwnStopsAndStartsAgain: while stopped, its sessions are
// ended and connections refused; started again, it has the same port and
// the same data.
func TestAServerOfItsOwnStopsAndStartsAgain(t *testing.T) {
	ctx := context.Background()
	s := NewServer(t)
	url := s.URL(t)
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(ctx, "CREATE TABLE kept (x int); INSERT INTO kept VALUES (7)"); err != nil {
		t.Fatal(err)
	}
	s.Stop(t)
	if _, err := c.Exec(ctx, "SELECT 1"); err == nil {
		t.Fatal("a session outlived its server")
	}
	_ = c.Close(ctx) // broken: nothing to report
	if c, err := pgx.Connect(ctx, url); err == nil {
		_ = c.Close(ctx) // the failure is the point
		t.Fatal("connected to a stopped server")
	}
	s.Stop(t) // stopped already: nothing to do
	s.Start(t)
	s.Start(t) // running already: nothing to do
	c, err = pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close(ctx) }() // a test session
	var x int
	if err := c.QueryRow(ctx, "SELECT x FROM kept").Scan(&x); err != nil || x != 7 {
		t.Fatalf("after a restart: %d %v", x, err)
	}
}
