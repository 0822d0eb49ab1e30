package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// Check and the requests judge a server by one rule: the check calls a
// database unreachable (an outage: still ready, writes queue) exactly when
// Unavailable calls a request's error a server's absence. A server
// shutting down, out of connections or cut off is an outage however it
// shows itself; a database that answers wrong is not. SQLite's lock and
// disk errors are waited out by requests, but are the local file's, not
// an outage of a server the replicas share.
func TestCheckAndRequestsJudgeAnOutageAlike(t *testing.T) {
	pg := func(code string) error { return &pgconn.PgError{Code: code, Message: "m"} }
	for _, c := range []struct {
		name   string
		err    error
		outage bool
		sqlite bool // a request waits it out, the check does not call it an outage
	}{
		{"admin shutdown (57P01)", pg("57P01"), true, false},
		{"crash shutdown (57P02)", pg("57P02"), true, false},
		{"starting up (57P03)", pg("57P03"), true, false},
		{"connection failure (08006)", pg("08006"), true, false},
		{"too many connections (53300)", pg("53300"), true, false},
		{"disk full (53100)", pg("53100"), true, false},
		{"refused", &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}, true, false},
		{"timeout", context.DeadlineExceeded, true, false},
		{"cut mid-answer", io.ErrUnexpectedEOF, true, false},
		{"closed", io.EOF, true, false},
		{"bad connection", driver.ErrBadConn, true, false},
		{"connection done", sql.ErrConnDone, true, false},
		{"pgx closed it", errors.New("conn closed"), true, false},
		{"SQLite locked", errors.New("database is locked (SQLITE_BUSY)"), false, true},
		{"SQLite disk full", errors.New("database or disk is full (SQLITE_FULL)"), false, true},
		{"undefined table (42P01)", pg("42P01"), false, false},
		{"undefined column (42703)", pg("42703"), false, false},
		{"permission denied (42501)", pg("42501"), false, false},
		{"a unique violation (23505)", pg("23505"), false, false},
		{"a malformed code", pg("5"), false, false},
		{"no rows", sql.ErrNoRows, false, false},
		{"something else", errors.New("boom"), false, false},
	} {
		for depth, err := range []error{c.err, fmt.Errorf("table tokens: %w", c.err), fmt.Errorf("a: %w", fmt.Errorf("b: %w", c.err))} {
			got := unreachable(err)
			if errors.Is(got, ErrUnreachable) != c.outage || serverGone(err) != c.outage || Unavailable(got) != (c.outage || c.sqlite) {
				t.Errorf("%s (wrapped %d): check says unreachable %v, requests say unavailable %v; want both %v",
					c.name, depth, errors.Is(got, ErrUnreachable), Unavailable(err), c.outage)
			}
			if Unavailable(err) != (c.outage || c.sqlite) {
				t.Errorf("%s (wrapped %d): a request waits it out %v, want %v", c.name, depth, Unavailable(err), c.outage || c.sqlite)
			}
			if !errors.Is(got, err) {
				t.Errorf("%s: the check's error lost the cause", c.name)
			}
		}
	}
	// Wrapping is done once.
	once := unreachable(pg("57P01"))
	if twice := unreachable(once); twice != once {
		t.Errorf("wrapped again: %v", twice)
	}
}
