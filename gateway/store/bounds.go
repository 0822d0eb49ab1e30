package store

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/uncaged/workflow/shared/fleet"
)

// What a connector reports is the connector's to choose, and a modified
// one chose 900 KB summaries and filled a 64 MB data directory in 15 s.
//
// Invariant: whatever a connector sends, each thread the store keeps fits
// the bounds below field by field (so one thread is at most a few tens of
// kilobytes, and every value fits its column in both backends), and a
// machine's threads stay within its share of the store
// (Config.MaxThreadsPerMachine and MaxBytesPerMachine), its oldest
// forgotten first. Both are enforced in SyncThreads, the only way threads
// enter the store: boundThread for each thread, trimMachine for the
// machine in the same transaction. What they changed is told in a
// SyncResult, never silently: a cut text ends with a mark, a thread
// refused or forgotten is counted.

// Bounds of one thread's fields.
const (
	// MaxThreadIDBytes bounds a thread id: an engine's is a 26-character
	// ULID.
	MaxThreadIDBytes = 128
	// MaxWorkflowBytes bounds a workflow's name.
	MaxWorkflowBytes = 256
	// MaxStatusBytes bounds a status word.
	MaxStatusBytes = 32
	// MaxSummaryBytes bounds a summary: a paragraph or two of outcome.
	MaxSummaryBytes = 8 << 10
	// MaxUsageBytes bounds the usage document: an engine's is a few
	// hundred bytes (counts and the models called).
	MaxUsageBytes = 4 << 10
	// MaxTokens bounds a thread's token count, and MaxCost its cost in
	// US dollars: far above any real thread, low enough that sums over
	// a fleet stay exact.
	MaxTokens = 1_000_000_000_000
	MaxCost   = 1_000_000_000
	// MaxDuration bounds how long a thread ran.
	MaxDuration = 100 * 365 * 24 * time.Hour
	// MaxClockSkew is how far past the store's clock a connector's time
	// may be: a time further ahead would stay at the top of every
	// newest-first list.
	MaxClockSkew = 24 * time.Hour
	// MaxRoleBytes bounds the role a waiting thread names, and
	// MaxAssigneeBytes whom it asks: names, not texts.
	MaxRoleBytes     = 256
	MaxAssigneeBytes = 256
	// QuestionMaxRunes bounds a waiting thread's question, as the
	// connector cuts it already: enough for an inbox line and a
	// notification; the whole question is the connector's to answer.
	QuestionMaxRunes = fleet.QuestionMaxRunes
	// MaxDeadlineAhead is how far past the store's clock a wait's
	// deadline may be: further is no deadline anyone waits for, and
	// would leave both backends' time ranges.
	MaxDeadlineAhead = 100 * 365 * 24 * time.Hour
)

// MinThreadTime is the earliest time a thread may have: before it, a
// time is a connector's bug (or a zero value), not a date.
var MinThreadTime = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// Defaults of a machine's share of the store.
const (
	// DefaultMaxThreadsPerMachine bounds the threads kept per machine:
	// 550 a day over the 90 days of history kept by default.
	DefaultMaxThreadsPerMachine = 50_000
	// DefaultMaxBytesPerMachine bounds what a machine's threads take,
	// counted as threadBytes does.
	DefaultMaxBytesPerMachine = 64 << 20
)

// threadRowOverhead is what a thread costs beyond its text: its other
// columns, its index entries and its full-text entry, roughly. It keeps a
// machine sending empty threads within its share too. The migration that
// introduced the count (00005, 00006) uses the same figure.
const threadRowOverhead = 256

// threadBytes is what t counts against its machine's share.
func threadBytes(t Thread) int64 {
	n := threadRowOverhead + len(t.ID) + len(t.Workflow) + len(t.Status) + len(t.Prompt) + len(t.Summary) + len(t.Usage)
	if w := t.Waiting; w != nil {
		n += len(w.Role) + len(w.Question) + len(w.Assignee)
	}
	return int64(n)
}

// CutMark ends a text the store cut to fit its bound.
const CutMark = "…"

// Fields, as SyncResult.Cut names them.
const (
	FieldWorkflow   = "workflow"
	FieldStatus     = "status"
	FieldPrompt     = "prompt"
	FieldSummary    = "summary"
	FieldUsage      = "usage"
	FieldTokens     = "tokens"
	FieldCost       = "cost"
	FieldSteps      = "steps"
	FieldDuration   = "duration"
	FieldReturnCode = "returnCode"
	FieldStartedAt  = "startedAt"
	FieldUpdatedAt  = "updatedAt"
	// FieldWaiting counts a Waiting dropped because its thread's status
	// is not waiting; the others its fields cut or corrected.
	FieldWaiting         = "waiting"
	FieldWaitingRole     = "waiting.role"
	FieldWaitingQuestion = "waiting.question"
	FieldWaitingAssignee = "waiting.assignee"
	FieldWaitingSince    = "waiting.since"
	FieldWaitingDeadline = "waiting.deadline"
)

// Reasons a thread is refused (ThreadRefusal.Reason).
const (
	// RefusedBadID: the id is empty, too long, or not made of letters,
	// digits, '-', '_' and '.'.
	RefusedBadID = "bad id"
)

// ThreadRefusal is a thread SyncThreads did not store.
type ThreadRefusal struct {
	// ID is the thread's id as sent, cut to 64 bytes for the logs.
	ID string
	// Reason is why (RefusedBadID).
	Reason string
}

// SyncResult tells what SyncThreads changed in what it was given.
type SyncResult struct {
	// Refused are the threads not stored.
	Refused []ThreadRefusal
	// Cut counts, by field (FieldSummary, ...), the values cut, dropped or
	// corrected to fit their bounds.
	Cut map[string]int
	// Evicted is how many of the machine's oldest threads were forgotten
	// to keep it within its share, and EvictedBytes what they took.
	Evicted      int
	EvictedBytes int64
	// Notified is how many notifications the sync added (notify.go).
	Notified int
}

// cut counts a field changed.
func (r *SyncResult) cut(field string) {
	if r.Cut == nil {
		r.Cut = map[string]int{}
	}
	r.Cut[field]++
}

// validThreadID says whether id may name a thread.
func validThreadID(id string) bool {
	if id == "" || len(id) > MaxThreadIDBytes {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// validStatus says whether s is a status word: the engine's (running,
// completed, ...) or one a newer engine may add.
func validStatus(s string) bool {
	if s == "" || len(s) > MaxStatusBytes || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// UnknownStatus stands for a status that is not a status word.
const UnknownStatus = "unknown"

// cutBytes cuts s to at most n bytes, mark included, at a rune boundary,
// and ends it with mark; s itself when it fits.
func cutBytes(s string, n int, mark string) string {
	if len(s) <= n {
		return s
	}
	end := max(n-len(mark), 0)
	for end > 0 && !utf8.RuneStart(s[end]) {
		end--
	}
	return s[:end] + mark
}

// boundThread fits t within the bounds: it returns what the store keeps
// of t, or ok false when t cannot be kept at all. now is the store's
// clock; what was changed is counted in res.
func boundThread(t Thread, now time.Time, res *SyncResult) (Thread, bool) {
	if !validThreadID(t.ID) {
		res.Refused = append(res.Refused, ThreadRefusal{ID: cutBytes(strings.ToValidUTF8(t.ID, "?"), 64, CutMark), Reason: RefusedBadID})
		return t, false
	}
	text := func(field string, s string, bound func(string) string) string {
		out := bound(cleanText(s))
		if out != s {
			res.cut(field)
		}
		return out
	}
	t.Workflow = text(FieldWorkflow, t.Workflow, func(s string) string { return cutBytes(s, MaxWorkflowBytes, CutMark) })
	t.Prompt = text(FieldPrompt, t.Prompt, func(s string) string {
		if utf8.RuneCountInString(s) <= PromptMaxRunes {
			return s
		}
		return truncateRunes(s, PromptMaxRunes-1) + CutMark
	})
	t.Summary = text(FieldSummary, t.Summary, func(s string) string {
		if len(s) <= MaxSummaryBytes {
			return s
		}
		mark := fmt.Sprintf("%s [%d bytes cut by the gateway]", CutMark, len(s)-MaxSummaryBytes)
		return cutBytes(s, MaxSummaryBytes, mark)
	})
	if !validStatus(t.Status) && t.Status != "" {
		t.Status = UnknownStatus
		res.cut(FieldStatus)
	}
	if u := t.Usage; len(u) > 0 {
		switch {
		case bytes.Equal(bytes.TrimSpace(u), []byte("null")):
			// What an engine without LLM usage sends: no usage, not a
			// correction to count and warn about.
			t.Usage = nil
		case len(u) > MaxUsageBytes || !json.Valid(u):
			t.Usage = nil
			res.cut(FieldUsage)
		}
	}
	if t.Tokens < 0 || t.Tokens > MaxTokens {
		t.Tokens = 0
		res.cut(FieldTokens)
	}
	if c := t.Cost; c < 0 || c > MaxCost || math.IsNaN(c) || math.IsInf(c, 0) {
		t.Cost = 0
		res.cut(FieldCost)
	}
	if t.Steps < 0 || t.Steps > math.MaxInt32 {
		t.Steps = min(max(t.Steps, 0), math.MaxInt32)
		res.cut(FieldSteps)
	}
	if t.Duration < 0 || t.Duration > MaxDuration {
		t.Duration = min(max(t.Duration, 0), MaxDuration)
		res.cut(FieldDuration)
	}
	if rc := t.ReturnCode; rc != nil && (*rc < math.MinInt32 || *rc > math.MaxInt32) {
		t.ReturnCode = nil
		res.cut(FieldReturnCode)
	}
	latest := now.Add(MaxClockSkew)
	switch {
	case t.UpdatedAt.IsZero():
		t.UpdatedAt = now // not told: heard now
	case t.UpdatedAt.After(latest) || t.UpdatedAt.Before(MinThreadTime):
		t.UpdatedAt = now
		res.cut(FieldUpdatedAt)
	}
	if s := t.StartedAt; s != nil && (s.After(latest) || s.Before(MinThreadTime)) {
		t.StartedAt = nil
		res.cut(FieldStartedAt)
	}
	t.Waiting = boundWaiting(t, now, res)
	return t, true
}

// boundWaiting is what the store keeps of t's Waiting (t's other fields
// bounded already): nothing unless t waits — a Waiting beside another
// status contradicts it, and is dropped and counted — else each field
// within its bound. The caller's Waiting is not changed.
func boundWaiting(t Thread, now time.Time, res *SyncResult) *Waiting {
	if t.Waiting == nil {
		return nil
	}
	if t.Status != WaitingStatus {
		res.cut(FieldWaiting)
		return nil
	}
	w := *t.Waiting
	text := func(field string, s string, bound func(string) string) string {
		out := bound(cleanText(s))
		if out != s {
			res.cut(field)
		}
		return out
	}
	w.Role = text(FieldWaitingRole, w.Role, func(s string) string { return cutBytes(s, MaxRoleBytes, CutMark) })
	w.Assignee = text(FieldWaitingAssignee, w.Assignee, func(s string) string { return cutBytes(s, MaxAssigneeBytes, CutMark) })
	w.Question = text(FieldWaitingQuestion, w.Question, func(s string) string { return fleet.Truncate(s, QuestionMaxRunes) })
	switch {
	case w.Since.IsZero():
		w.Since = t.UpdatedAt // not told: as far as the store knows
	case w.Since.After(now.Add(MaxClockSkew)) || w.Since.Before(MinThreadTime):
		w.Since = t.UpdatedAt
		res.cut(FieldWaitingSince)
	}
	if d := w.Deadline; d != nil && (d.After(now.Add(MaxDeadlineAhead)) || d.Before(MinThreadTime)) {
		w.Deadline = nil
		res.cut(FieldWaitingDeadline)
	}
	return &w
}

// shareTarget is what a machine over its share is brought down to: a
// tenth under the bound, so that a machine at its share does not pay for
// a trim with every thread it adds.
func shareTarget[N int | int64](bound N) N { return bound - bound/10 }

// shareQuerier is a transaction of either backend, as trimMachine needs
// it.
type shareQuerier interface {
	// usage reads the machine's counts.
	usage(ctx context.Context, machine string) (threads, bytes int64, err error)
	// evict deletes the machine's threads past keep threads or keepBytes
	// bytes, newest kept first, and returns the bytes of each one deleted.
	evict(ctx context.Context, machine string, keep, keepBytes int64) ([]int64, error)
}

// evictQuery is shareQuerier.evict's statement ($1 machine, $2 threads
// kept, $3 bytes kept): the window runs over the machine's threads
// newest first, as the (machine, updated_at DESC, id) index has them.
const evictQuery = `DELETE FROM threads WHERE machine = $1 AND id IN (
SELECT id FROM (
  SELECT id, row_number() OVER w AS n, sum(bytes) OVER w AS total FROM threads WHERE machine = $1
  WINDOW w AS (ORDER BY updated_at DESC, id ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
) kept WHERE n > $2 OR total > $3) RETURNING bytes`

// trimMachine brings machine within its share (maxThreads, maxBytes),
// oldest threads first, counting what it forgot in res.
func trimMachine(ctx context.Context, q shareQuerier, machine string, maxThreads int, maxBytes int64, res *SyncResult) error {
	threads, size, err := q.usage(ctx, machine)
	if err != nil {
		return fmt.Errorf("machine's share: %w", err)
	}
	if threads <= int64(maxThreads) && size <= maxBytes {
		return nil
	}
	evicted, err := q.evict(ctx, machine, int64(shareTarget(maxThreads)), shareTarget(maxBytes))
	if err != nil {
		return fmt.Errorf("machine's share: %w", err)
	}
	res.Evicted += len(evicted)
	for _, b := range evicted {
		res.EvictedBytes += b
	}
	return nil
}

// sqlShare is a database/sql transaction as a shareQuerier.
type sqlShare struct {
	s  *sqlStore
	tx *sql.Tx
}

func (q sqlShare) usage(ctx context.Context, machine string) (threads, size int64, err error) {
	err = q.tx.QueryRowContext(ctx, q.s.q(`SELECT thread_count, stored_bytes FROM machines WHERE name = $1`), machine).Scan(&threads, &size)
	return threads, size, err
}

func (q sqlShare) evict(ctx context.Context, machine string, keep, keepBytes int64) ([]int64, error) {
	rows, err := q.tx.QueryContext(ctx, q.s.q(evictQuery), machine, keep, keepBytes)
	if err != nil {
		return nil, err
	}
	defer closeQuietly(rows)
	var out []int64
	for rows.Next() {
		var b int64
		if err := rows.Scan(&b); err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, rows.Err()
}

// pgxShare is a pgx transaction (PostgreSQL's resync) as a shareQuerier.
type pgxShare struct{ tx pgx.Tx }

func (q pgxShare) usage(ctx context.Context, machine string) (threads, size int64, err error) {
	err = q.tx.QueryRow(ctx, `SELECT thread_count, stored_bytes FROM machines WHERE name = $1`, machine).Scan(&threads, &size)
	return threads, size, err
}

func (q pgxShare) evict(ctx context.Context, machine string, keep, keepBytes int64) ([]int64, error) {
	rows, err := q.tx.Query(ctx, evictQuery, machine, keep, keepBytes)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[int64])
}
