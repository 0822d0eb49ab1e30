package store

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/pressly/goose/v3"
)

// sqlStore is the Store over database/sql, shared by both backends: their
// SQL differs in few places (placeholders, time values, full-text search,
// notification), which dialect and the pg field cover.
type sqlStore struct {
	backend Backend
	// w takes every write. For SQLite it has one connection, so writers
	// queue in Go instead of failing with SQLITE_BUSY; for PostgreSQL it is
	// the same pool as r.
	w *sql.DB
	// r serves reads.
	r   *sql.DB
	now func() time.Time
	// maxTotal is Config.MaxTotal.
	maxTotal int
	// maxThreads and maxBytes are a machine's share (Config).
	maxThreads int
	maxBytes   int64
	hub        *hub
	// pg is PostgreSQL's LISTEN side; nil for SQLite, whose changes are
	// published in-process after commit.
	pg *pgListener
	// closeExtra releases what the backend holds beyond w and r.
	closeExtra func()
	// stopPolling ends SQLite's watch for other processes' commits
	// (pollDataVersion) and waits for it; nil for PostgreSQL.
	stopPolling func()
	// identity is the database's, read at open; where names it (guard.go).
	identity Identity
	where    string
	// path is SQLite's file, and opened what it was when the store
	// opened it.
	path   string
	opened os.FileInfo
	// notify says which notifications a thread sync adds (notify.go).
	notify notifyConfig
}

// Backend implements Store.
func (s *sqlStore) Backend() Backend { return s.backend }

// gooseDialect and migrationDir name the backend's migrations.
func (s *sqlStore) gooseDialect() (goose.Dialect, string) {
	if s.backend == BackendPostgres {
		return goose.DialectPostgres, "postgres"
	}
	return goose.DialectSQLite3, "sqlite"
}

// SchemaVersion implements Store.
func (s *sqlStore) SchemaVersion(ctx context.Context) (int64, error) {
	d, dir := s.gooseDialect()
	return schemaVersion(ctx, s.w, d, dir)
}

// Close implements Store.
func (s *sqlStore) Close() error {
	if s.stopPolling != nil {
		s.stopPolling() // before w closes under it
	}
	s.hub.close()
	if s.pg != nil {
		s.pg.stop()
	}
	var errs []error
	if s.r != s.w {
		errs = append(errs, s.r.Close())
	}
	errs = append(errs, s.w.Close())
	if s.closeExtra != nil {
		s.closeExtra()
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("store: close: %w", err)
	}
	return nil
}

// q adapts a query written with PostgreSQL's $N placeholders: SQLite
// reads $1 as a named parameter, numbered by first appearance, which
// breaks when one is reused; ?N is its positional form.
func (s *sqlStore) q(query string) string {
	if s.backend == BackendPostgres {
		return query
	}
	return strings.ReplaceAll(query, "$", "?")
}

// tv is a time as the backend stores it: PostgreSQL timestamptz, SQLite
// integer microseconds.
func (s *sqlStore) tv(t time.Time) any {
	t = utc(t)
	if s.backend == BackendPostgres {
		return t
	}
	return t.UnixMicro()
}

// tvp is tv for an optional time.
func (s *sqlStore) tvp(t *time.Time) any {
	if t == nil {
		return nil
	}
	return s.tv(*t)
}

// timeDest scans either backend's time into a time.Time.
type timeDest struct{ t *time.Time }

// Scan implements sql.Scanner.
func (d timeDest) Scan(v any) error {
	switch x := v.(type) {
	case int64:
		*d.t = time.UnixMicro(x).UTC()
	case time.Time:
		*d.t = x.UTC()
	default:
		return fmt.Errorf("store: cannot read %T as a time", v)
	}
	return nil
}

// nullTimeDest scans an optional time; NULL leaves nil.
type nullTimeDest struct{ t **time.Time }

// Scan implements sql.Scanner.
func (d nullTimeDest) Scan(v any) error {
	if v == nil {
		*d.t = nil
		return nil
	}
	var t time.Time
	if err := (timeDest{&t}).Scan(v); err != nil {
		return err
	}
	*d.t = &t
	return nil
}

// closeQuietly closes what has nothing left to report: rows whose Err
// was checked, a statement that goes with its transaction anyway.
func closeQuietly(c interface{ Close() error }) { _ = c.Close() }

// scanner is a *sql.Row or *sql.Rows.
type scanner interface{ Scan(dest ...any) error }

// write runs fn in a write transaction, then sends the changes it returns:
// PostgreSQL's NOTIFY inside the transaction (delivered only if it
// commits), SQLite's in-process fan-out after the commit.
func (s *sqlStore) write(ctx context.Context, what string, fn func(tx *sql.Tx) ([]Change, error)) error {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store: %s: begin: %w", what, err)
	}
	changes, err := fn(tx)
	if err == nil && s.pg != nil {
		err = notify(ctx, tx.ExecContext, changes)
	}
	if err != nil {
		_ = tx.Rollback() // the error that made us roll back is the one to report
		return fmt.Errorf("store: %s: %w", what, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("store: %s: commit: %w", what, err)
	}
	if s.pg == nil {
		for _, c := range changes {
			s.hub.publish(c)
		}
	}
	return nil
}

// Announce implements Store.
func (s *sqlStore) Announce(ctx context.Context, changes ...Change) error {
	if s.pg == nil {
		for _, c := range changes {
			s.hub.publish(c)
		}
		return nil
	}
	// Outside a transaction each notification is delivered at once.
	if err := notify(ctx, s.w.ExecContext, changes); err != nil {
		return fmt.Errorf("store: announce: %w", err)
	}
	return nil
}

// Subscribe implements Store.
func (s *sqlStore) Subscribe(ctx context.Context) (<-chan Change, error) {
	ch, cancel := s.hub.subscribe(ctx)
	if s.pg != nil {
		// Wait until this process listens: a change committed after
		// Subscribe returns must not be missed.
		if err := s.pg.ensure(ctx); err != nil {
			cancel()
			return nil, fmt.Errorf("store: subscribe: %w", err)
		}
	}
	return ch, nil
}

const tokenCols = "id, kind, name, created_at, expires_at, note, revoked_at"

func scanToken(row scanner) (Token, error) {
	var t Token
	var kind string
	err := row.Scan(&t.ID, &kind, &t.Name, timeDest{&t.CreatedAt}, nullTimeDest{&t.ExpiresAt}, &t.Note, nullTimeDest{&t.RevokedAt})
	t.Kind = TokenKind(kind)
	return t, err
}

func scanTokens(rows *sql.Rows) ([]Token, error) { return scanAll(rows, scanToken) }

// scanAll reads every row of rows with scan, and closes rows.
func scanAll[T any](rows *sql.Rows, scan func(scanner) (T, error)) ([]T, error) {
	defer closeQuietly(rows)
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// CreateToken implements Store.
func (s *sqlStore) CreateToken(ctx context.Context, t Token) error {
	if t.ID == "" {
		return errors.New("store: create token: empty id")
	}
	if !t.Kind.valid() {
		return fmt.Errorf("store: create token %s: unknown kind %q", t.ID, t.Kind)
	}
	if t.CreatedAt.IsZero() {
		t.CreatedAt = s.now()
	}
	res, err := s.w.ExecContext(ctx, s.q(`INSERT INTO tokens (`+tokenCols+`) VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (id) DO NOTHING`),
		t.ID, string(t.Kind), t.Name, s.tv(t.CreatedAt), s.tvp(t.ExpiresAt), t.Note, s.tvp(t.RevokedAt))
	if err != nil {
		return fmt.Errorf("store: create token %s: %w", t.ID, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("store: create token %s: %w", t.ID, err)
	} else if n == 0 {
		return fmt.Errorf("store: create token %s: %w", t.ID, ErrExists)
	}
	return nil
}

// GetToken implements Store.
func (s *sqlStore) GetToken(ctx context.Context, id string) (Token, error) {
	t, err := scanToken(s.r.QueryRowContext(ctx, s.q(`SELECT `+tokenCols+` FROM tokens WHERE id = $1`), id))
	if errors.Is(err, sql.ErrNoRows) {
		return Token{}, fmt.Errorf("store: token %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return Token{}, fmt.Errorf("store: token %s: %w", id, err)
	}
	return t, nil
}

// ListTokens implements Store.
func (s *sqlStore) ListTokens(ctx context.Context, f TokenFilter) ([]Token, error) {
	var w conditions
	if f.Kind != "" {
		w.add("kind = ?", string(f.Kind))
	}
	if f.Name != "" {
		w.add("name = ?", f.Name)
	}
	if f.ActiveOnly {
		w.addFixed("revoked_at IS NULL")
	}
	rows, err := s.r.QueryContext(ctx, s.q(`SELECT `+tokenCols+` FROM tokens`+w.clause()+` ORDER BY created_at DESC, id`), w.args...)
	if err != nil {
		return nil, fmt.Errorf("store: list tokens: %w", err)
	}
	out, err := scanTokens(rows)
	if err != nil {
		return nil, fmt.Errorf("store: list tokens: %w", err)
	}
	return out, nil
}

// conditions collects a query's WHERE conditions and their arguments,
// numbering the placeholders ($1, $2, …) in the order they are added.
type conditions struct {
	conds []string
	args  []any
}

// add appends cond; each ? in it stands for v.
func (c *conditions) add(cond string, v any) {
	c.args = append(c.args, v)
	c.conds = append(c.conds, strings.ReplaceAll(cond, "?", "$"+strconv.Itoa(len(c.args))))
}

// addFixed appends a condition that takes no argument.
func (c *conditions) addFixed(cond string) { c.conds = append(c.conds, cond) }

// clause is " WHERE a AND b …", or empty without conditions.
func (c *conditions) clause() string {
	if len(c.conds) == 0 {
		return ""
	}
	return " WHERE " + strings.Join(c.conds, " AND ")
}

// RevokeToken implements Store.
func (s *sqlStore) RevokeToken(ctx context.Context, id string) (Token, error) {
	var out Token
	err := s.write(ctx, "revoke token "+id, func(tx *sql.Tx) ([]Change, error) {
		t, err := scanToken(tx.QueryRowContext(ctx, s.q(`UPDATE tokens SET revoked_at = $1 WHERE id = $2 AND revoked_at IS NULL RETURNING `+tokenCols), s.tv(s.now()), id))
		if err == nil {
			out = t
			return []Change{{Kind: ChangeRevocation, IDs: []string{id}}}, nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return nil, err
		}
		// Unknown, or revoked already: tell which.
		t, err = scanToken(tx.QueryRowContext(ctx, s.q(`SELECT `+tokenCols+` FROM tokens WHERE id = $1`), id))
		if errors.Is(err, sql.ErrNoRows) {
			return nil, ErrNotFound
		}
		out = t
		return nil, err
	})
	return out, err
}

// RevokeConnectorTokens implements Store.
func (s *sqlStore) RevokeConnectorTokens(ctx context.Context, name string) ([]Token, error) {
	return s.revokeWhere(ctx, "revoke tokens of connector "+name, `kind = 'connector' AND name = $2`, name)
}

// RevokeKind implements Store.
func (s *sqlStore) RevokeKind(ctx context.Context, kind TokenKind) ([]Token, error) {
	if !kind.valid() {
		return nil, fmt.Errorf("store: revoke tokens: unknown kind %q", kind)
	}
	return s.revokeWhere(ctx, "revoke "+string(kind)+" tokens", `kind = $2`, string(kind))
}

// revokeWhere revokes the unrevoked tokens matching cond, whose one
// parameter is $2 ($1 is the time).
func (s *sqlStore) revokeWhere(ctx context.Context, what, cond string, arg any) ([]Token, error) {
	var out []Token
	err := s.write(ctx, what, func(tx *sql.Tx) ([]Change, error) {
		rows, err := tx.QueryContext(ctx, s.q(`UPDATE tokens SET revoked_at = $1 WHERE `+cond+` AND revoked_at IS NULL RETURNING `+tokenCols), s.tv(s.now()), arg)
		if err != nil {
			return nil, err
		}
		if out, err = scanTokens(rows); err != nil || len(out) == 0 {
			return nil, err
		}
		ids := make([]string, len(out))
		for i, t := range out {
			ids[i] = t.ID
		}
		return []Change{{Kind: ChangeRevocation, IDs: ids}}, nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// RevokedTokenIDs implements Store.
func (s *sqlStore) RevokedTokenIDs(ctx context.Context) ([]string, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT id FROM tokens WHERE revoked_at IS NOT NULL ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("store: revoked tokens: %w", err)
	}
	defer closeQuietly(rows)
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("store: revoked tokens: %w", err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: revoked tokens: %w", err)
	}
	return ids, nil
}

const registrationCols = "name, url, token_sealed, registered_at, last_heartbeat"

func scanRegistration(row scanner) (Registration, error) {
	var r Registration
	err := row.Scan(&r.Name, &r.URL, &r.TokenSealed, timeDest{&r.RegisteredAt}, timeDest{&r.LastHeartbeat})
	return r, err
}

// PutRegistration implements Store.
func (s *sqlStore) PutRegistration(ctx context.Context, r Registration) error {
	if r.Name == "" {
		return errors.New("store: put registration: empty name")
	}
	sealed := r.TokenSealed
	if sealed == nil {
		sealed = []byte{} // the column is NOT NULL; no token is stored as empty
	}
	return s.write(ctx, "put registration "+r.Name, func(tx *sql.Tx) ([]Change, error) {
		_, err := tx.ExecContext(ctx, s.q(`INSERT INTO registrations (`+registrationCols+`) VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (name) DO UPDATE SET url = excluded.url, token_sealed = excluded.token_sealed,
registered_at = excluded.registered_at, last_heartbeat = excluded.last_heartbeat`),
			r.Name, r.URL, sealed, s.tv(r.RegisteredAt), s.tv(r.LastHeartbeat))
		if err != nil {
			return nil, err
		}
		return []Change{{Kind: ChangeRegistration, IDs: []string{r.Name}}}, nil
	})
}

// GetRegistration implements Store.
func (s *sqlStore) GetRegistration(ctx context.Context, name string) (Registration, error) {
	r, err := scanRegistration(s.r.QueryRowContext(ctx, s.q(`SELECT `+registrationCols+` FROM registrations WHERE name = $1`), name))
	if errors.Is(err, sql.ErrNoRows) {
		return Registration{}, fmt.Errorf("store: registration %s: %w", name, ErrNotFound)
	}
	if err != nil {
		return Registration{}, fmt.Errorf("store: registration %s: %w", name, err)
	}
	return r, nil
}

// TouchRegistration implements Store.
func (s *sqlStore) TouchRegistration(ctx context.Context, name string, at time.Time) error {
	res, err := s.w.ExecContext(ctx, s.q(`UPDATE registrations SET last_heartbeat = $1 WHERE name = $2`), s.tv(at), name)
	return affectedOne(res, err, "heartbeat of registration "+name)
}

// affectedOne turns an Exec that changed no row into ErrNotFound.
func affectedOne(res sql.Result, err error, what string) error {
	if err != nil {
		return fmt.Errorf("store: %s: %w", what, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("store: %s: %w", what, err)
	}
	if n == 0 {
		return fmt.Errorf("store: %s: %w", what, ErrNotFound)
	}
	return nil
}

// DeleteRegistration implements Store.
func (s *sqlStore) DeleteRegistration(ctx context.Context, name string) error {
	return s.write(ctx, "delete registration "+name, func(tx *sql.Tx) ([]Change, error) {
		res, err := tx.ExecContext(ctx, s.q(`DELETE FROM registrations WHERE name = $1`), name)
		if err != nil {
			return nil, err
		}
		if n, err := res.RowsAffected(); err != nil {
			return nil, err
		} else if n == 0 {
			return nil, ErrNotFound
		}
		return []Change{{Kind: ChangeRegistration, IDs: []string{name}}}, nil
	})
}

// ListRegistrations implements Store.
func (s *sqlStore) ListRegistrations(ctx context.Context) ([]Registration, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT `+registrationCols+` FROM registrations ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("store: list registrations: %w", err)
	}
	defer closeQuietly(rows)
	var out []Registration
	for rows.Next() {
		r, err := scanRegistration(rows)
		if err != nil {
			return nil, fmt.Errorf("store: list registrations: %w", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: list registrations: %w", err)
	}
	return out, nil
}

const machineCols = "name, first_seen, last_seen"

func scanMachine(row scanner) (Machine, error) {
	var m Machine
	err := row.Scan(&m.Name, timeDest{&m.FirstSeen}, timeDest{&m.LastSeen})
	return m, err
}

// seenLater is the upsert's update of a machine seen again: a machine's
// times never go back, so that a sighting written late (queued through a
// database outage, by a replica whose clock is behind) cannot make it
// look gone for longer than it was.
func (s *sqlStore) seenLater() string {
	if s.backend == BackendPostgres {
		return `first_seen = LEAST(machines.first_seen, excluded.first_seen), last_seen = GREATEST(machines.last_seen, excluded.last_seen)`
	}
	return `first_seen = min(machines.first_seen, excluded.first_seen), last_seen = max(machines.last_seen, excluded.last_seen)`
}

// upsertMachine marks name ($1) seen at $2, recording it if new.
func (s *sqlStore) upsertMachine() string {
	return `INSERT INTO machines (name, first_seen, last_seen) VALUES ($1, $2, $2)
ON CONFLICT (name) DO UPDATE SET ` + s.seenLater() + ` RETURNING ` + machineCols
}

// TouchMachine implements Store.
func (s *sqlStore) TouchMachine(ctx context.Context, name string) (Machine, error) {
	if name == "" {
		return Machine{}, errors.New("store: touch machine: empty name")
	}
	m, err := scanMachine(s.w.QueryRowContext(ctx, s.q(s.upsertMachine()), name, s.tv(s.now())))
	if err != nil {
		return Machine{}, fmt.Errorf("store: touch machine %s: %w", name, err)
	}
	return m, nil
}

// touchChunk bounds the machines of one TouchMachines statement: with
// the shared time that is touchChunk+1 parameters, under SQLite's oldest
// limit (999) and far under PostgreSQL's (65,535), and a statement short
// enough that 10,000 machines are a score of statements, not one each.
const touchChunk = 500

// TouchMachines implements Store.
func (s *sqlStore) TouchMachines(ctx context.Context, names []string) error {
	return s.TouchMachinesAt(ctx, names, s.now())
}

// TouchMachinesAt implements Store.
func (s *sqlStore) TouchMachinesAt(ctx context.Context, names []string, at time.Time) error {
	for i, name := range names {
		if err := checkMachineName(name); err != nil {
			return fmt.Errorf("store: touch machines: name %d: %w", i, err)
		}
	}
	if len(names) == 0 {
		return nil
	}
	// Sorted and without repeats: PostgreSQL refuses an upsert that meets
	// the same row twice, and two replicas taking the rows' locks in the
	// same order cannot deadlock.
	names = slices.Clone(names)
	slices.Sort(names)
	names = slices.Compact(names)
	now := s.tv(at)
	return s.write(ctx, fmt.Sprintf("touch %d machines", len(names)), func(tx *sql.Tx) ([]Change, error) {
		for chunk := range slices.Chunk(names, touchChunk) {
			var query strings.Builder
			query.WriteString(`INSERT INTO machines (name, first_seen, last_seen) VALUES `)
			args := make([]any, 0, len(chunk)+1)
			args = append(args, now)
			for i, name := range chunk {
				if i > 0 {
					query.WriteString(", ")
				}
				fmt.Fprintf(&query, "($%d, $1, $1)", i+2)
				args = append(args, name)
			}
			query.WriteString(` ON CONFLICT (name) DO UPDATE SET ` + s.seenLater())
			if _, err := tx.ExecContext(ctx, s.q(query.String()), args...); err != nil {
				return nil, err
			}
		}
		return nil, nil
	})
}

// checkMachineName refuses a name the store cannot keep as it is: empty,
// or text PostgreSQL refuses (invalid UTF-8, NUL), which would otherwise
// fail a batch half-way through its statements.
func checkMachineName(name string) error {
	switch {
	case name == "":
		return errors.New("empty name")
	case !utf8.ValidString(name) || strings.ContainsRune(name, 0):
		return fmt.Errorf("%q is not valid text", name)
	}
	return nil
}

// ListMachines implements Store.
func (s *sqlStore) ListMachines(ctx context.Context) ([]Machine, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT `+machineCols+` FROM machines ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("store: list machines: %w", err)
	}
	defer closeQuietly(rows)
	var out []Machine
	for rows.Next() {
		m, err := scanMachine(rows)
		if err != nil {
			return nil, fmt.Errorf("store: list machines: %w", err)
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: list machines: %w", err)
	}
	return out, nil
}

const threadCols = "machine, id, workflow, status, prompt, started_at, updated_at, duration_ns, steps, return_code, summary, usage, tokens, cost, " +
	"wait_role, wait_question, wait_assignee, wait_since, wait_deadline"

func scanThread(row scanner) (Thread, error) {
	var t Thread
	var dur int64
	var rc sql.NullInt64
	var usage []byte
	var w Waiting
	var since *time.Time
	err := row.Scan(&t.Machine, &t.ID, &t.Workflow, &t.Status, &t.Prompt, nullTimeDest{&t.StartedAt}, timeDest{&t.UpdatedAt},
		&dur, &t.Steps, &rc, &t.Summary, &usage, &t.Tokens, &t.Cost,
		&w.Role, &w.Question, &w.Assignee, nullTimeDest{&since}, nullTimeDest{&w.Deadline})
	if since != nil {
		// A Waiting is stored with its time, always (boundWaiting).
		w.Since = *since
		t.Waiting = &w
	}
	t.Duration = time.Duration(dur)
	if rc.Valid {
		v := int(rc.Int64)
		t.ReturnCode = &v
	}
	if usage != nil {
		t.Usage = json.RawMessage(usage)
	}
	return t, err
}

// SyncThreads implements Store.
func (s *sqlStore) SyncThreads(ctx context.Context, machine string, threads []Thread) error {
	_, err := s.SyncThreadsResult(ctx, machine, threads)
	return err
}

// threadInsertCols are the columns a sync writes: threadCols, and what
// the thread counts against its machine's share.
const threadInsertCols = threadCols + ", bytes"

// threadUpdatedCols are the columns a sync of a known thread may change:
// threadCols but its key (bytes follows them).
var threadUpdatedCols = []string{"workflow", "status", "prompt", "started_at", "updated_at", "duration_ns", "steps", "return_code",
	"summary", "usage", "tokens", "cost", "wait_role", "wait_question", "wait_assignee", "wait_since", "wait_deadline"}

// SyncThreadsResult implements Store.
func (s *sqlStore) SyncThreadsResult(ctx context.Context, machine string, threads []Thread) (SyncResult, error) {
	return s.SyncThreadsAt(ctx, machine, s.now(), threads)
}

// SyncThreadsAt implements Store.
func (s *sqlStore) SyncThreadsAt(ctx context.Context, machine string, heard time.Time, threads []Thread) (SyncResult, error) {
	var res SyncResult
	if err := checkMachineName(machine); err != nil {
		return res, fmt.Errorf("store: sync threads: machine: %w", err)
	}
	now := heard
	kept := make([]Thread, 0, len(threads))
	for _, t := range threads {
		if b, ok := boundThread(t, now, &res); ok {
			kept = append(kept, b)
		}
	}
	threads = kept
	// Rows whose every column is unchanged are left alone: a resync mostly
	// repeats what is stored, and rewriting it would churn the indexes.
	distinct := "IS NOT"
	if s.backend == BackendPostgres {
		distinct = "IS DISTINCT FROM"
	}
	var changed, set []string
	for _, c := range threadUpdatedCols {
		changed = append(changed, "threads."+c+" "+distinct+" excluded."+c)
		set = append(set, c+" = excluded."+c)
	}
	update := strings.Join(set, ", ") + ", bytes = excluded.bytes WHERE " + strings.Join(changed, " OR ")
	cols := strings.Count(threadInsertCols, ",") + 1
	values := make([]string, cols)
	for i := range values {
		values[i] = "$" + strconv.Itoa(i+1)
	}
	upsert := `INSERT INTO threads (` + threadInsertCols + `) VALUES (` + strings.Join(values, ", ") + `)
ON CONFLICT (machine, id) DO UPDATE SET ` + update
	if s.backend == BackendSQLite {
		// seq is the thread's place in the search order (see seqSlot): the
		// next free one in its time's slot, kept while updated_at is. A
		// full slot gives seq a text, which SQLite refuses (datatype
		// mismatch) rather than spill into the next slot and break the
		// order. Its slot is the argument after the columns'.
		slot := "$" + strconv.Itoa(cols+1)
		upsert = s.q(`INSERT INTO threads (seq, ` + threadInsertCols + `) VALUES (
(SELECT CASE WHEN max(seq) IS NULL THEN ` + slot + ` WHEN max(seq) < ` + slot + ` + ` + strconv.Itoa(seqTies-1) + ` THEN max(seq) + 1 ELSE 'slot full' END
 FROM threads WHERE seq BETWEEN ` + slot + ` AND ` + slot + ` + ` + strconv.Itoa(seqTies-1) + `),
` + strings.Join(values, ", ") + `)
ON CONFLICT (machine, id) DO UPDATE SET seq = CASE WHEN threads.updated_at = excluded.updated_at THEN threads.seq ELSE excluded.seq END, ` + update)
	}
	args := make([][]any, len(threads))
	for i, t := range threads {
		var rc any
		if t.ReturnCode != nil {
			rc = int64(*t.ReturnCode)
		}
		var usage any
		if len(t.Usage) > 0 {
			usage = string(t.Usage)
		}
		// A thread that does not wait has no Waiting (boundThread): its
		// columns are cleared.
		var w Waiting
		var since, deadline any
		if t.Waiting != nil {
			w, since, deadline = *t.Waiting, s.tv(t.Waiting.Since), s.tvp(t.Waiting.Deadline)
		}
		args[i] = []any{machine, t.ID, t.Workflow, t.Status,
			t.Prompt, s.tvp(t.StartedAt), s.tv(t.UpdatedAt),
			int64(t.Duration), t.Steps, rc, t.Summary, usage, t.Tokens, t.Cost,
			w.Role, w.Question, w.Assignee, since, deadline, threadBytes(t)}
		if s.backend == BackendSQLite {
			args[i] = append(args[i], seqSlot(t.UpdatedAt))
		}
	}
	// The notifications are decided in the same transaction as the
	// statuses they are about (notify.go).
	notify := s.notify.get()
	var was map[string]threadState
	if s.backend == BackendPostgres {
		before := func(tx pgx.Tx) (err error) {
			was, err = notifyBefore(ctx, pgxNotifyTx{s, tx}, notify, machine, threads)
			return err
		}
		err := syncBatch(ctx, s.w, s.upsertMachine(), []any{machine, s.tv(now)}, upsert, args, before, func(tx pgx.Tx) error {
			var err error
			if res.Notified, err = notifyAfter(ctx, pgxNotifyTx{s, tx}, notify, machine, heard, s.now(), was, threads); err != nil {
				return err
			}
			return trimMachine(ctx, pgxShare{tx}, machine, s.maxThreads, s.maxBytes, &res)
		})
		if err != nil {
			return SyncResult{}, fmt.Errorf("store: sync threads of %s: %w", machine, err)
		}
		return res, nil
	}
	err := s.write(ctx, "sync threads of "+machine, func(tx *sql.Tx) ([]Change, error) {
		if _, err := tx.ExecContext(ctx, s.q(s.upsertMachine()), machine, s.tv(now)); err != nil {
			return nil, err
		}
		was, err := notifyBefore(ctx, sqlNotifyTx{s, tx}, notify, machine, threads)
		if err != nil {
			return nil, err
		}
		if err := s.syncSQLite(ctx, tx, upsert+" RETURNING seq", threads, args); err != nil {
			return nil, err
		}
		if res.Notified, err = notifyAfter(ctx, sqlNotifyTx{s, tx}, notify, machine, heard, s.now(), was, threads); err != nil {
			return nil, err
		}
		// After the full-text entries are written: a thread evicted here
		// may be one this batch added.
		return nil, trimMachine(ctx, sqlShare{s, tx}, machine, s.maxThreads, s.maxBytes, &res)
	})
	if err != nil {
		return SyncResult{}, err
	}
	return res, nil
}

// ftsEntry is one thread's entry in SQLite's full-text index.
type ftsEntry struct {
	seq                                        int64
	prompt, summary, machine, workflow, status string
}

// syncSQLite upserts the threads (args as SyncThreads builds them) and
// keeps the FTS index in step. The index is written here rather than by
// triggers because of the order: FTS5 writes a segment to disk each time
// a write's rowid is not above the previous one, and a seq is a time, so
// a trigger's delete-then-insert per thread, in the order threads come,
// made a segment per thread (a resync cost seconds, and searches slowed
// with the segments). Here every stale entry is deleted, then the new
// ones are inserted, each in ascending rowid order.
func (s *sqlStore) syncSQLite(ctx context.Context, tx *sql.Tx, upsert string, threads []Thread, args [][]any) error {
	stmt, err := tx.PrepareContext(ctx, upsert)
	if err != nil {
		return err
	}
	defer closeQuietly(stmt) // it goes with the transaction anyway
	old, err := tx.PrepareContext(ctx, `SELECT seq, workflow, status, prompt, summary FROM threads WHERE machine = ?1 AND id = ?2`)
	if err != nil {
		return err
	}
	defer closeQuietly(old)
	var stale, fresh []ftsEntry
	// written maps a thread met earlier in this batch to its entry in
	// fresh: met again, its row holds that entry, which is not in the
	// index yet, so it is replaced there instead of deleted from the
	// index (a contentless index told to forget what it never held is
	// corrupt from then on).
	written := map[string]int{}
	for i, a := range args {
		var was ftsEntry
		err := old.QueryRowContext(ctx, a[0], a[1]).Scan(&was.seq, &was.workflow, &was.status, &was.prompt, &was.summary)
		existed := err == nil
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("thread %s: %w", threads[i].ID, err)
		}
		now := ftsEntry{machine: a[0].(string), workflow: a[2].(string), status: a[3].(string), prompt: a[4].(string), summary: a[10].(string)}
		err = stmt.QueryRowContext(ctx, a...).Scan(&now.seq)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			continue // nothing changed
		case err != nil && strings.Contains(err.Error(), "datatype mismatch"):
			return fmt.Errorf("thread %s: more than %d threads updated in the same microsecond (%s)",
				threads[i].ID, seqTies, time.UnixMicro(a[6].(int64)).UTC().Format(time.RFC3339Nano))
		case err != nil:
			return fmt.Errorf("thread %s: %w", threads[i].ID, err)
		}
		was.machine = now.machine
		if existed && was == now {
			continue // the indexed columns and the place are the same
		}
		id := a[1].(string)
		if j, ok := written[id]; ok && existed && fresh[j] == was {
			fresh[j] = now
			continue
		}
		if existed {
			stale = append(stale, was)
		}
		written[id] = len(fresh)
		fresh = append(fresh, now)
	}
	// The index is contentless: it forgets an entry when given what the
	// entry held, which the threads table had until the upsert above.
	if err := writeFTS(ctx, tx, `INSERT INTO threads_fts (threads_fts, rowid, prompt, summary, facets) VALUES ('delete', ?1, ?2, ?3, ?4)`, stale); err != nil {
		return err
	}
	return writeFTS(ctx, tx, `INSERT INTO threads_fts (rowid, prompt, summary, facets) VALUES (?1, ?2, ?3, ?4)`, fresh)
}

// writeFTS runs insert, (rowid, prompt, summary, facets), for each entry
// in ascending rowid order.
func writeFTS(ctx context.Context, tx *sql.Tx, insert string, entries []ftsEntry) error {
	if len(entries) == 0 {
		return nil
	}
	slices.SortFunc(entries, func(a, b ftsEntry) int { return cmp.Compare(a.seq, b.seq) })
	stmt, err := tx.PrepareContext(ctx, insert)
	if err != nil {
		return err
	}
	defer closeQuietly(stmt) // it goes with the transaction anyway
	for _, e := range entries {
		facets := facetToken('m', e.machine) + " " + facetToken('w', e.workflow) + " " + facetToken('s', e.status)
		if _, err := stmt.ExecContext(ctx, e.seq, e.prompt, e.summary, facets); err != nil {
			return err
		}
	}
	return nil
}

// GetThread implements Store.
func (s *sqlStore) GetThread(ctx context.Context, machine, id string) (Thread, error) {
	t, err := scanThread(s.r.QueryRowContext(ctx, s.q(`SELECT `+threadCols+` FROM threads WHERE machine = $1 AND id = $2`), machine, id))
	if errors.Is(err, sql.ErrNoRows) {
		return Thread{}, fmt.Errorf("store: thread %s on %s: %w", id, machine, ErrNotFound)
	}
	if err != nil {
		return Thread{}, fmt.Errorf("store: thread %s on %s: %w", id, machine, err)
	}
	return t, nil
}

// read runs fn in a transaction that sees one snapshot, so a page and its
// total agree.
func (s *sqlStore) read(ctx context.Context, fn func(tx *sql.Tx) error) error {
	var opts *sql.TxOptions
	if s.backend == BackendPostgres {
		// READ COMMITTED, the default, takes a snapshot per statement.
		opts = &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true}
	}
	tx, err := s.r.BeginTx(ctx, opts)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }() // read-only: nothing to lose
	return fn(tx)
}

// AppendAudit implements Store.
func (s *sqlStore) AppendAudit(ctx context.Context, e AuditEntry) (int64, error) {
	if e.Action == "" {
		return 0, errors.New("store: append audit: empty action")
	}
	for _, f := range []string{e.TokenID, e.Actor, e.Source, e.Action, e.Machine, e.Target} {
		if looksLikeJWT(f) {
			return 0, errors.New("store: append audit: an entry holds what looks like a token; the log names tokens by id only")
		}
	}
	if len(e.Key) > MaxAuditKey || !utf8.ValidString(e.Key) || strings.ContainsRune(e.Key, 0) {
		return 0, fmt.Errorf("store: append audit: a key is at most %d bytes of text", MaxAuditKey)
	}
	if e.Time.IsZero() {
		e.Time = s.now()
	}
	var key any // no key: NULL, which the unique index lets repeat
	if e.Key != "" {
		key = e.Key
	}
	var id int64
	err := s.w.QueryRowContext(ctx, s.q(`INSERT INTO audit (at, token_id, actor, source, action, machine, target, status, entry_key)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT (entry_key) DO NOTHING RETURNING id`),
		s.tv(e.Time), e.TokenID, e.Actor, e.Source, e.Action, e.Machine, e.Target, e.Status, key).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) && e.Key != "" {
		// Written before: the entry is there once, as it should be.
		err = s.w.QueryRowContext(ctx, s.q(`SELECT id FROM audit WHERE entry_key = $1`), e.Key).Scan(&id)
	}
	if err != nil {
		return 0, fmt.Errorf("store: append audit %s: %w", e.Action, err)
	}
	return id, nil
}

// ListAudit implements Store.
func (s *sqlStore) ListAudit(ctx context.Context, q AuditQuery) (AuditPage, error) {
	var w conditions
	if q.Action != "" {
		w.add("action = ?", q.Action)
	}
	if q.Machine != "" {
		w.add("machine = ?", q.Machine)
	}
	if q.TokenID != "" {
		w.add("token_id = ?", q.TokenID)
	}
	if !q.Since.IsZero() {
		w.add("at >= ?", s.tv(q.Since))
	}
	if !q.Until.IsZero() {
		w.add("at < ?", s.tv(q.Until))
	}
	limit, offset := pageBounds(q.Limit, q.Offset)
	var page AuditPage
	err := s.read(ctx, func(tx *sql.Tx) error {
		cond := w.clause()
		if err := tx.QueryRowContext(ctx, s.q(`SELECT count(*) FROM audit`+cond), w.args...).Scan(&page.Total); err != nil {
			return err
		}
		n := len(w.args)
		rows, err := tx.QueryContext(ctx, s.q(fmt.Sprintf(`SELECT id, at, token_id, actor, source, action, machine, target, status
FROM audit%s ORDER BY at DESC, id DESC LIMIT $%d OFFSET $%d`, cond, n+1, n+2)), append(w.args, limit, offset)...)
		if err != nil {
			return err
		}
		defer closeQuietly(rows)
		for rows.Next() {
			var e AuditEntry
			if err := rows.Scan(&e.ID, timeDest{&e.Time}, &e.TokenID, &e.Actor, &e.Source, &e.Action, &e.Machine, &e.Target, &e.Status); err != nil {
				return err
			}
			page.Entries = append(page.Entries, e)
		}
		return rows.Err()
	})
	if err != nil {
		return AuditPage{}, fmt.Errorf("store: list audit: %w", err)
	}
	return page, nil
}

// Prune implements Store.
func (s *sqlStore) Prune(ctx context.Context, before time.Time) (PruneResult, error) {
	var res PruneResult
	cut := s.tv(before)
	err := s.write(ctx, "prune", func(tx *sql.Tx) ([]Change, error) {
		for _, step := range []struct {
			query string
			n     *int64
		}{
			{`DELETE FROM threads WHERE updated_at < $1`, &res.Threads},
			{`DELETE FROM audit WHERE at < $1`, &res.Audit},
			{`DELETE FROM notifications WHERE created_at < $1 AND state <> 'pending'`, &res.Notifications},
			{`DELETE FROM machines WHERE last_seen < $1 AND NOT EXISTS (SELECT 1 FROM threads WHERE threads.machine = machines.name)`, &res.Machines},
		} {
			r, err := tx.ExecContext(ctx, s.q(step.query), cut)
			if err != nil {
				return nil, err
			}
			if *step.n, err = r.RowsAffected(); err != nil {
				return nil, err
			}
		}
		return nil, nil
	})
	if err != nil {
		return PruneResult{}, err
	}
	return res, nil
}
