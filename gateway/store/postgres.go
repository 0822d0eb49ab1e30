package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
)

// notifyChannel is the PostgreSQL channel every gateway process listens on.
const notifyChannel = "uncaged_gateway_changes"

// listenerAppName marks the LISTEN connection in pg_stat_activity, so an
// operator (or a test) can tell it from the pool's.
const listenerAppName = "uncaged-gateway-listen"

// maxPayload keeps a NOTIFY payload under PostgreSQL's 8000-byte limit,
// with room for the JSON around the ids.
const maxPayload = 7000

// defaultConnectTimeout bounds connecting when the URL names no
// connect_timeout: an unreachable server should fail Open, not hang it.
const defaultConnectTimeout = 10 * time.Second

// openPostgres connects to cfg.DatabaseURL.
func openPostgres(ctx context.Context, cfg Config) (Store, error) {
	pc, err := pgxpool.ParseConfig(cfg.DatabaseURL)
	if err != nil {
		// pgx's message leaves out the password.
		return nil, fmt.Errorf("store: database URL: %w", err)
	}
	if pc.ConnConfig.ConnectTimeout == 0 {
		pc.ConnConfig.ConnectTimeout = defaultConnectTimeout
	}
	if cfg.MaxConns > 0 {
		pc.MaxConns = cfg.MaxConns
	}
	where := fmt.Sprintf("PostgreSQL at %s:%d", pc.ConnConfig.Host, pc.ConnConfig.Port)
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("store: connect to %s: %w", where, err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("store: connect to %s: %w", where, err)
	}
	db := stdlib.OpenDBFromPool(pool)
	if err := migrate(ctx, db, goose.DialectPostgres, "postgres"); err != nil {
		_ = db.Close() // the migration's error is the one to report
		pool.Close()
		return nil, fmt.Errorf("%w (%s)", err, where)
	}
	identity, err := readIdentity(ctx, db)
	if err != nil {
		_ = db.Close() // the read's error is the one to report
		pool.Close()
		return nil, fmt.Errorf("store: %s: %w", where, err)
	}
	h := newHub()
	return &sqlStore{
		identity:   identity,
		where:      fmt.Sprintf("PostgreSQL database %s at %s:%d", pc.ConnConfig.Database, pc.ConnConfig.Host, pc.ConnConfig.Port),
		backend:    BackendPostgres,
		w:          db,
		r:          db,
		now:        cfg.Now,
		maxTotal:   cfg.MaxTotal,
		maxThreads: cfg.MaxThreadsPerMachine,
		maxBytes:   cfg.MaxBytesPerMachine,
		hub:        h,
		pg:         newPGListener(pc.ConnConfig.Copy(), h),
		closeExtra: pool.Close,
	}, nil
}

// notify sends changes on notifyChannel through exec: from inside a
// transaction (tx.ExecContext) PostgreSQL delivers them when, and only
// if, it commits. A long list of ids is split over several notifications
// to stay under the payload limit.
func notify(ctx context.Context, exec func(context.Context, string, ...any) (sql.Result, error), changes []Change) error {
	for _, c := range changes {
		for _, chunk := range chunkIDs(c.IDs) {
			payload, err := json.Marshal(Change{Kind: c.Kind, IDs: chunk})
			if err != nil {
				return err
			}
			if _, err := exec(ctx, `SELECT pg_notify($1, $2)`, notifyChannel, string(payload)); err != nil {
				return fmt.Errorf("notify: %w", err)
			}
		}
	}
	return nil
}

// syncBatch runs a resync on PostgreSQL: one transaction, the machine's
// upsert and then the thread upsert once per thread, sent as one pgx
// batch, then after (the machine's share) before the commit.
// pgx prepares the repeated statement once; the batch makes the 1,000
// executions of a full resync one round trip instead of 1,000, which was
// most of its time.
func syncBatch(ctx context.Context, db *sql.DB, machineSQL string, machineArgs []any, threadSQL string, threadArgs [][]any, before, after func(pgx.Tx) error) error {
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close() }() // returns it to the pool; nothing to report
	return conn.Raw(func(driverConn any) error {
		pc := driverConn.(*stdlib.Conn).Conn()
		tx, err := pc.Begin(ctx)
		if err != nil {
			return err
		}
		defer func() { _ = tx.Rollback(ctx) }() // after Commit it does nothing
		if err := before(tx); err != nil {
			return err
		}
		b := &pgx.Batch{}
		b.Queue(machineSQL, machineArgs...)
		for _, a := range threadArgs {
			b.Queue(threadSQL, a...)
		}
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return err
		}
		if err := after(tx); err != nil {
			return err
		}
		return tx.Commit(ctx)
	})
}

// chunkIDs splits ids into runs whose JSON fits in maxPayload.
func chunkIDs(ids []string) [][]string {
	var out [][]string
	var cur []string
	size := 0
	for _, id := range ids {
		n := len(id) + 8 // quotes, comma, and room for escapes
		if len(cur) > 0 && size+n > maxPayload {
			out = append(out, cur)
			cur, size = nil, 0
		}
		cur = append(cur, id)
		size += n
	}
	if len(cur) > 0 || len(out) == 0 {
		out = append(out, cur)
	}
	return out
}

// pgListener holds the store's one LISTEN connection, started by the
// first Subscribe, and turns notifications into hub publications.
type pgListener struct {
	cfg *pgx.ConnConfig
	hub *hub

	mu      sync.Mutex
	started bool
	stopped bool
	lastErr error         // why the last connection attempt failed, for ensure's error
	ready   chan struct{} // closed once LISTEN first succeeds
	cancel  context.CancelFunc
	done    chan struct{} // closed when run returns
}

func newPGListener(cfg *pgx.ConnConfig, h *hub) *pgListener {
	cfg.RuntimeParams["application_name"] = listenerAppName
	return &pgListener{cfg: cfg, hub: h, ready: make(chan struct{}), done: make(chan struct{})}
}

// ensure starts the listener if need be and waits until it listens.
func (l *pgListener) ensure(ctx context.Context) error {
	l.mu.Lock()
	if !l.started {
		l.started = true
		runCtx, cancel := context.WithCancel(context.Background())
		l.cancel = cancel
		go l.run(runCtx)
	}
	l.mu.Unlock()
	select {
	case <-l.ready:
		return nil
	case <-l.done:
		return errors.New("store closed")
	case <-ctx.Done():
		l.mu.Lock()
		last := l.lastErr
		l.mu.Unlock()
		if last != nil {
			return fmt.Errorf("waiting for LISTEN: %w (last attempt: %v)", ctx.Err(), last)
		}
		return fmt.Errorf("waiting for LISTEN: %w", ctx.Err())
	}
}

// stop ends the listener and waits for it.
func (l *pgListener) stop() {
	l.mu.Lock()
	if l.stopped {
		l.mu.Unlock()
		return
	}
	l.stopped = true
	started := l.started
	l.started = true // a Subscribe after Close must not start one
	cancel := l.cancel
	l.mu.Unlock()
	if !started {
		close(l.done)
		return
	}
	cancel()
	<-l.done
}

// Backoff bounds for reconnecting: quick at first (a restarted server is
// soon back), then no faster than every few seconds.
const (
	minBackoff = 50 * time.Millisecond
	maxBackoff = 5 * time.Second
)

// run listens until ctx ends, reconnecting when the connection is lost.
// After a reconnect it publishes ChangeReload: whatever was notified
// while it was away is lost.
func (l *pgListener) run(ctx context.Context) {
	defer close(l.done)
	backoff := minBackoff
	first := true
	for ctx.Err() == nil {
		err := l.listenOnce(ctx, func() {
			backoff = minBackoff
			if first {
				first = false
				close(l.ready)
			} else {
				l.hub.publish(Change{Kind: ChangeReload})
			}
		})
		if ctx.Err() != nil {
			return
		}
		// Lost or refused: retried below. The error is kept for a
		// Subscribe still waiting; the gateway's own health checks report
		// an unreachable database.
		l.mu.Lock()
		l.lastErr = err
		l.mu.Unlock()
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

// listenOnce connects, LISTENs (then calls listening) and publishes
// notifications until the connection fails or ctx ends.
func (l *pgListener) listenOnce(ctx context.Context, listening func()) error {
	conn, err := pgx.ConnectConfig(ctx, l.cfg)
	if err != nil {
		return err
	}
	// The connection is being abandoned: its close error changes nothing.
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	if _, err := conn.Exec(ctx, "LISTEN "+notifyChannel); err != nil {
		return err
	}
	listening()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		var c Change
		if json.Unmarshal([]byte(n.Payload), &c) != nil || c.Kind == "" {
			// Not ours or garbled: be safe and have everyone re-read.
			c = Change{Kind: ChangeReload}
		}
		l.hub.publish(c)
	}
}
