package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// The inbox is the fleet's threads waiting for a person (status
// waiting), kept from the connectors' change streams like every thread's
// summary: a machine that went offline still shows what it asks. A
// thread leaves it when its status changes, which also clears its
// Waiting (SyncThreadsAt, boundWaiting). Waiting threads are a handful
// among the history; the partial index threads_waiting holds them only.

// inboxOrder is the inbox's order: oldest wait first, then machine and
// id, so that a page is stable. A waiting thread whose connector did not
// say since when waits, as far as the store knows, since its last change.
const inboxOrder = `COALESCE(wait_since, updated_at), machine, id`

// Inbox implements Store.
func (s *sqlStore) Inbox(ctx context.Context, q InboxQuery) (InboxPage, error) {
	if a := q.Assignee; !utf8.ValidString(a) || strings.ContainsRune(a, 0) || len(a) > MaxAssigneeBytes {
		// No thread could match; PostgreSQL would refuse it as a failure.
		return InboxPage{}, errors.New("store: inbox: an assignee is at most " + fmt.Sprint(MaxAssigneeBytes) + " bytes of text")
	}
	var w conditions
	w.add("status = ?", WaitingStatus)
	if q.Assignee != "" {
		w.add("wait_assignee = ?", q.Assignee)
	}
	limit, offset := pageBounds(q.Limit, q.Offset)
	var page InboxPage
	err := s.read(ctx, func(tx *sql.Tx) error {
		cond := w.clause()
		if err := tx.QueryRowContext(ctx, s.q(`SELECT count(*) FROM threads`+cond), w.args...).Scan(&page.Total); err != nil {
			return err
		}
		n := len(w.args)
		rows, err := tx.QueryContext(ctx, s.q(fmt.Sprintf(`SELECT %s FROM threads%s ORDER BY %s LIMIT $%d OFFSET $%d`,
			threadCols, cond, inboxOrder, n+1, n+2)), append(w.args, limit, offset)...)
		if err != nil {
			return err
		}
		page.Threads, err = scanThreads(rows)
		return err
	})
	if err != nil {
		return InboxPage{}, fmt.Errorf("store: inbox: %w", err)
	}
	return page, nil
}
