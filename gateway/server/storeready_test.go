package server

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/uncaged/workflow/gateway/store"
	"github.com/uncaged/workflow/shared/testkit"
)

// checkCounting is a store that counts its checks.
type checkCounting struct {
	store.Store
	checks atomic.Int32
}

func (c *checkCounting) Check(ctx context.Context) error {
	defer c.checks.Add(1)
	return c.Store.Check(ctx)
}

// readyz is GET /readyz's status and error.
func readyz(t *testing.T, f *fixture) (int, string) {
	t.Helper()
	resp, body := f.do("GET", "/readyz", "", nil)
	var out struct{ Error string }
	_ = json.Unmarshal([]byte(body), &out)
	return resp.StatusCode, out.Error
}

// storeLines counts the log's lines about the store's state.
func storeLines(t *testing.T, logs *testkit.Buffer) (errors, recovered int) {
	t.Helper()
	for _, l := range strings.Split(logs.String(), "\n") {
		var line struct{ Level, Msg string }
		if json.Unmarshal([]byte(l), &line) != nil {
			continue
		}
		switch {
		case line.Msg == "store not usable: not ready until it is" && line.Level == "ERROR":
			errors++
		case line.Msg == "store usable again: ready":
			recovered++
		}
	}
	return errors, recovered
}

// /readyz follows the store: while its database is not the one the
// gateway opened, or does not answer what every request needs, it is 503
// with the reason, and the state's change is logged once, as an ERROR;
// when the store is usable again, ready again, logged once.
func TestReadinessFollowsTheStore(t *testing.T) {
	t.Parallel()
	sqliteDB := func(t *testing.T, dir string) *sql.DB {
		db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, store.SQLiteFile)+"?_pragma=busy_timeout(10000)")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = db.Close() })
		return db
	}
	exec := func(t *testing.T, dir, stmt string) {
		if _, err := sqliteDB(t, dir).Exec(stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	for _, v := range []struct {
		name        string
		break_, fix func(t *testing.T, dir string)
		want        string
	}{
		{"the tokens table renamed away", func(t *testing.T, dir string) { exec(t, dir, `ALTER TABLE tokens RENAME TO tokens_gone`) },
			func(t *testing.T, dir string) { exec(t, dir, `ALTER TABLE tokens_gone RENAME TO tokens`) }, "no such table: tokens"},
		{"the database file moved away", func(t *testing.T, dir string) {
			if err := os.Rename(filepath.Join(dir, store.SQLiteFile), filepath.Join(dir, "moved.db")); err != nil {
				t.Fatal(err)
			}
		}, func(t *testing.T, dir string) {
			if err := os.Rename(filepath.Join(dir, "moved.db"), filepath.Join(dir, store.SQLiteFile)); err != nil {
				t.Fatal(err)
			}
		}, "was removed while the gateway runs"},
		{"the database file replaced", func(t *testing.T, dir string) {
			if err := os.Rename(filepath.Join(dir, store.SQLiteFile), filepath.Join(dir, "kept.db")); err != nil {
				t.Fatal(err)
			}
			other, err := store.Open(context.Background(), store.Config{DataDir: dir})
			if err != nil {
				t.Fatal(err)
			}
			_ = other.Close()
		}, nil, "was replaced while the gateway runs"},
	} {
		t.Run(v.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			st, err := store.Open(context.Background(), store.Config{DataDir: dir})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = st.Close() })
			var logs testkit.Buffer
			counted := &checkCounting{Store: st}
			f := newFixture(t, time.Hour, func(o *Options) {
				o.Store, o.Logger, o.storeCheckEvery = counted, slog.New(slog.NewJSONHandler(&logs, nil)), 10*time.Millisecond
			})
			if code, why := readyz(t, f); code != 200 {
				t.Fatalf("/readyz with the store as opened: %d %s", code, why)
			}
			v.break_(t, dir)
			testkit.WaitUntil(t, "/readyz to say the store is not usable", func() bool {
				code, why := readyz(t, f)
				return code == 503 && strings.HasPrefix(why, "store: ") && strings.Contains(why, v.want)
			})
			// Many checks later, still one line.
			_, metrics := f.do("GET", "/metrics", "", nil)
			if !strings.Contains(metrics, "uncaged_gateway_store_ready 0\n") {
				t.Fatal("uncaged_gateway_store_ready is not 0")
			}
			checked := counted.checks.Load()
			testkit.WaitUntil(t, "five more checks", func() bool { return counted.checks.Load() >= checked+5 })
			if errs, _ := storeLines(t, &logs); errs != 1 {
				t.Fatalf("%d ERROR lines for one change of state:\n%s", errs, logs.String())
			}
			if v.fix == nil {
				return // two databases now share one write-ahead log: no way back
			}
			v.fix(t, dir)
			testkit.WaitUntil(t, "/readyz to be ready again", func() bool {
				code, _ := readyz(t, f)
				return code == 200
			})
			// The recovery line follows the change /readyz reports.
			testkit.WaitUntil(t, "the recovery to be logged", func() bool {
				_, recovered := storeLines(t, &logs)
				return recovered >= 1
			})
			if errs, recovered := storeLines(t, &logs); errs != 1 || recovered != 1 {
				t.Fatalf("%d ERROR and %d recovery lines for two changes of state:\n%s", errs, recovered, logs.String())
			}
		})
	}
}

// unreachableStore is a store whose checks find its database out of
// reach until fixed.
type unreachableStore struct {
	store.Store
	down atomic.Bool
}

func (u *unreachableStore) Check(ctx context.Context) error {
	if u.down.Load() {
		return fmt.Errorf("the database at %s: %w: dial tcp: connection refused", u.Where(), store.ErrUnreachable)
	}
	return u.Store.Check(ctx)
}

// A store that does not answer at all keeps the gateway ready — every
// replica shares the PostgreSQL server, and they serve from memory — and
// /readyz says where the store stands; it shows in
// uncaged_gateway_store_ready, and the outage is told twice: one ERROR
// as it starts, one as it ends, however many checks saw it.
func TestAStoreOutOfReachKeepsTheGatewayReady(t *testing.T) {
	t.Parallel()
	st, err := store.Open(context.Background(), store.Config{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	u := &unreachableStore{Store: st}
	var logs testkit.Buffer
	counted := &checkCounting{Store: u}
	f := newFixture(t, time.Hour, func(o *Options) {
		o.Store, o.Logger, o.storeCheckEvery = counted, slog.New(slog.NewJSONHandler(&logs, nil)), 10*time.Millisecond
	})
	if ready := readyzBody(t, f); ready.Store == nil || ready.Store.Status != "up" {
		t.Fatalf("/readyz with the store up: %+v", ready)
	}
	u.down.Store(true)
	testkit.WaitUntil(t, "the store out of reach to be seen", func() bool {
		_, metrics := f.do("GET", "/metrics", "", nil)
		return strings.Contains(metrics, "uncaged_gateway_store_ready 0\n")
	})
	checked := counted.checks.Load()
	testkit.WaitUntil(t, "five more checks", func() bool { return counted.checks.Load() >= checked+5 })
	ready := readyzBody(t, f)
	if ready.code != 200 || !ready.OK || ready.Store == nil || ready.Store.Status != "down" || !strings.Contains(ready.Store.Error, "does not answer") || ready.Store.Since == "" {
		t.Fatalf("/readyz with the store out of reach: %+v", ready)
	}
	u.down.Store(false)
	testkit.WaitUntil(t, "the store back", func() bool {
		_, metrics := f.do("GET", "/metrics", "", nil)
		return strings.Contains(metrics, "uncaged_gateway_store_ready 1\n") && readyzBody(t, f).Store.Status == "up"
	})
	logged := logs.String()
	if n := strings.Count(logged, `"level":"ERROR","msg":"store outage: the database does not answer`); n != 1 {
		t.Fatalf("%d ERROR lines for the start of one outage:\n%s", n, logged)
	}
	if n := strings.Count(logged, `"level":"ERROR","msg":"store outage over`); n != 1 {
		t.Fatalf("%d ERROR lines for the end of one outage:\n%s", n, logged)
	}
	if errs, recovered := storeLines(t, &logs); errs != 0 || recovered != 0 {
		t.Fatalf("%d not-ready ERROR and %d ready-again lines for an outage:\n%s", errs, recovered, logged)
	}
}

// readyAnswer is /readyz's answer.
type readyAnswer struct {
	code  int
	OK    bool   `json:"ok"`
	Error string `json:"error"`
	Store *struct {
		Status string `json:"status"`
		Since  string `json:"since"`
		Error  string `json:"error"`
		Queued int    `json:"queued"`
	} `json:"store"`
}

// readyzBody is GET /readyz's status and answer.
func readyzBody(t *testing.T, f *fixture) readyAnswer {
	t.Helper()
	resp, body := f.do("GET", "/readyz", "", nil)
	var out readyAnswer
	if err := json.Unmarshal([]byte(body), &out); err != nil {
		t.Fatalf("/readyz: %d %s", resp.StatusCode, body)
	}
	out.code = resp.StatusCode
	return out
}
