package store

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/uncaged/workflow/shared/fleet"
)

// Notifications are webhooks the gateway sends when a thread starts
// waiting, fails or completes (gateway/notify sends them). The store
// decides which to send, in the transaction that stores the thread's new
// status (SyncThreadsAt), so a crash between the two cannot lose one or
// add it twice: a thread notifies when its status changes into one a
// receiver asked for. A status heard again (a change stream resent after
// a reconnect, a batch replayed from the spill file) is no change; a
// thread the store did not know notifies only if it changed lately
// (NotifySettings.Fresh), so the first resync of a machine's old history
// sends nothing. Each event also has an identity — receiver, machine,
// thread, status and the thread's time that made it — which the table
// keeps once, whichever replica or replay writes it.

// Notification states.
const (
	// NotifyPending is a notification not sent yet, or to be tried again.
	NotifyPending = "pending"
	// NotifyDelivered is one a receiver took (a 2xx answer).
	NotifyDelivered = "delivered"
	// NotifyFailed is one given up on: its attempts ran out, or its
	// receiver is no longer configured.
	NotifyFailed = "failed"
)

// NotifyStatuses are the thread statuses a receiver may ask to hear of.
var NotifyStatuses = []string{"waiting", "failed", "completed"}

// DefaultNotifyFresh is NotifySettings.Fresh's default.
const DefaultNotifyFresh = 10 * time.Minute

// Bounds of what a notification keeps.
const (
	// MaxNotifySummary bounds the summary (and the question) a
	// notification carries, in runes: a chat message, not the document.
	MaxNotifySummary = 1000
	// MaxNotifyKey bounds a receiver's key and label, in bytes.
	MaxNotifyKey = 200
	// MaxNotifyError bounds the last error kept, in runes.
	MaxNotifyError = 500
)

// NotifyTarget is a receiver as the store knows it: by a key drawn from
// its URL, never by the URL, which may be a secret (an incoming webhook's).
type NotifyTarget struct {
	// Key names the receiver in the table, the same on every replica.
	Key string
	// Label is what may be shown of it (its scheme and host).
	Label string
	// On are the statuses it hears of (NotifyStatuses).
	On []string
}

// NotifySettings say which notifications SyncThreadsAt adds.
type NotifySettings struct {
	// Targets are the receivers; none, and nothing is added.
	Targets []NotifyTarget
	// Fresh is how recently a thread the store did not know must have
	// changed to notify; DefaultNotifyFresh if zero.
	Fresh time.Duration
}

// check refuses settings the table could not hold.
func (n NotifySettings) check() error {
	seen := map[string]bool{}
	for i, t := range n.Targets {
		switch {
		case t.Key == "" || len(t.Key) > MaxNotifyKey || len(t.Label) > MaxNotifyKey:
			return fmt.Errorf("receiver %d: a key of 1 to %d bytes and a label of at most that", i, MaxNotifyKey)
		case seen[t.Key]:
			return fmt.Errorf("receiver %d: key %q given twice", i, t.Key)
		case len(t.On) == 0:
			return fmt.Errorf("receiver %d: no status to notify of", i)
		}
		seen[t.Key] = true
		for _, s := range t.On {
			if !slices.Contains(NotifyStatuses, s) {
				return fmt.Errorf("receiver %d: %q is not a status to notify of (%s)", i, s, strings.Join(NotifyStatuses, ", "))
			}
		}
	}
	return nil
}

// Notification is one delivery: one event, to one receiver.
type Notification struct {
	// ID is assigned by the store, increasing.
	ID int64
	// Target is the receiver's key, TargetLabel what may be shown of it.
	Target      string
	TargetLabel string
	// Machine, Thread, Workflow and Status are the thread's, as it was
	// when it made the notification.
	Machine  string
	Thread   string
	Workflow string
	Status   string
	// Summary is the thread's summary, cut to MaxNotifySummary runes.
	Summary string
	// Question is what a waiting thread asks (its Waiting's question),
	// cut to MaxNotifySummary runes; empty for other statuses, and from a
	// connector that does not report it.
	Question string
	// UpdatedAt is the thread's time that made the notification.
	UpdatedAt time.Time
	// CreatedAt is when the store added it.
	CreatedAt time.Time
	// State is NotifyPending, NotifyDelivered or NotifyFailed.
	State string
	// Attempts counts the sends begun (a claim is one).
	Attempts int
	// LastError is why the last attempt failed; LastCode its HTTP status
	// (0 when no answer came).
	LastError string
	LastCode  int
	// NextAt is when a pending one is due.
	NextAt time.Time
	// FinishedAt is when it was delivered or given up on.
	FinishedAt *time.Time
}

// NotificationResult is the outcome of an attempt FinishNotification
// records.
type NotificationResult struct {
	// ID is the notification, Owner the claim it was sent under.
	ID    int64
	Owner string
	// Delivered says the receiver took it.
	Delivered bool
	// Code is the receiver's HTTP status, 0 without an answer; Error why
	// the attempt failed.
	Code  int
	Error string
	// RetryAt, for an attempt that failed, is when to try again; zero
	// gives up (NotifyFailed).
	RetryAt time.Time
}

// NotificationQuery filters and pages ListNotifications; zero fields do
// not filter.
type NotificationQuery struct {
	// State keeps only notifications in this state.
	State string
	// Machine keeps only this machine's.
	Machine string
	// Limit is the page size: DefaultLimit if zero, at most MaxLimit.
	Limit int
	// Offset skips that many.
	Offset int
}

// NotificationPage is one page of notifications, newest first.
type NotificationPage struct {
	// Notifications is the page.
	Notifications []Notification
	// Total is how many match, over all pages.
	Total int
}

// NotificationBacklog is what waits to be sent.
type NotificationBacklog struct {
	// Pending counts the notifications not yet delivered nor given up on.
	Pending int
	// Oldest is when the oldest of them was added; zero when none.
	Oldest time.Time
}

// Notifications is the part of the Store that keeps notifications.
type Notifications interface {
	// SetNotify says which notifications SyncThreadsAt adds from now on.
	// The gateway sets it before it writes threads.
	SetNotify(n NotifySettings) error
	// ClaimNotifications takes up to limit pending notifications that are
	// due and not claimed by another sender (or whose claim lapsed), for
	// owner until lease from now, counting an attempt on each, oldest due
	// first. Senders sharing the database never take the same one.
	ClaimNotifications(ctx context.Context, owner string, lease time.Duration, limit int) ([]Notification, error)
	// FinishNotification records an attempt's outcome. ErrNotFound when
	// the notification is no longer owner's (its claim lapsed and another
	// sender took it, or it is finished).
	FinishNotification(ctx context.Context, r NotificationResult) error
	// ListNotifications returns matching notifications, newest first.
	ListNotifications(ctx context.Context, q NotificationQuery) (NotificationPage, error)
	// NotificationBacklog says what waits to be sent.
	NotificationBacklog(ctx context.Context) (NotificationBacklog, error)
}

// notifyConfig is a store's NotifySettings.
type notifyConfig struct {
	mu sync.RWMutex
	n  NotifySettings
}

func (c *notifyConfig) get() NotifySettings {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.n
}

// SetNotify implements Notifications.
func (s *sqlStore) SetNotify(n NotifySettings) error {
	if err := n.check(); err != nil {
		return fmt.Errorf("store: notifications: %w", err)
	}
	if n.Fresh <= 0 {
		n.Fresh = DefaultNotifyFresh
	}
	n.Targets = slices.Clone(n.Targets)
	s.notify.mu.Lock()
	defer s.notify.mu.Unlock()
	s.notify.n = n
	return nil
}

// notifyTx is a transaction storing threads, as the notifications need it.
type notifyTx interface {
	// statuses reads the stored status of each of machine's threads in ids
	// that the store holds.
	statuses(ctx context.Context, machine string, ids []string) (map[string]threadState, error)
	// insert adds n unless its event is there for its receiver; whether
	// it added it.
	insert(ctx context.Context, n Notification) (bool, error)
}

// threadState is what decides whether a thread's new summary is an
// event: its status, and for a waiting thread since when it waits (a new
// question asked straight after the last one is a new wait).
type threadState struct {
	status string
	since  *time.Time
}

// stateOf is t's threadState (t bounded).
func stateOf(t Thread) threadState {
	st := threadState{status: t.Status}
	if t.Waiting != nil {
		since := utc(t.Waiting.Since)
		st.since = &since
	}
	return st
}

// same says whether a and b are the same state: the same status, and for
// a waiting thread the same wait.
func (a threadState) same(b threadState) bool {
	if a.status != b.status {
		return false
	}
	if a.status != WaitingStatus || a.since == nil || b.since == nil {
		return true // a connector that does not say since when: one wait
	}
	return a.since.Equal(*b.since)
}

// notifyBefore reads, in the transaction that will store threads, what
// their statuses were: notifyAfter compares them with the new ones. nil
// when no receiver is configured.
func notifyBefore(ctx context.Context, tx notifyTx, n NotifySettings, machine string, threads []Thread) (map[string]threadState, error) {
	if len(n.Targets) == 0 || len(threads) == 0 {
		return nil, nil
	}
	ids := make([]string, 0, len(threads))
	for _, t := range threads {
		ids = append(ids, t.ID)
	}
	slices.Sort(ids)
	return tx.statuses(ctx, machine, slices.Compact(ids))
}

// notifyAfter adds, in the same transaction, a notification per receiver
// for each thread whose status changed into one the receiver hears of (or
// that waits anew), and returns how many it added. A thread met twice in
// the batch changes from its earlier self. A waiting thread's
// notification carries its question.
func notifyAfter(ctx context.Context, tx notifyTx, n NotifySettings, machine string, heard, now time.Time, was map[string]threadState, threads []Thread) (int, error) {
	if len(n.Targets) == 0 {
		return 0, nil
	}
	added := 0
	for _, t := range threads {
		prev, known := was[t.ID]
		cur := stateOf(t)
		was[t.ID] = cur
		if known && prev.same(cur) {
			continue // heard again, or a field other than the status changed
		}
		question := ""
		if t.Waiting != nil {
			question = fleet.Truncate(t.Waiting.Question, MaxNotifySummary)
		}
		if !known && heard.Sub(t.UpdatedAt) > n.Fresh {
			continue // old history the store had not heard of
		}
		for _, target := range n.Targets {
			if !slices.Contains(target.On, t.Status) {
				continue
			}
			ok, err := tx.insert(ctx, Notification{
				Target: target.Key, TargetLabel: target.Label, Machine: machine, Thread: t.ID, Workflow: t.Workflow,
				Status: t.Status, Summary: truncateRunes(t.Summary, MaxNotifySummary), Question: question, UpdatedAt: t.UpdatedAt,
				CreatedAt: now, State: NotifyPending, NextAt: now,
			})
			if err != nil {
				return added, fmt.Errorf("notification of thread %s: %w", t.ID, err)
			}
			if ok {
				added++
			}
		}
	}
	return added, nil
}

// notifyInsert adds a notification unless its event is there; $1..$13.
const notifyInsert = `INSERT INTO notifications (target, target_label, machine, thread_id, workflow, status, summary, question,
thread_updated_at, created_at, state, next_at, attempts) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
ON CONFLICT (target, machine, thread_id, status, thread_updated_at) DO NOTHING`

// notifyArgs are notifyInsert's arguments for n.
func (s *sqlStore) notifyArgs(n Notification) []any {
	return []any{n.Target, n.TargetLabel, n.Machine, n.Thread, n.Workflow, n.Status, n.Summary, n.Question,
		s.tv(n.UpdatedAt), s.tv(n.CreatedAt), n.State, s.tv(n.NextAt), 0}
}

// sqlNotifyTx is a database/sql transaction (SQLite's) as a notifyTx.
type sqlNotifyTx struct {
	s  *sqlStore
	tx *sql.Tx
}

func (q sqlNotifyTx) statuses(ctx context.Context, machine string, ids []string) (map[string]threadState, error) {
	list, err := json.Marshal(ids)
	if err != nil {
		return nil, err
	}
	rows, err := q.tx.QueryContext(ctx, `SELECT id, status, wait_since FROM threads WHERE machine = ?1 AND id IN (SELECT value FROM json_each(?2))`, machine, string(list))
	if err != nil {
		return nil, err
	}
	defer closeQuietly(rows)
	out := make(map[string]threadState, len(ids))
	for rows.Next() {
		var id string
		var st threadState
		if err := rows.Scan(&id, &st.status, nullTimeDest{&st.since}); err != nil {
			return nil, err
		}
		out[id] = st
	}
	return out, rows.Err()
}

func (q sqlNotifyTx) insert(ctx context.Context, n Notification) (bool, error) {
	res, err := q.tx.ExecContext(ctx, q.s.q(notifyInsert), q.s.notifyArgs(n)...)
	if err != nil {
		return false, err
	}
	k, err := res.RowsAffected()
	return k > 0, err
}

// pgxNotifyTx is a pgx transaction (PostgreSQL's sync) as a notifyTx.
type pgxNotifyTx struct {
	s  *sqlStore
	tx pgx.Tx
}

func (q pgxNotifyTx) statuses(ctx context.Context, machine string, ids []string) (map[string]threadState, error) {
	rows, err := q.tx.Query(ctx, `SELECT id, status, wait_since FROM threads WHERE machine = $1 AND id = ANY($2)`, machine, ids)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := make(map[string]threadState, len(ids))
	for rows.Next() {
		var id string
		var st threadState
		if err := rows.Scan(&id, &st.status, &st.since); err != nil {
			return nil, err
		}
		if st.since != nil {
			since := st.since.UTC()
			st.since = &since
		}
		out[id] = st
	}
	return out, rows.Err()
}

func (q pgxNotifyTx) insert(ctx context.Context, n Notification) (bool, error) {
	tag, err := q.tx.Exec(ctx, notifyInsert, q.s.notifyArgs(n)...)
	if err != nil {
		return false, err
	}
	return tag.RowsAffected() > 0, nil
}

const notifyCols = `id, target, target_label, machine, thread_id, workflow, status, summary, question, thread_updated_at,
created_at, state, attempts, last_error, last_code, next_at, finished_at`

func scanNotification(row scanner) (Notification, error) {
	var n Notification
	err := row.Scan(&n.ID, &n.Target, &n.TargetLabel, &n.Machine, &n.Thread, &n.Workflow, &n.Status, &n.Summary, &n.Question,
		timeDest{&n.UpdatedAt}, timeDest{&n.CreatedAt}, &n.State, &n.Attempts, &n.LastError, &n.LastCode, timeDest{&n.NextAt},
		nullTimeDest{&n.FinishedAt})
	return n, err
}

func scanNotifications(rows *sql.Rows) ([]Notification, error) {
	return scanAll(rows, scanNotification)
}

// ClaimNotifications implements Notifications.
func (s *sqlStore) ClaimNotifications(ctx context.Context, owner string, lease time.Duration, limit int) ([]Notification, error) {
	if owner == "" || lease <= 0 || limit <= 0 {
		return nil, errors.New("store: claim notifications: an owner, a lease and a limit are needed")
	}
	now := s.now()
	// SKIP LOCKED: a replica claiming meanwhile takes other rows rather
	// than wait; a row it meets after this claim commits is read again,
	// leased, and left.
	lock := ""
	if s.backend == BackendPostgres {
		lock = " FOR UPDATE SKIP LOCKED"
	}
	var out []Notification
	err := s.write(ctx, "claim notifications", func(tx *sql.Tx) ([]Change, error) {
		rows, err := tx.QueryContext(ctx, s.q(`UPDATE notifications SET lease_owner = $1, lease_until = $2, attempts = attempts + 1
WHERE id IN (SELECT id FROM notifications WHERE state = 'pending' AND next_at <= $3 AND (lease_until IS NULL OR lease_until <= $3)
ORDER BY next_at, id LIMIT $4`+lock+`) RETURNING `+notifyCols), owner, s.tv(now.Add(lease)), s.tv(now), limit)
		if err != nil {
			return nil, err
		}
		out, err = scanNotifications(rows)
		return nil, err
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b Notification) int {
		if c := a.NextAt.Compare(b.NextAt); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
	return out, nil
}

// FinishNotification implements Notifications.
func (s *sqlStore) FinishNotification(ctx context.Context, r NotificationResult) error {
	now := s.now()
	state, next, finished := NotifyDelivered, now, any(s.tv(now))
	switch {
	case r.Delivered:
	case r.RetryAt.IsZero():
		state = NotifyFailed
	default:
		state, next, finished = NotifyPending, r.RetryAt, nil
	}
	res, err := s.w.ExecContext(ctx, s.q(`UPDATE notifications SET state = $1, next_at = $2, finished_at = $3, last_code = $4,
last_error = $5, lease_owner = '', lease_until = NULL WHERE id = $6 AND lease_owner = $7 AND state = 'pending'`),
		state, s.tv(next), finished, r.Code, cleanText(truncateRunes(r.Error, MaxNotifyError)), r.ID, r.Owner)
	if err != nil {
		return fmt.Errorf("store: finish notification %d: %w", r.ID, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("store: finish notification %d: %w", r.ID, err)
	} else if n == 0 {
		return fmt.Errorf("store: finish notification %d: not claimed by %s: %w", r.ID, r.Owner, ErrNotFound)
	}
	return nil
}

// ListNotifications implements Notifications.
func (s *sqlStore) ListNotifications(ctx context.Context, q NotificationQuery) (NotificationPage, error) {
	var w conditions
	if q.State != "" {
		w.add("state = ?", q.State)
	}
	if q.Machine != "" {
		w.add("machine = ?", q.Machine)
	}
	limit, offset := pageBounds(q.Limit, q.Offset)
	var page NotificationPage
	err := s.read(ctx, func(tx *sql.Tx) error {
		cond := w.clause()
		if err := tx.QueryRowContext(ctx, s.q(`SELECT count(*) FROM notifications`+cond), w.args...).Scan(&page.Total); err != nil {
			return err
		}
		n := len(w.args)
		rows, err := tx.QueryContext(ctx, s.q(fmt.Sprintf(`SELECT %s FROM notifications%s ORDER BY created_at DESC, id DESC LIMIT $%d OFFSET $%d`,
			notifyCols, cond, n+1, n+2)), append(w.args, limit, offset)...)
		if err != nil {
			return err
		}
		page.Notifications, err = scanNotifications(rows)
		return err
	})
	if err != nil {
		return NotificationPage{}, fmt.Errorf("store: list notifications: %w", err)
	}
	return page, nil
}

// NotificationBacklog implements Notifications.
func (s *sqlStore) NotificationBacklog(ctx context.Context) (NotificationBacklog, error) {
	var b NotificationBacklog
	var oldest *time.Time
	err := s.r.QueryRowContext(ctx, `SELECT count(*), min(created_at) FROM notifications WHERE state = 'pending'`).Scan(&b.Pending, nullTimeDest{&oldest})
	if err != nil {
		return NotificationBacklog{}, fmt.Errorf("store: notification backlog: %w", err)
	}
	if oldest != nil {
		b.Oldest = *oldest
	}
	return b, nil
}
