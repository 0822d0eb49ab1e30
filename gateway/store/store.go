// Package store is what the gateway keeps on disk: the lifecycle of the
// tokens it issues (so that a revocation survives a restart and reaches
// every replica), the registrations of "original" TypeScript clients, the
// fleet's memory (which machines were seen and the last-known summary of
// every thread they ran, searchable after the machine goes away) and an
// audit log of who did what.
//
// # Backends
//
// One interface, [Store], has two implementations, picked by [Open]:
//
//   - SQLite (the default): one file, <data-dir>/gateway.db, through a
//     pure-Go driver so the gateway still builds with CGO_ENABLED=0. The
//     file is in WAL mode with a busy timeout, and every write goes through
//     a single connection: SQLite allows one writer at a time anyway, and
//     queueing writers in Go is cheaper and fairer than retrying on
//     SQLITE_BUSY. Reads use their own pool and are not blocked by writes.
//     Several processes on one machine may open the file at once (the
//     gateway, and the token commands run beside it), but it cannot serve
//     cluster mode ([Backend.Shared] says so): replicas on other machines
//     cannot reach the file, and its notifications are coarse.
//   - PostgreSQL, when [Config.DatabaseURL] is set, through pgx. Any number
//     of gateway processes may share one database.
//
// The schema is versioned and migrated at [Open] (goose, with embedded SQL
// files per dialect because full-text search differs: FTS5 for SQLite,
// a tsvector column with a GIN index for PostgreSQL). A database whose
// schema is newer than this binary knows is refused rather than used: an
// old gateway writing to a newer schema could lose what the newer one
// relies on.
//
// # Notifications
//
// The gateway answers every proxied request from memory (the set of
// revoked token ids, the registrations), never from the database, so each
// process must learn of changes made by the others. [Store.Subscribe]
// delivers a [Change] for every revocation and every registration put or
// deleted, whichever process made it:
//
//   - PostgreSQL: the writing transaction sends NOTIFY, which PostgreSQL
//     delivers only if the transaction commits; every store holds one
//     LISTEN connection and reconnects when it is lost. Notifications sent
//     while it was away are gone, so after a reconnect subscribers get a
//     [ChangeReload], telling them to re-read everything.
//   - SQLite: the store fans its own changes out in memory after each
//     commit. Commits by other processes (a `token revoke` beside a running
//     gateway) are noticed by polling PRAGMA data_version about once a
//     second, and delivered as a [ChangeReload], since SQLite does not say
//     what they changed.
//
// A subscriber that does not keep up never blocks the others: past a
// bound, its queued changes collapse into a single [ChangeReload].
//
// Times are stored in UTC to the microsecond (PostgreSQL's precision), so
// what is read back equals what was written once truncated the same way.
package store

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// ErrNotFound is returned (wrapped) when the token, registration, thread
// or machine asked for does not exist. Test with errors.Is.
var ErrNotFound = errors.New("not found")

// ErrExists is returned (wrapped) when creating a token whose id is already
// recorded: ids are JWT jtis and must be unique, so a duplicate is a bug in
// the caller, not something to overwrite silently.
var ErrExists = errors.New("already exists")

// Backend names the kind of database a Store uses.
type Backend string

const (
	// BackendSQLite is the embedded single-file database.
	BackendSQLite Backend = "sqlite"
	// BackendPostgres is a PostgreSQL server reached over the network.
	BackendPostgres Backend = "postgres"
)

// Shared reports whether the replicas of a cluster may use the same
// database. Cluster mode needs it: a SQLite file is local to one machine,
// and other processes learn of its changes only as a reload, polled.
func (b Backend) Shared() bool { return b == BackendPostgres }

// TokenKind tells what a token authenticates.
type TokenKind string

const (
	// KindConnector tokens are held by connectors (one machine each).
	KindConnector TokenKind = "connector"
	// KindDashboard tokens are held by people using the dashboard or API.
	KindDashboard TokenKind = "dashboard"
)

// valid reports whether k is one of the kinds the schema accepts, so a
// typo fails with a clear error instead of a constraint violation.
func (k TokenKind) valid() bool { return k == KindConnector || k == KindDashboard }

// Token is the record of one issued JWT. The token itself is never stored:
// only what is needed to list and revoke it.
type Token struct {
	// ID is the JWT's jti.
	ID string
	// Kind is connector or dashboard.
	Kind TokenKind
	// Name is the connector's name, or the dashboard token's subject.
	Name string
	// CreatedAt is when the token was issued; CreateToken fills in now if
	// it is zero.
	CreatedAt time.Time
	// ExpiresAt is when it stops being valid; nil means never.
	ExpiresAt *time.Time
	// Note is a free-form label shown in listings and the audit log.
	Note string
	// RevokedAt is when it was revoked; nil while it is not.
	RevokedAt *time.Time
}

// TokenFilter narrows ListTokens; zero fields do not filter.
type TokenFilter struct {
	// Kind keeps only tokens of this kind.
	Kind TokenKind
	// Name keeps only tokens with this name.
	Name string
	// ActiveOnly leaves out revoked tokens (expired ones are kept: the
	// store does not judge expiry, the caller's clock does).
	ActiveOnly bool
}

// Registration is an original (TypeScript) client that registered with
// POST /api/gateway/register.
type Registration struct {
	// Name identifies the client; registering again under it replaces it.
	Name string
	// URL is where the gateway reaches the client.
	URL string
	// TokenSealed is the client's token, encrypted by the caller. The store
	// never sees the plaintext, so a copy of the database gives no access.
	TokenSealed []byte
	// RegisteredAt is when it (last) registered.
	RegisteredAt time.Time
	// LastHeartbeat is when it was last heard from.
	LastHeartbeat time.Time
}

// Machine is one connector's machine as the fleet remembers it.
type Machine struct {
	// Name is the connector's name.
	Name string
	// FirstSeen is when the gateway first heard of it.
	FirstSeen time.Time
	// LastSeen is when it was last heard of (a sync or a touch).
	LastSeen time.Time
}

// PromptMaxRunes is how much of a thread's prompt the store keeps: enough to
// recognise and search a thread, without copying whole documents.
const PromptMaxRunes = 500

// Thread is the last-known summary of one workflow thread on one machine.
type Thread struct {
	// Machine is the machine the thread ran on; with ID it is the key.
	Machine string
	// ID is the thread's id on that machine.
	ID string
	// Workflow is the workflow's name.
	Workflow string
	// Status is the engine's status word (running, done, failed, ...).
	Status string
	// Prompt is the thread's prompt; the store keeps its first
	// PromptMaxRunes runes, the last of them CutMark when it cut.
	Prompt string
	// StartedAt is when the thread started; nil if unknown.
	StartedAt *time.Time
	// UpdatedAt is when the thread last changed; searches order and filter
	// on it.
	UpdatedAt time.Time
	// Duration is how long the thread ran (so far).
	Duration time.Duration
	// Steps is how many steps it took.
	Steps int
	// ReturnCode is its exit status; nil while it has none.
	ReturnCode *int
	// Summary is a short description of the outcome.
	Summary string
	// Usage is the LLM usage as JSON, if any. PostgreSQL normalises JSON
	// (key order, spacing), so compare it as JSON, not as bytes.
	Usage json.RawMessage
	// Tokens is how many LLM tokens (prompt and completion) the thread
	// used, so far; 0 when unknown.
	Tokens int64
	// Cost is what those tokens cost, in US dollars; 0 when unknown.
	Cost float64
	// Waiting is what the thread asks a person while its status is
	// waiting; nil otherwise (the store clears it when the status
	// changes), and for a waiting thread whose connector did not say.
	Waiting *Waiting
}

// Waiting is the question a waiting thread asks a person, as its
// connector reported it (shared/fleet's Waiting), within the store's
// bounds (bounds.go).
type Waiting struct {
	// Role is the role a person plays.
	Role string
	// Question is the role's prompt, cut to QuestionMaxRunes runes (the
	// last of them CutMark when cut).
	Question string
	// Assignee is who is asked; "" when anyone may answer.
	Assignee string
	// Since is when the thread began to wait.
	Since time.Time
	// Deadline is when the wait times out; nil when it never does.
	Deadline *time.Time
}

// WaitingStatus is the status of a thread that waits for a person's
// answer: only such a thread keeps a Waiting, and only such threads are
// in the inbox.
const WaitingStatus = "waiting"

// InboxQuery filters and pages Inbox; zero fields do not filter.
type InboxQuery struct {
	// Assignee keeps only the threads asking this person (exactly); ""
	// keeps every waiting thread, whoever is asked.
	Assignee string
	// Limit is the page size: DefaultLimit if zero, at most MaxLimit.
	Limit int
	// Offset skips that many threads.
	Offset int
}

// InboxPage is one page of the inbox: the threads waiting for a person,
// oldest wait first.
type InboxPage struct {
	// Threads is the page; each has its Waiting, but one whose connector
	// did not say what it asks (Waiting nil), which waits since its
	// UpdatedAt as far as the store knows.
	Threads []Thread
	// Total is how many threads match, over all pages.
	Total int
}

// ThreadCursor is a thread's place in the search order (UpdatedAt newest
// first, then Machine and ID): a search continues after it (keyset
// paging), at a cost that does not grow with how deep the page is, and
// which threads that change meanwhile do not shift.
type ThreadCursor struct {
	// UpdatedAt is the thread's UpdatedAt.
	UpdatedAt time.Time
	// Machine is the thread's machine.
	Machine string
	// ID is the thread's id.
	ID string
}

// CursorOf is t's place in the search order.
func CursorOf(t Thread) ThreadCursor {
	return ThreadCursor{UpdatedAt: t.UpdatedAt, Machine: t.Machine, ID: t.ID}
}

// cursorWire is ThreadCursor as String writes it: short keys, the time in
// microseconds, the store's precision.
type cursorWire struct {
	T int64  `json:"t"`
	M string `json:"m"`
	I string `json:"i"`
}

// String is the cursor as an opaque, URL-safe token (ParseThreadCursor
// reads it back).
func (c ThreadCursor) String() string {
	b, _ := json.Marshal(cursorWire{T: utc(c.UpdatedAt).UnixMicro(), M: c.Machine, I: c.ID}) // strings and an integer always marshal
	return base64.RawURLEncoding.EncodeToString(b)
}

// ErrBadCursor is returned (wrapped) by ParseThreadCursor.
var ErrBadCursor = errors.New("not a thread cursor")

// ParseThreadCursor reads a cursor made by ThreadCursor.String.
func ParseThreadCursor(s string) (ThreadCursor, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) == 0 {
		return ThreadCursor{}, fmt.Errorf("%w: %q is not base64url", ErrBadCursor, s)
	}
	var w cursorWire
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil {
		return ThreadCursor{}, fmt.Errorf("%w: %q: %v", ErrBadCursor, s, err)
	}
	if w.M == "" || w.I == "" {
		return ThreadCursor{}, fmt.Errorf("%w: %q names no thread", ErrBadCursor, s)
	}
	return ThreadCursor{UpdatedAt: time.UnixMicro(w.T).UTC(), Machine: w.M, ID: w.I}, nil
}

// compareCursor orders a thread against a cursor as searches do: negative
// when t comes before c.
func compareCursor(t Thread, c ThreadCursor) int {
	return compareSearchOrder(t, Thread{UpdatedAt: utc(c.UpdatedAt), Machine: c.Machine, ID: c.ID})
}

// ThreadQuery filters and pages SearchThreads; zero fields do not filter.
type ThreadQuery struct {
	// Machine keeps only this machine's threads.
	Machine string
	// Workflow keeps only this workflow's threads.
	Workflow string
	// Status keeps only threads with this status.
	Status string
	// Since keeps threads updated at or after it.
	Since time.Time
	// Until keeps threads updated before it.
	Until time.Time
	// Q is full-text search over prompt and summary: every word must occur
	// (whole words, case-insensitive). Punctuation is not syntax.
	Q string
	// Limit is the page size: DefaultLimit if zero, at most MaxLimit.
	Limit int
	// Offset skips that many results. Its cost grows with the depth:
	// pages past the first should continue from After instead.
	Offset int
	// After, when set, starts the page with the first match after this
	// place in the order (ThreadPage.Next of the previous page); Offset
	// is then ignored.
	After *ThreadCursor
}

// DefaultLimit is the page size when a query names none.
const DefaultLimit = 50

// MaxLimit bounds a page, so one request cannot read the whole history.
const MaxLimit = 1000

// DefaultMaxTotal is the default of Config.MaxTotal.
const DefaultMaxTotal = 10000

// ThreadPage is one page of search results, newest first.
type ThreadPage struct {
	// Threads is the page.
	Threads []Thread
	// Total is how many threads match, over all pages, up to
	// Config.MaxTotal.
	Total int
	// TotalCapped means more than Config.MaxTotal threads match: Total is
	// then that bound, a lower bound of the true count.
	TotalCapped bool
	// Next is where the next page starts (ThreadQuery.After); nil when
	// this page is the last.
	Next *ThreadCursor
}

// StatsBy names what ThreadStats groups threads by.
type StatsBy string

const (
	// StatsByMachine groups by machine.
	StatsByMachine StatsBy = "machine"
	// StatsByWorkflow groups by workflow.
	StatsByWorkflow StatsBy = "workflow"
)

// StatsQuery selects what ThreadStats summarises: the threads updated in
// [Since, Until), grouped by By.
type StatsQuery struct {
	// By is the grouping.
	By StatsBy
	// Since and Until bound UpdatedAt; both are required.
	Since, Until time.Time
}

// MaxStatsRange bounds a StatsQuery's range: a day's bucket each, a
// glance over a longer time is a report, not a glance.
const MaxStatsRange = 366 * 24 * time.Hour

// EndedStatuses are the statuses of threads that are over: they count in
// success rates and median durations. A thread interrupted by its
// connector's end may still resume, so it is not among them.
var EndedStatuses = []string{"completed", "failed", "killed"}

// DayCount is one group's threads of one UTC day, by status.
type DayCount struct {
	// Day is the day's start (UTC midnight).
	Day time.Time
	// ByStatus counts the day's threads per status.
	ByStatus map[string]int
}

// GroupStats summarises one group's threads.
type GroupStats struct {
	// Key is the machine's or the workflow's name.
	Key string
	// Days are the days that have threads, oldest first.
	Days []DayCount
	// Threads counts them all.
	Threads int
	// Ended counts those over (EndedStatuses).
	Ended int
	// Completed counts those that completed.
	Completed int
	// MedianDuration is the median (the lower one of an even count) of
	// the ended threads' durations; 0 when none ended.
	MedianDuration time.Duration
	// Tokens sums the threads' tokens.
	Tokens int64
	// Cost sums their cost in US dollars.
	Cost float64
}

// SharedSecretActor is the Actor of audit entries made with the gateway's
// shared secret rather than a token.
const SharedSecretActor = "shared secret"

// AuditEntry is one line of the audit log. It names who acted by token id
// and note, never by credential: AppendAudit refuses a field that looks
// like a JWT.
type AuditEntry struct {
	// ID is assigned by the store, increasing.
	ID int64
	// Time is when it happened; AppendAudit fills it in if zero.
	Time time.Time
	// TokenID is the acting token's id (jti); empty for the shared secret.
	TokenID string
	// Actor is the token's note, or SharedSecretActor.
	Actor string
	// Source is the client's address.
	Source string
	// Action is what was done: start, kill, pause, resume, fork, rollback,
	// cas-delete, gc, login, logout, token-create, token-revoke, ...
	Action string
	// Machine is the machine acted on, if any.
	Machine string
	// Target is what was acted on (a thread id, a token id, ...).
	Target string
	// Status is the HTTP status code of the result.
	Status int
	// Key, when set, makes the append idempotent: an entry whose key the
	// log holds already is not added again (AppendAudit returns the first
	// one's id). The gateway draws one per entry, so that an entry written
	// twice — its first write's answer lost, or replayed after a database
	// outage — is in the log once. At most MaxAuditKey bytes; never listed.
	Key string
}

// MaxAuditKey bounds AuditEntry.Key.
const MaxAuditKey = 64

// AuditQuery filters and pages ListAudit; zero fields do not filter.
type AuditQuery struct {
	// Action keeps only entries with this action.
	Action string
	// Machine keeps only entries about this machine.
	Machine string
	// TokenID keeps only what this token did (its id, the jti).
	TokenID string
	// Since keeps entries at or after it.
	Since time.Time
	// Until keeps entries before it.
	Until time.Time
	// Limit is the page size: DefaultLimit if zero, at most MaxLimit.
	Limit int
	// Offset skips that many entries.
	Offset int
}

// AuditPage is one page of the audit log, newest first.
type AuditPage struct {
	// Entries is the page.
	Entries []AuditEntry
	// Total is how many entries match, over all pages.
	Total int
}

// PruneResult tells what Prune deleted.
type PruneResult struct {
	// Threads is how many thread summaries were deleted.
	Threads int64
	// Machines is how many machines, last seen before the cutoff and left
	// with no threads, were forgotten.
	Machines int64
	// Audit is how many audit entries were deleted.
	Audit int64
	// Notifications is how many notifications, delivered or given up on,
	// were deleted.
	Notifications int64
}

// ChangeKind tells what a Change is about.
type ChangeKind string

const (
	// ChangeRevocation means the tokens in IDs were revoked.
	ChangeRevocation ChangeKind = "revocation"
	// ChangeRegistration means the registrations named in IDs were put or
	// deleted; read them again (GetRegistration says ErrNotFound for a
	// deleted one).
	ChangeRegistration ChangeKind = "registration"
	// ChangeBinding means the names in IDs were bound (NameBindings). A
	// binding is released by a revocation, which ChangeRevocation
	// announces: read the bindings again on either.
	ChangeBinding ChangeKind = "binding"
	// ChangeThreads means what the store holds of the threads of the
	// machines in IDs changed (Announce: the replica that synced them
	// gathers its syncs and tells of them now and then, so a busy fleet
	// makes a few of these a second, not one per sync).
	ChangeThreads ChangeKind = "threads"
	// ChangeReload means changes may have been missed (the LISTEN
	// connection was lost, or the subscriber fell behind): re-read the
	// revoked ids, the registrations and the name bindings.
	ChangeReload ChangeKind = "reload"
)

// Change is one notification from Subscribe.
type Change struct {
	// Kind is what changed.
	Kind ChangeKind `json:"kind"`
	// IDs are the revoked token ids, the registration names or the bound
	// names; empty for ChangeReload.
	IDs []string `json:"ids,omitempty"`
}

// Store is the gateway's persistent state. Every method takes a context
// and is safe for concurrent use. Errors are wrapped with what was being
// done; missing things are ErrNotFound.
type Store interface {
	// Backend says which kind of database this is, so the gateway can
	// refuse one that cannot serve cluster mode.
	Backend() Backend
	// SchemaVersion is the migration version the database is at.
	SchemaVersion(ctx context.Context) (int64, error)
	// Close releases the database and ends subscriptions.
	Close() error
	// Guard tells which database this is and whether it is still there
	// (guard.go).
	Guard

	// CreateToken records a newly issued token (ErrExists if its id is
	// taken). RevokedAt is recorded as given, so an import keeps history.
	CreateToken(ctx context.Context, t Token) error
	// GetToken returns one token by id.
	GetToken(ctx context.Context, id string) (Token, error)
	// ListTokens returns matching tokens, newest first.
	ListTokens(ctx context.Context, f TokenFilter) ([]Token, error)
	// RevokeToken revokes one token and returns it. Revoking a revoked
	// token changes nothing and returns it as it is (with its first
	// revocation time): revocation is idempotent.
	RevokeToken(ctx context.Context, id string) (Token, error)
	// RevokeConnectorTokens revokes every unrevoked connector token with
	// this name and returns those it revoked (possibly none).
	RevokeConnectorTokens(ctx context.Context, name string) ([]Token, error)
	// RevokeKind revokes every unrevoked token of a kind and returns those
	// it revoked (possibly none).
	RevokeKind(ctx context.Context, kind TokenKind) ([]Token, error)
	// RevokedTokenIDs returns the id of every revoked token, for the
	// in-memory set that the gateway checks on each request.
	RevokedTokenIDs(ctx context.Context) ([]string, error)

	// PutRegistration inserts or replaces a registration by name.
	PutRegistration(ctx context.Context, r Registration) error
	// GetRegistration returns one registration by name.
	GetRegistration(ctx context.Context, name string) (Registration, error)
	// TouchRegistration records a heartbeat. It sends no notification:
	// heartbeats are frequent and no other process acts on them.
	TouchRegistration(ctx context.Context, name string, at time.Time) error
	// DeleteRegistration removes a registration.
	DeleteRegistration(ctx context.Context, name string) error
	// ListRegistrations returns every registration, by name.
	ListRegistrations(ctx context.Context) ([]Registration, error)

	// NameBindings keeps which names connector tokens have held.
	NameBindings

	// Notifications keeps the webhooks about threads (notify.go).
	Notifications

	// Triggers keeps the webhooks and schedules that start threads, and their runs (triggers.go).
	Triggers

	// SyncThreads inserts or updates thread summaries of one machine in one
	// transaction and marks the machine seen now. Each thread's Machine is
	// set to machine. Threads not in the batch are kept: the fleet's memory
	// outlives a connector's own history; Prune forgets old ones.
	SyncThreads(ctx context.Context, machine string, threads []Thread) error
	// SyncThreadsResult is SyncThreads, telling what it did beyond
	// storing: every thread is fitted to the store's bounds first, and
	// the machine kept within its share (bounds.go).
	SyncThreadsResult(ctx context.Context, machine string, threads []Thread) (SyncResult, error)
	// SyncThreadsAt is SyncThreadsResult for threads heard at a given
	// time rather than now (written late, after a database outage): the
	// machine is marked seen then, and the bounds on times count from
	// then.
	SyncThreadsAt(ctx context.Context, machine string, heard time.Time, threads []Thread) (SyncResult, error)
	// TouchMachine marks a machine seen now (recording it if new) and
	// returns it.
	TouchMachine(ctx context.Context, name string) (Machine, error)
	// TouchMachines marks every named machine seen now (recording new
	// ones) in one transaction: the gateway marks all its connected
	// machines once a round, and a write per machine would cost the store
	// thousands of transactions a minute. Repeated names count once; an
	// empty list writes nothing. A bad name refuses the whole list before
	// anything is written.
	TouchMachines(ctx context.Context, names []string) error
	// TouchMachinesAt is TouchMachines for machines seen at a given time
	// (a sighting written late, after a database outage). A machine's
	// last seen never goes back, nor its first seen forward, whichever
	// the method and the order of the writes.
	TouchMachinesAt(ctx context.Context, names []string, at time.Time) error
	// ListMachines returns every known machine, by name.
	ListMachines(ctx context.Context) ([]Machine, error)
	// GetThread returns one thread summary.
	GetThread(ctx context.Context, machine, id string) (Thread, error)
	// SearchThreads searches every machine's threads, newest (by
	// UpdatedAt) first.
	SearchThreads(ctx context.Context, q ThreadQuery) (ThreadPage, error)
	// ThreadStats summarises the threads updated in a range, per machine
	// or per workflow, by key.
	ThreadStats(ctx context.Context, q StatsQuery) ([]GroupStats, error)
	// Inbox lists the threads whose status is waiting, on every machine
	// (online or not), oldest wait first (then machine and id).
	Inbox(ctx context.Context, q InboxQuery) (InboxPage, error)

	// AppendAudit adds an entry and returns its id.
	AppendAudit(ctx context.Context, e AuditEntry) (int64, error)
	// ListAudit returns matching entries, newest first.
	ListAudit(ctx context.Context, q AuditQuery) (AuditPage, error)

	// Prune deletes thread summaries updated before the cutoff, audit
	// entries older than it, notifications added before it that are
	// delivered or given up on, and machines last seen before it that
	// have no threads left. Tokens and registrations are not history and
	// stay.
	Prune(ctx context.Context, before time.Time) (PruneResult, error)

	// Subscribe delivers changes to revocations and registrations made by
	// any process using this database, this one included, until ctx ends
	// or the store closes; then the channel is closed. Changes committed
	// after Subscribe returns are delivered (or covered by a
	// ChangeReload).
	Subscribe(ctx context.Context) (<-chan Change, error)
	// Announce delivers changes to every subscriber of any process using
	// this database, as if a write had made them: for what a process knows
	// changed without writing it itself in one transaction (ChangeThreads,
	// gathered over many syncs). Announcing writes nothing.
	Announce(ctx context.Context, changes ...Change) error
}

// truncateRunes returns s cut to at most n runes, never inside a rune.
func truncateRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	i := 0
	for pos := range s {
		if i == n {
			return s[:pos]
		}
		i++
	}
	return s
}

// cleanText makes s storable as text in both backends: PostgreSQL refuses
// invalid UTF-8 and NUL bytes, and a connector's output may hold either.
func cleanText(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	return strings.ReplaceAll(s, "\x00", "")
}

// utc truncates t to the stored precision, in UTC.
func utc(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

// looksLikeJWT reports whether s holds something shaped like a JWT (three
// base64url parts, the first a JSON object): the audit log must never hold
// a credential, and a caller passing the token instead of its id is the
// likely mistake.
func looksLikeJWT(s string) bool {
	i := strings.Index(s, "eyJ")
	if i < 0 {
		return false
	}
	return strings.Count(s[i:], ".") >= 2
}

// pageBounds applies the default and the bound to a limit, and keeps the
// offset non-negative.
func pageBounds(limit, offset int) (int, int) {
	if limit <= 0 {
		limit = DefaultLimit
	}
	limit = min(limit, MaxLimit)
	return limit, max(offset, 0)
}
