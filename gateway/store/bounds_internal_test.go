package store

import (
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pressly/goose/v3"

	"github.com/uncaged/workflow/shared/testkit/pgtest"
)

// The counts a machine's share is checked against (kept by triggers)
// equal what its threads take, through inserts, updates, evictions,
// pruning and resyncs, in both backends.
func TestShareCountsFollowEveryChange(t *testing.T) {
	for _, b := range []struct {
		name string
		cfg  func() Config
	}{
		{"sqlite", func() Config { return Config{DataDir: t.TempDir()} }},
		{"postgres", func() Config { return Config{DatabaseURL: pgtest.URL(t)} }},
	} {
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			cfg := b.cfg()
			cfg.MaxThreadsPerMachine, cfg.MaxBytesPerMachine = 25, 40<<10
			st, err := Open(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = st.Close() })
			s := st.(*sqlStore)
			rng := rand.New(rand.NewPCG(5, 6))
			base := time.Now().Add(-48 * time.Hour)
			for step := range 60 {
				switch rng.IntN(8) {
				case 0:
					if _, err := s.Prune(ctx, base.Add(time.Duration(rng.IntN(3600))*time.Second)); err != nil {
						t.Fatal(err)
					}
				default:
					machine := fmt.Sprintf("m%d", rng.IntN(3))
					var batch []Thread
					for range 1 + rng.IntN(12) {
						batch = append(batch, Thread{ID: fmt.Sprintf("t%d", rng.IntN(60)), Status: "running",
							Summary: strings.Repeat("é", rng.IntN(3000)), Workflow: strings.Repeat("w", rng.IntN(300)),
							UpdatedAt: base.Add(time.Duration(rng.IntN(7200)) * time.Second)})
					}
					if _, err := s.SyncThreadsResult(ctx, machine, batch); err != nil {
						t.Fatal(err)
					}
				}
				rows, err := s.r.QueryContext(ctx, `SELECT name, thread_count, stored_bytes,
(SELECT count(*) FROM threads WHERE threads.machine = machines.name),
(SELECT coalesce(sum(bytes), 0) FROM threads WHERE threads.machine = machines.name) FROM machines`)
				if err != nil {
					t.Fatal(err)
				}
				for rows.Next() {
					var name string
					var count, size, realCount, realSize int64
					if err := rows.Scan(&name, &count, &size, &realCount, &realSize); err != nil {
						t.Fatal(err)
					}
					if count != realCount || size != realSize {
						t.Fatalf("step %d: %s counted %d threads, %d bytes; has %d, %d", step, name, count, size, realCount, realSize)
					}
					if count > int64(cfg.MaxThreadsPerMachine) || size > cfg.MaxBytesPerMachine {
						t.Fatalf("step %d: %s over its share: %d threads, %d bytes", step, name, count, size)
					}
				}
				closeQuietly(rows)
				// And each row's bytes are what the gateway computes.
				page, err := s.SearchThreads(ctx, ThreadQuery{Limit: MaxLimit})
				if err != nil {
					t.Fatal(err)
				}
				for _, th := range page.Threads {
					var stored int64
					if err := s.r.QueryRowContext(ctx, s.q(`SELECT bytes FROM threads WHERE machine = $1 AND id = $2`), th.Machine, th.ID).Scan(&stored); err != nil {
						t.Fatal(err)
					}
					if want := threadBytes(th); stored != want {
						t.Fatalf("step %d: %s/%s counts %d bytes, takes %d", step, th.Machine, th.ID, stored, want)
					}
				}
			}
		})
	}
}

// A database made before machines had shares gets them counted when it
// is migrated: the threads it holds count as the gateway counts them.
func TestMigrationCountsTheSharesOfAnOlderDatabase(t *testing.T) {
	for _, b := range []struct {
		name, driver, dir string
		dialect           goose.Dialect
		before            int64
		cfg               func() (Config, string)
	}{
		{"sqlite", "sqlite", "sqlite", goose.DialectSQLite3, 3, func() (Config, string) {
			dir := t.TempDir()
			return Config{DataDir: dir}, sqliteDSN(filepath.Join(dir, SQLiteFile), defaultBusyTimeout, "immediate")
		}},
		{"postgres", "pgx", "postgres", goose.DialectPostgres, 4, func() (Config, string) {
			u := pgtest.URL(t)
			return Config{DatabaseURL: u}, u
		}},
	} {
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			cfg, dsn := b.cfg()
			db, err := sql.Open(b.driver, dsn)
			if err != nil {
				t.Fatal(err)
			}
			fsys, err := fs.Sub(migrations, "migrations/"+b.dir)
			if err != nil {
				t.Fatal(err)
			}
			p, err := goose.NewProvider(b.dialect, db, fsys, goose.WithDisableGlobalRegistry(true))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := p.UpTo(ctx, b.before); err != nil {
				t.Fatal(err)
			}
			now := any(int64(1_780_000_000_000_000))
			if b.dialect == goose.DialectPostgres {
				now = time.UnixMicro(1_780_000_000_000_000)
			}
			if _, err := db.ExecContext(ctx, `INSERT INTO machines (name, first_seen, last_seen) VALUES ('m1', $1, $1), ('m2', $1, $1), ('empty', $1, $1)`, now); err != nil {
				t.Fatal(err)
			}
			for i := range 30 {
				usage := any(nil)
				if i%3 == 0 {
					usage = `{"calls":1}`
				}
				if _, err := db.ExecContext(ctx, `INSERT INTO threads (machine, id, workflow, status, prompt, summary, usage, updated_at) VALUES ($1, $2, 'wf', 'completed', $3, $4, $5, $6)`,
					[]string{"m1", "m2"}[i%2], fmt.Sprintf("t%02d", i), strings.Repeat("日", i), strings.Repeat("s", 10*i), usage, now); err != nil {
					t.Fatal(err)
				}
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			st, err := Open(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = st.Close() }() // a test's store
			s := st.(*sqlStore)
			want := map[string][2]int64{"empty": {}}
			page, err := s.SearchThreads(ctx, ThreadQuery{Limit: MaxLimit})
			if err != nil {
				t.Fatal(err)
			}
			for _, th := range page.Threads {
				w := want[th.Machine]
				want[th.Machine] = [2]int64{w[0] + 1, w[1] + threadBytes(th)}
			}
			for name, w := range want {
				var got [2]int64
				if err := s.r.QueryRowContext(ctx, s.q(`SELECT thread_count, stored_bytes FROM machines WHERE name = $1`), name).Scan(&got[0], &got[1]); err != nil {
					t.Fatal(err)
				}
				if got != w {
					t.Errorf("%s after the migration: %v (threads, bytes), want %v", name, got, w)
				}
			}
		})
	}
}
