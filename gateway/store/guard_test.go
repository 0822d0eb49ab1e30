package store_test

import (
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/uncaged/workflow/gateway/store"
	"github.com/uncaged/workflow/shared/testkit/pgtest"
)

// sqliteDB opens the SQLite file in dir as another process would.
func sqliteDB(t *testing.T, dir string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, store.SQLiteFile)+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// pgExec runs statements on the database at url, as another client.
func pgExec(t *testing.T, url string, stmts ...string) {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close(context.Background()) }()
	for _, s := range stmts {
		if _, err := conn.Exec(context.Background(), s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

// corruptPage overwrites the first page of table in the SQLite file in
// dir with garbage, past everything the running store has cached.
func corruptPage(t *testing.T, dir, table string) {
	t.Helper()
	db := sqliteDB(t, dir)
	if _, err := db.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		t.Fatal(err)
	}
	var root, pageSize int64
	if err := db.QueryRow(`SELECT rootpage FROM sqlite_schema WHERE name = ?`, table).Scan(&root); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow(`PRAGMA page_size`).Scan(&pageSize); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(filepath.Join(dir, store.SQLiteFile), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	garbage := make([]byte, pageSize)
	for i := range garbage {
		garbage[i] = 0xA5
	}
	binary.BigEndian.PutUint32(garbage, 0xdeadbeef)
	if _, err := f.WriteAt(garbage, (root-1)*pageSize); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	// A commit elsewhere makes every connection drop its cached pages.
	if _, err := db.Exec(`INSERT INTO audit (at, action) VALUES (1, 'poke')`); err != nil {
		t.Fatal(err)
	}
}

// Check says nothing while the database is the one opened, and says
// which database and what happened when it was removed, replaced or
// damaged: every way the reports and their variants found.
func TestCheckNoticesTheDatabaseGoneReplacedOrDamaged(t *testing.T) {
	ctx := context.Background()
	type variant struct {
		name string
		do   func(t *testing.T, cfg store.Config)
		want string // in Check's error
	}
	sqlite := []variant{
		{"the file deleted", func(t *testing.T, cfg store.Config) {
			if err := os.Remove(filepath.Join(cfg.DataDir, store.SQLiteFile)); err != nil {
				t.Fatal(err)
			}
		}, "was removed while the gateway runs"},
		{"the file, its log and index deleted", func(t *testing.T, cfg store.Config) {
			for _, suffix := range []string{"", "-wal", "-shm"} {
				_ = os.Remove(filepath.Join(cfg.DataDir, store.SQLiteFile+suffix))
			}
		}, "was removed while the gateway runs"},
		{"the file replaced by a new database", func(t *testing.T, cfg store.Config) {
			p := filepath.Join(cfg.DataDir, store.SQLiteFile)
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
			other := open(t, cfg) // what `token create` did
			_ = other.Close()
		}, "was replaced while the gateway runs"},
		{"the file replaced by another gateway's", func(t *testing.T, cfg store.Config) {
			elsewhere := t.TempDir()
			other := open(t, store.Config{DataDir: elsewhere})
			_ = other.Close()
			if err := os.Rename(filepath.Join(elsewhere, store.SQLiteFile), filepath.Join(cfg.DataDir, store.SQLiteFile)); err != nil {
				t.Fatal(err)
			}
		}, "was replaced while the gateway runs"},
		{"the data directory removed", func(t *testing.T, cfg store.Config) {
			if err := os.RemoveAll(cfg.DataDir); err != nil {
				t.Fatal(err)
			}
		}, "data directory " + "%DIR%" + " was removed"},
		{"the data directory moved", func(t *testing.T, cfg store.Config) {
			if err := os.Rename(cfg.DataDir, cfg.DataDir+".old"); err != nil {
				t.Fatal(err)
			}
		}, "data directory " + "%DIR%" + " was removed"},
		{"the identity rewritten", func(t *testing.T, cfg store.Config) {
			if _, err := sqliteDB(t, cfg.DataDir).Exec(`UPDATE store_identity SET id = 'someone-else'`); err != nil {
				t.Fatal(err)
			}
		}, "is database someone-else"},
		{"the tokens table dropped", func(t *testing.T, cfg store.Config) {
			if _, err := sqliteDB(t, cfg.DataDir).Exec(`DROP TABLE tokens`); err != nil {
				t.Fatal(err)
			}
		}, "no such table: tokens"},
		{"the tokens table's page overwritten", func(t *testing.T, cfg store.Config) {
			corruptPage(t, cfg.DataDir, "tokens")
		}, "tokens"},
		{"the registrations table's page overwritten", func(t *testing.T, cfg store.Config) {
			corruptPage(t, cfg.DataDir, "registrations")
		}, "registrations"},
		{"a column of tokens dropped", func(t *testing.T, cfg store.Config) {
			if _, err := sqliteDB(t, cfg.DataDir).Exec(`ALTER TABLE tokens DROP COLUMN note`); err != nil {
				t.Fatal(err)
			}
		}, "no such column: note"},
	}
	if os.Getuid() != 0 { // root reads whatever the modes say
		sqlite = append(sqlite, variant{"the data directory unreadable", func(t *testing.T, cfg store.Config) {
			if err := os.Chmod(cfg.DataDir, 0); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = os.Chmod(cfg.DataDir, 0o700) })
		}, "cannot check the database file"})
	}
	postgres := []variant{
		{"the identity rewritten (another database restored there)", func(t *testing.T, cfg store.Config) {
			pgExec(t, cfg.DatabaseURL, `UPDATE store_identity SET id = 'someone-else'`)
		}, "is database someone-else"},
		{"the identity dropped (the schema emptied)", func(t *testing.T, cfg store.Config) {
			pgExec(t, cfg.DatabaseURL, `DROP TABLE store_identity`)
		}, "was replaced or emptied"},
		{"the tokens table dropped", func(t *testing.T, cfg store.Config) {
			pgExec(t, cfg.DatabaseURL, `DROP TABLE tokens`)
		}, `relation "tokens" does not exist`},
		{"a column of tokens dropped", func(t *testing.T, cfg store.Config) {
			pgExec(t, cfg.DatabaseURL, `ALTER TABLE tokens DROP COLUMN note`)
		}, `column "note" does not exist`},
		{"the registrations table renamed", func(t *testing.T, cfg store.Config) {
			pgExec(t, cfg.DatabaseURL, `ALTER TABLE registrations RENAME TO registrations_old`)
		}, `relation "registrations" does not exist`},
	}
	for _, b := range backends {
		vs := sqlite
		if b.name == "postgres" {
			vs = postgres
		}
		for _, v := range vs {
			t.Run(b.name+"/"+v.name, func(t *testing.T) {
				t.Parallel()
				cfg := b.cfg(t)
				s := open(t, cfg)
				if err := s.CreateToken(ctx, store.Token{ID: "tok", Kind: store.KindConnector, Name: "laptop"}); err != nil {
					t.Fatal(err)
				}
				if err := s.Check(ctx); err != nil {
					t.Fatalf("Check on the database as opened: %v", err)
				}
				if s.Identity().ID == "" {
					t.Fatal("no identity")
				}
				v.do(t, cfg)
				err := s.Check(ctx)
				want := strings.ReplaceAll(v.want, "%DIR%", cfg.DataDir)
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Fatalf("Check after %s: %v, want %q", v.name, err, want)
				}
				if !strings.Contains(err.Error(), "database") {
					t.Fatalf("Check's error does not say which database: %v", err)
				}
			})
		}
	}
}

// Two databases never share an identity, and a database keeps its own
// across opens.
func TestIdentityIsTheDatabases(t *testing.T) {
	each(t, func(t *testing.T, cfg store.Config, _ *clock) {
		a := open(t, cfg)
		again := open(t, cfg)
		if a.Identity() != again.Identity() || a.Identity().ID == "" || a.Identity().CreatedAt.IsZero() {
			t.Fatalf("one database, two opens: %+v and %+v", a.Identity(), again.Identity())
		}
		other := open(t, backends[0].cfg(t))
		if other.Identity().ID == a.Identity().ID {
			t.Fatal("two databases share an identity")
		}
	})
}

// A gateway's claim is seen by a command beside it — for SQLite without
// opening the database, even once its file is gone — and ends with
// release.
func TestClaimTellsWhoUsesTheDatabase(t *testing.T) {
	each(t, func(t *testing.T, cfg store.Config, _ *clock) {
		ctx := context.Background()
		s := open(t, cfg)
		if hs, err := s.Holders(ctx); err != nil || len(hs) != 0 {
			t.Fatalf("before any claim: %v, %v", hs, err)
		}
		release, err := s.Claim(ctx)
		if err != nil {
			t.Fatal(err)
		}
		beside := open(t, cfg)
		hs, err := beside.Holders(ctx)
		if err != nil || len(hs) != 1 || hs[0].PID != os.Getpid() || hs[0].Database != s.Identity().ID || time.Since(hs[0].Since) > time.Minute {
			t.Fatalf("while claimed: %+v, %v", hs, err)
		}
		if cfg.DataDir != "" {
			if err := os.Remove(filepath.Join(cfg.DataDir, store.SQLiteFile)); err != nil {
				t.Fatal(err)
			}
			h, err := store.SQLiteHolder(cfg.DataDir)
			if err != nil || h == nil || h.Database != s.Identity().ID {
				t.Fatalf("with the file gone: %+v, %v", h, err)
			}
			if _, err := os.Stat(filepath.Join(cfg.DataDir, store.SQLiteFile)); !os.IsNotExist(err) {
				t.Fatal("looking for the holder made a database")
			}
		}
		release()
		release() // twice is harmless
		if cfg.DataDir != "" {
			if h, err := store.SQLiteHolder(cfg.DataDir); err != nil || h != nil {
				t.Fatalf("after release: %+v, %v", h, err)
			}
			return
		}
		if hs, err := beside.Holders(ctx); err != nil || len(hs) != 0 {
			t.Fatalf("after release: %+v, %v", hs, err)
		}
	})
}

// A store whose file was removed never makes a new, empty one in its
// place, however many connections its pools open meanwhile: that new
// file is what `token create` then wrote to, and what a restart took for
// the gateway's database.
func TestARemovedFileIsNeverMadeAgain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s := open(t, store.Config{DataDir: dir})
	if err := os.Remove(filepath.Join(dir, store.SQLiteFile)); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 16 { // more than the pools keep idle: new connections
		wg.Go(func() {
			_, _ = s.ListTokens(ctx, store.TokenFilter{})
			_, _ = s.SearchThreads(ctx, store.ThreadQuery{Q: "x"})
			_, _ = s.TouchMachine(ctx, fmt.Sprintf("m%d", i))
		})
	}
	wg.Wait()
	if _, err := os.Stat(filepath.Join(dir, store.SQLiteFile)); !os.IsNotExist(err) {
		t.Fatalf("a new database file was made in place of the removed one: %v", err)
	}
}

// forwarder relays TCP connections to target until cut, as a network
// between the gateway and its database does.
type forwarder struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func newForwarder(t *testing.T, target string) *forwarder {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &forwarder{ln: ln}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				_ = c.Close()
				continue
			}
			f.mu.Lock()
			f.conns = append(f.conns, c, up)
			f.mu.Unlock()
			go func() { _, _ = io.Copy(up, c); _ = up.Close() }()
			go func() { _, _ = io.Copy(c, up); _ = c.Close() }()
		}
	}()
	t.Cleanup(f.cut)
	return f
}

// cut ends every relayed connection and takes no more.
func (f *forwarder) cut() {
	_ = f.ln.Close()
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.conns {
		_ = c.Close()
	}
}

// A PostgreSQL server out of reach is told apart from a database that
// answers wrong: Check's error is ErrUnreachable (the gateway stays
// ready), and names the database.
func TestCheckTellsAnUnreachableDatabaseApart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	u, err := url.Parse(pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	fw := newForwarder(t, u.Host)
	u.Host = fw.ln.Addr().String()
	q := u.Query()
	q.Set("connect_timeout", "2")
	u.RawQuery = q.Encode()
	s := open(t, store.Config{DatabaseURL: u.String()})
	if err := s.Check(ctx); err != nil {
		t.Fatalf("Check through the network: %v", err)
	}
	fw.cut()
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	err = s.Check(cctx)
	if !errors.Is(err, store.ErrUnreachable) || !strings.Contains(err.Error(), "PostgreSQL database") {
		t.Fatalf("Check with the server out of reach: %v", err)
	}
	// A database that answers wrong is not unreachable.
	sq := open(t, store.Config{DataDir: t.TempDir()})
	if _, err := sqliteDB(t, filepath.Dir(sq.Where())).Exec(`DROP TABLE registrations`); err != nil {
		t.Fatal(err)
	}
	if err := sq.Check(ctx); err == nil || errors.Is(err, store.ErrUnreachable) {
		t.Fatalf("Check of a damaged database: %v", err)
	}
}
