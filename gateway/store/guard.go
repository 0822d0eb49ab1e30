package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"database/sql/driver"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"golang.org/x/sys/unix"
)

// A gateway's database can be removed or replaced under it: gateway.db
// deleted (the gateway writes on to the unlinked file, a token command
// beside it makes a new one, whose tokens the gateway has never heard
// of), a backup copied over it, a PostgreSQL URL that now reaches another
// database. The store is what knows which database it opened.
//
// Invariant: a store knows the identity of the database it opened (a row
// drawn when the database was made), and Check says whether the database
// at its configured place is still that one — the same file (device and
// inode) at the path, the same identity row — and answers the queries
// requests depend on. A gateway claims the database it uses (Claim), so
// a token command can tell whether a running gateway uses the database
// it opened (SQLiteHolder, Holders), and refuse to change another.

// ErrUnreachable is returned (wrapped) by Check when the database did not
// answer at all — the network, the server down, a timeout — rather than
// answered wrong: every replica shares a PostgreSQL server, and they go on
// serving from memory meanwhile.
var ErrUnreachable = errors.New("the database does not answer")

// unreachable wraps err in ErrUnreachable when it says the database
// server is out of reach or out of service (serverGone): the check and
// the requests judge a server by one rule, so a server shutting down
// (57P01 on the check's session) is the outage it is, never a database
// "not usable". SQLite's lock and disk errors, which requests wait out
// too (Unavailable), are the local file's, not a server's absence.
func unreachable(err error) error {
	if serverGone(err) && !errors.Is(err, ErrUnreachable) {
		return fmt.Errorf("%w: %w", ErrUnreachable, err)
	}
	return err
}

// notReached says whether err is the network's or the connection's, not
// the database's answer to what was asked.
func notReached(err error) bool {
	var netErr net.Error
	var connectErr *pgconn.ConnectError
	return errors.As(err, &netErr) || errors.As(err, &connectErr) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, driver.ErrBadConn) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) || pgconn.Timeout(err)
}

// serverGone says whether err means the database server is out of reach
// or out of service for now: not reached, the session ended under the
// statement, or PostgreSQL's own word for it — class 08 (connection
// exception), 53 (insufficient resources: too many connections, disk
// full), 57 (operator intervention: shutting down, starting up,
// terminated by an administrator).
func serverGone(err error) bool {
	if errors.Is(err, ErrUnreachable) || notReached(err) || errors.Is(err, sql.ErrConnDone) {
		return true
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		if len(pgErr.Code) != 5 {
			return false
		}
		switch pgErr.Code[:2] {
		case "08", "53", "57":
			return true
		}
		return false
	}
	// pgx's own word for a connection it closed under a statement.
	return strings.Contains(err.Error(), "conn closed")
}

// Unavailable says whether err, from any method of a store, means the
// database is out of reach or out of service for now — the network, a
// server stopped, restarting or shutting down, out of connections, a
// SQLite file locked past its timeout or its disk full — so that what
// was asked may succeed unchanged later, rather than that the database
// refused it. A write queued for later (the gateway's audit entries and
// fleet events during an outage) waits on such an error; any other is the
// request's own.
func Unavailable(err error) bool {
	if err == nil {
		return false
	}
	if serverGone(err) {
		return true
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return false
	}
	// SQLite's word for a lock or a disk it could not get past.
	msg := err.Error()
	for _, s := range []string{"SQLITE_BUSY", "database is locked", "SQLITE_FULL", "database or disk is full", "SQLITE_IOERR"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// Identity is which database a store is.
type Identity struct {
	// ID is drawn when the database is made (or first migrated to a
	// version that has one).
	ID string
	// CreatedAt is when.
	CreatedAt time.Time
}

// Guard is what a store tells about the database behind it, beyond its
// data. Store has it.
type Guard interface {
	// Identity is the identity of the database, read when the store was
	// opened.
	Identity() Identity
	// Where names the database for people: SQLite's file, PostgreSQL's
	// URL without its password.
	Where() string
	// Check says what is wrong, nil when nothing is: the database at the
	// store's configured place is no longer the one it opened (removed,
	// replaced), or cannot be reached, or the tables every request needs
	// (tokens, registrations) do not answer. It reads little: a gateway
	// calls it every few seconds.
	Check(ctx context.Context) error
	// Claim records that a running gateway uses the database until
	// release is called: SQLite, a lock held on gateway.lock beside the
	// file; PostgreSQL, a heartbeat row refreshed every few seconds.
	Claim(ctx context.Context) (release func(), err error)
	// Holders are the running gateways that claimed the database.
	Holders(ctx context.Context) ([]Holder, error)
}

// Holder is a running gateway that claimed a database.
type Holder struct {
	// PID and Host say which process.
	PID  int    `json:"pid"`
	Host string `json:"host"`
	// Database is the identity of the database it opened.
	Database string `json:"database"`
	// File is, for SQLite, the file it opened ("device:inode", FileID): a
	// file put in its place is another, whatever it holds — and opening it
	// to read its identity would mix it with the write-ahead log the
	// gateway's file left beside it.
	File string `json:"file,omitempty"`
	// Since is when it claimed it.
	Since time.Time `json:"since"`
}

// String names h for people.
func (h Holder) String() string {
	return fmt.Sprintf("pid %d on %s, since %s", h.PID, h.Host, h.Since.UTC().Format(time.RFC3339))
}

// LockFile is the file beside a SQLite database that the gateway using it
// holds locked, and which names it.
const LockFile = "gateway.lock"

// readIdentity reads db's identity row.
func readIdentity(ctx context.Context, db *sql.DB) (Identity, error) {
	var id Identity
	err := db.QueryRowContext(ctx, `SELECT id, created_at FROM store_identity`).Scan(&id.ID, timeDest{&id.CreatedAt})
	return id, err
}

// Identity implements Guard.
func (s *sqlStore) Identity() Identity { return s.identity }

// Where implements Guard.
func (s *sqlStore) Where() string { return s.where }

// Check implements Guard.
func (s *sqlStore) Check(ctx context.Context) error {
	if s.backend == BackendSQLite {
		if err := s.checkFile(); err != nil {
			return err
		}
	}
	id, err := readIdentity(ctx, s.r)
	switch {
	case err != nil && s.backend == BackendPostgres && strings.Contains(err.Error(), "does not exist"):
		return fmt.Errorf("the database at %s is not the one this gateway opened (database %s): it has no identity, it was replaced or emptied", s.where, s.identity.ID)
	case err != nil:
		return fmt.Errorf("the database at %s: reading its identity: %w", s.where, unreachable(err))
	case id.ID != s.identity.ID:
		return fmt.Errorf("the database at %s is database %s, not %s, the one this gateway opened: it was replaced while the gateway runs", s.where, id.ID, s.identity.ID)
	}
	return s.checkTables(ctx)
}

// checkFile says whether the file at the SQLite path is still the one
// the store opened.
func (s *sqlStore) checkFile() error {
	fi, err := os.Stat(s.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if _, derr := os.Stat(filepath.Dir(s.path)); errors.Is(derr, fs.ErrNotExist) {
			return fmt.Errorf("the data directory %s was removed while the gateway runs (it still uses the removed database %s); restore it: a restart would start an empty database, without the tokens and history it had", filepath.Dir(s.path), s.identity.ID)
		}
		return fmt.Errorf("the database file %s was removed while the gateway runs (it still uses the removed database %s); restore it: a restart would start an empty database, without the tokens and history it had", s.path, s.identity.ID)
	case err != nil:
		return fmt.Errorf("cannot check the database file %s: %w", s.path, err)
	case !os.SameFile(fi, s.opened):
		return fmt.Errorf("the database file %s was replaced while the gateway runs: it is not the file the gateway opened (database %s), which it still uses; put the gateway's file back, or restart the gateway to use the new one", s.path, s.identity.ID)
	}
	return nil
}

// checkTables runs what requests run on the tables they need, and on
// SQLite checks those tables' pages: a corrupt token table makes every
// request fail, and that is not ready.
func (s *sqlStore) checkTables(ctx context.Context) error {
	for _, p := range []struct{ table, query string }{
		{"tokens", `SELECT ` + tokenCols + ` FROM tokens WHERE id = $1`},
		{"registrations", `SELECT ` + registrationCols + ` FROM registrations WHERE name = $1`},
	} {
		rows, err := s.r.QueryContext(ctx, s.q(p.query), "")
		if err == nil {
			for rows.Next() {
			}
			err = rows.Err()
			closeQuietly(rows)
		}
		if err != nil {
			return fmt.Errorf("the database at %s does not answer what requests need: table %s: %w", s.where, p.table, unreachable(err))
		}
	}
	if s.backend != BackendSQLite {
		return nil
	}
	for _, table := range []string{"tokens", "registrations", "store_identity"} {
		var result string
		// The table's pages and its indexes' only: small tables, read
		// whole at each check.
		if err := s.r.QueryRowContext(ctx, `PRAGMA quick_check(`+table+`)`).Scan(&result); err != nil {
			return fmt.Errorf("the database at %s: checking table %s: %w", s.where, table, unreachable(err))
		}
		if result != "ok" {
			return fmt.Errorf("the database at %s is damaged: table %s: %s", s.where, table, result)
		}
	}
	return nil
}

// Claim implements Guard.
func (s *sqlStore) Claim(ctx context.Context) (func(), error) {
	host, _ := os.Hostname()
	me := Holder{PID: os.Getpid(), Host: host, Database: s.identity.ID, Since: time.Now().UTC()}
	if s.backend == BackendPostgres {
		return s.claimPostgres(ctx, me)
	}
	me.File = fileID(s.opened)
	f, err := os.OpenFile(filepath.Join(filepath.Dir(s.path), LockFile), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("store: claim %s: %w", s.path, err)
	}
	// Shared: the lock says a gateway uses the file, not that only one
	// may. A token command tries it exclusively to learn whether any does.
	if err := unix.Flock(int(f.Fd()), unix.LOCK_SH); err != nil {
		_ = f.Close() // the lock's error is the one to report
		return nil, fmt.Errorf("store: claim %s: %w", s.path, err)
	}
	data, _ := json.Marshal(me) // strings, numbers and a time
	err = f.Truncate(0)
	if err == nil {
		_, err = f.WriteAt(append(data, '\n'), 0)
	}
	if err != nil {
		_ = f.Close() // the write's error is the one to report
		return nil, fmt.Errorf("store: claim %s: %w", s.path, err)
	}
	var once sync.Once
	return func() { once.Do(func() { _ = f.Close() }) }, nil // closing releases the lock
}

// FileID names the file at path as Holder.File does; "" when there is
// none.
func FileID(path string) (string, error) {
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("store: %w", err)
	}
	return fileID(fi), nil
}

// fileID is fi's device and inode.
func fileID(fi os.FileInfo) string {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return fmt.Sprintf("%d:%d", st.Dev, st.Ino)
	}
	return ""
}

// SQLiteHolder says which running gateway uses the SQLite database in
// dataDir, nil when none does, without opening (or creating) it: a
// gateway holds gateway.lock there. The marker is read even when the
// database file itself is gone.
func SQLiteHolder(dataDir string) (*Holder, error) {
	f, err := os.Open(filepath.Join(dataDir, LockFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	defer func() { _ = f.Close() }() // read only
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err == nil {
		_ = unix.Flock(int(f.Fd()), unix.LOCK_UN) // nobody held it
		return nil, nil
	} else if !errors.Is(err, unix.EWOULDBLOCK) {
		return nil, fmt.Errorf("store: %s: %w", f.Name(), err)
	}
	data, err := io.ReadAll(io.LimitReader(f, 4<<10))
	if err != nil {
		return nil, fmt.Errorf("store: %s: %w", f.Name(), err)
	}
	var h Holder
	if json.Unmarshal(data, &h) != nil {
		// Held, and being written: a gateway all the same.
		return &Holder{}, nil
	}
	return &h, nil
}

// Holders implements Guard.
func (s *sqlStore) Holders(ctx context.Context) ([]Holder, error) {
	if s.backend == BackendSQLite {
		h, err := SQLiteHolder(filepath.Dir(s.path))
		if h == nil || err != nil {
			return nil, err
		}
		return []Holder{*h}, nil
	}
	rows, err := s.r.QueryContext(ctx, `SELECT host, pid, started_at FROM gateway_heartbeats WHERE seen_at > now() - $1::interval ORDER BY started_at`,
		fmt.Sprintf("%d seconds", int(heartbeatFresh/time.Second)))
	if err != nil {
		return nil, fmt.Errorf("store: gateways using the database: %w", err)
	}
	defer closeQuietly(rows)
	var out []Holder
	for rows.Next() {
		h := Holder{Database: s.identity.ID}
		if err := rows.Scan(&h.Host, &h.PID, timeDest{&h.Since}); err != nil {
			return nil, fmt.Errorf("store: gateways using the database: %w", err)
		}
		out = append(out, h)
	}
	return out, rows.Err()
}

// heartbeatEvery is how often a gateway on PostgreSQL refreshes its
// heartbeat row; heartbeatFresh is how old a row may be and still count,
// and heartbeatForget when a row left by a gateway that died is deleted.
const (
	heartbeatEvery  = 5 * time.Second
	heartbeatFresh  = 30 * time.Second
	heartbeatForget = 24 * time.Hour
)

// claimPostgres keeps a heartbeat row for me until release.
func (s *sqlStore) claimPostgres(ctx context.Context, me Holder) (func(), error) {
	var b [12]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	holder := hex.EncodeToString(b[:])
	beat := func(ctx context.Context) error {
		_, err := s.w.ExecContext(ctx, `INSERT INTO gateway_heartbeats (holder, host, pid, started_at, seen_at) VALUES ($1, $2, $3, $4, now())
ON CONFLICT (holder) DO UPDATE SET seen_at = now()`, holder, me.Host, me.PID, me.Since)
		return err
	}
	if err := beat(ctx); err != nil {
		return nil, fmt.Errorf("store: claim %s: %w", s.where, err)
	}
	// Rows of gateways that died without releasing theirs.
	_, _ = s.w.ExecContext(ctx, `DELETE FROM gateway_heartbeats WHERE seen_at < now() - $1::interval`, fmt.Sprintf("%d seconds", int(heartbeatForget/time.Second)))
	loop, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(heartbeatEvery)
		defer t.Stop()
		for {
			select {
			case <-loop.Done():
				return
			case <-t.C:
				bctx, cancel := context.WithTimeout(loop, heartbeatEvery)
				_ = beat(bctx) // a missed beat is retried at the next; Check reports a database that does not answer
				cancel()
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			stop()
			<-done
			dctx, cancel := context.WithTimeout(context.Background(), heartbeatEvery)
			defer cancel()
			_, _ = s.w.ExecContext(dctx, `DELETE FROM gateway_heartbeats WHERE holder = $1`, holder) // else it ages out
		})
	}, nil
}
