package store

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/pressly/goose/v3"
	_ "modernc.org/sqlite" // the pure-Go driver: the gateway builds with CGO_ENABLED=0
)

// defaultBusyTimeout is how long a SQLite statement waits for another
// connection's lock by default: long enough to ride out a checkpoint or a
// big resync, short enough to surface a stuck writer.
const defaultBusyTimeout = 10_000 // milliseconds

// sqliteDSN is the driver's connection string for path. Every connection
// gets the pragmas, since each one is its own SQLite session.
func sqliteDSN(path string, busyMS int64, txlock string) string {
	v := url.Values{}
	v.Add("_pragma", "busy_timeout("+strconv.FormatInt(busyMS, 10)+")")
	// WAL lets readers go on while the writer writes.
	v.Add("_pragma", "journal_mode(WAL)")
	// NORMAL is durable in WAL mode except for the last transactions
	// before a power loss, which the fleet's memory can afford.
	v.Add("_pragma", "synchronous(NORMAL)")
	v.Add("_pragma", "foreign_keys(ON)")
	v.Set("_txlock", txlock)
	return "file:" + path + "?" + v.Encode()
}

// openSQLite opens <DataDir>/gateway.db.
func openSQLite(ctx context.Context, cfg Config) (Store, error) {
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("store: data directory: %w", err)
	}
	path := filepath.Join(cfg.DataDir, SQLiteFile)
	if strings.ContainsAny(path, "?#") {
		// The driver reads the path as a URI: these would start its query.
		return nil, fmt.Errorf("store: data directory %q: the characters ? and # are not supported", cfg.DataDir)
	}
	busy := int64(defaultBusyTimeout)
	if cfg.BusyTimeout > 0 {
		busy = cfg.BusyTimeout.Milliseconds()
	}
	st, err := openSQLiteFile(ctx, path, busy)
	if err != nil {
		return nil, err
	}
	st.now, st.maxTotal, st.maxThreads, st.maxBytes = cfg.Now, cfg.MaxTotal, cfg.MaxThreadsPerMachine, cfg.MaxBytesPerMachine
	// Which file this is, for Check: the one at path now, read after the
	// open (replacing it between the two is not a race anyone runs).
	st.path, st.where = path, path
	if st.opened, err = os.Stat(path); err == nil {
		st.identity, err = readIdentity(ctx, st.w)
	}
	if err != nil {
		_ = st.Close() // the error that matters is err
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	// The first reading is taken here, before Open returns: taken by the
	// poller, it could come after another process's commit made meanwhile
	// (a busy machine delays a new goroutine), and that commit would never
	// be told.
	first := int64(-1)
	if err := st.w.QueryRowContext(ctx, "PRAGMA data_version").Scan(&first); err != nil {
		first = -1 // the poller's first reading is the baseline then
	}
	pollCtx, stopPolling := context.WithCancel(context.Background())
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		st.pollDataVersion(pollCtx, dataVersionInterval, first)
	}()
	st.stopPolling = func() { stopPolling(); <-polled }
	return st, nil
}

// dataVersionInterval is how often a SQLite store looks for commits made
// by other processes (`uncaged-gateway token revoke` beside a running
// gateway): a revocation takes effect within about this long.
const dataVersionInterval = time.Second

// pollDataVersion publishes a ChangeReload whenever another process has
// committed to the file since last (the counter's value when the store
// opened; -1 if unknown), until ctx ends. SQLite has no notifications
// between processes, but PRAGMA data_version changes on a connection when
// any other connection commits. It is read on the writer's connection,
// not a connection of its own: every commit of this process goes through
// that one connection, so a change there is always another process's,
// whereas a separate connection would also see this process's own writes
// (every heartbeat and thread sync) and could not tell them apart from a
// revocation made next to them. What the other process changed is not
// known, so subscribers re-read everything; that is rare (a token
// command), and costs one query each.
func (s *sqlStore) pollDataVersion(ctx context.Context, every time.Duration, last int64) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		var v int64
		// The writer pool has one connection, so this runs on it (after any
		// write in progress). Should the pool ever replace its connection,
		// the new one's counter differs and costs one spurious reload.
		err := s.w.QueryRowContext(ctx, "PRAGMA data_version").Scan(&v)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			// A transient error (the file is busy): look again next tick.
		case last >= 0 && v != last:
			s.hub.publish(Change{Kind: ChangeReload})
			last = v
		default:
			last = v
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// openSQLiteFile opens path's writer and reader pools and migrates,
// making the file first if there is none.
func openSQLiteFile(ctx context.Context, path string, busy int64) (*sqlStore, error) {
	// The pools open connections when they need them, for as long as the
	// store lives, and a connection opened on a missing file would make a
	// new, empty database there: the one gateway.db removed or moved away
	// must not be silently replaced. So the file is made here, once (an
	// empty file is an empty database), and every connection opens it
	// read-write without creating (mode=rw).
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	dsn := func(txlock string) string { return sqliteDSN(path, busy, txlock) + "&mode=rw" }
	// The writer begins transactions IMMEDIATE: taking the write lock at
	// BEGIN means a transaction never fails half-way when it first writes.
	w, err := sql.Open("sqlite", dsn("immediate"))
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	w.SetConnMaxIdleTime(0)
	if err := w.PingContext(ctx); err != nil {
		_ = w.Close() // the ping's error is the one to report
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	if err := migrate(ctx, w, goose.DialectSQLite3, "sqlite"); err != nil {
		_ = w.Close() // the migration's error is the one to report
		return nil, fmt.Errorf("%w (database %s)", err, path)
	}
	r, err := sql.Open("sqlite", dsn("deferred"))
	if err != nil {
		_ = w.Close() // the open's error is the one to report
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	return &sqlStore{backend: BackendSQLite, w: w, r: r, hub: newHub()}, nil
}
