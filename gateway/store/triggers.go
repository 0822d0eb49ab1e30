package store

import (
	"cmp"
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/uncaged/workflow/gateway/presence"
)

// Triggers start threads without a person: a webhook (POST /hooks/<id>,
// HMAC-signed with the trigger's secret) or a cron schedule starts a
// thread of a named workflow on a named machine. Each firing is a run,
// recorded here before anything is sent, so that a firing survives a
// crash and waits for a machine that is away:
//
//	queued ──ClaimRuns──▶ sending ──FinishRun──▶ started | failed
//	   ▲                     │        (or back to queued, to retry)
//	   └─── lease lapsed ────┘
//	queued or lapsed ──ExpireRuns──▶ expired (its machine stayed away)
//
// A sender claims a machine's runs under a lease (the notification
// pattern, notify.go): senders sharing the database never hold the same
// run, and the run of a sender that died is claimable again once its
// lease lapses. The gateway sends the run's id to the connector as an
// idempotency key, so a run sent again after such a crash starts its
// thread once. A delivery is recorded once per trigger: a webhook
// delivered twice, or a scheduled time that two replicas both fire (the
// server names it "schedule:" and the time), is one run, whichever
// replica writes it (AddRun).
//
// Every text a trigger or a run holds is checked against its bound and
// refused, with ErrInvalid, when it does not fit: the store never cuts a
// field it is given. Only a connector's error text (FinishRun) is cut, to
// MaxRunErrorRunes, ending with CutMark.

// TriggerKind is how a trigger fires.
type TriggerKind string

const (
	// TriggerWebhook fires on a signed POST to /hooks/<id>.
	TriggerWebhook TriggerKind = "webhook"
	// TriggerSchedule fires on a cron schedule.
	TriggerSchedule TriggerKind = "schedule"
)

// MissedPolicy is what a schedule does about runs missed while no gateway ran.
type MissedPolicy string

const (
	// MissedRunOnce fires once for all the times missed (the default).
	MissedRunOnce MissedPolicy = "run-once"
	// MissedSkip fires none of them.
	MissedSkip MissedPolicy = "skip"
)

// Trigger is one stored trigger.
type Trigger struct {
	// ID is "trg_" and 26 lowercase base32 characters; the caller makes
	// it (NewTriggerID), so a webhook's URL is known before it is stored.
	ID string
	// Kind is webhook or schedule.
	Kind TriggerKind
	// Machine is the connector whose machine runs the threads.
	Machine string
	// Workflow is the workflow a run starts (at most
	// MaxTriggerWorkflowBytes, no control characters).
	Workflow string
	// Prompt is a Go text/template over a webhook's JSON body ("" is the
	// whole body), or a schedule's prompt; at most MaxTriggerPromptBytes.
	// The server parses it; the store keeps it as given.
	Prompt string
	// Note is a free-form label, at most MaxTriggerNoteBytes.
	Note string
	// Secret is a webhook's HMAC secret: required for webhooks, empty for
	// schedules. The store keeps it; the API layer never shows it.
	Secret string
	// PreviousSecret is the secret Secret replaced (RotateTriggerSecret),
	// still accepted until PreviousUntil; "" and nil when there is none.
	PreviousSecret string
	PreviousUntil  *time.Time
	// Schedule is a schedule's cron expression, as given: the server
	// parses and validates it, the store only bounds it.
	Schedule string
	// TimeZone is a schedule's IANA time zone ("" is UTC).
	TimeZone string
	// Missed is a schedule's MissedPolicy; "" is stored as MissedRunOnce.
	// Empty for webhooks.
	Missed MissedPolicy
	// Expire is how long a queued run waits for its machine: 0 is
	// DefaultRunExpiry, otherwise from MinRunExpiry to MaxRunExpiry.
	Expire time.Duration
	// Paused triggers fire nothing, and their queued runs stay queued
	// (ClaimRuns leaves them).
	Paused bool
	// CreatedAt is when it was made; CreateTrigger fills in now if zero.
	CreatedAt time.Time
	// CreatedBy is who made it (a token's note or id), at most
	// MaxTriggerCreatedByBytes.
	CreatedBy string
	// LastFired is, for a schedule, the latest scheduled time a run was
	// recorded for (AddRun raises it); nil before the first.
	LastFired *time.Time
}

// DefaultRunExpiry is how long a queued run waits for its machine when
// its trigger says nothing.
const DefaultRunExpiry = 24 * time.Hour

// Bounds of what triggers and runs hold.
const (
	// MinRunExpiry and MaxRunExpiry bound Trigger.Expire.
	MinRunExpiry = time.Second
	MaxRunExpiry = 30 * 24 * time.Hour
	// MaxTriggerWorkflowBytes bounds a trigger's (and a run's) workflow.
	MaxTriggerWorkflowBytes = 128
	// MaxTriggerPromptBytes bounds a trigger's prompt template.
	MaxTriggerPromptBytes = 64 << 10
	// MaxTriggerNoteBytes bounds a trigger's note.
	MaxTriggerNoteBytes = 1 << 10
	// MaxTriggerSecretBytes bounds a webhook's secret.
	MaxTriggerSecretBytes = 256
	// MaxTriggerScheduleBytes bounds a cron expression.
	MaxTriggerScheduleBytes = 256
	// MaxTriggerTimeZoneBytes bounds a time zone's name.
	MaxTriggerTimeZoneBytes = 64
	// MaxTriggerCreatedByBytes bounds who made a trigger.
	MaxTriggerCreatedByBytes = 256
	// MaxRunPromptBytes bounds a run's rendered prompt.
	MaxRunPromptBytes = 256 << 10
	// MaxDeliveryIDBytes bounds a run's delivery id.
	MaxDeliveryIDBytes = 256
	// MaxRunErrorRunes is how much of a connector's error a run keeps.
	MaxRunErrorRunes = 1000
	// MaxFinishedRuns is how many finished (started, expired or failed)
	// runs a trigger keeps: AddRun deletes its oldest finished runs beyond
	// these, so a trigger that fires every minute for years does not fill
	// the database. Queued and sending runs are never deleted for it.
	MaxFinishedRuns = 1000
	// DefaultRunLimit and MaxRunLimit are ListRuns' page size when a
	// query names none, and its bound.
	DefaultRunLimit = 50
	MaxRunLimit     = 500
)

// ErrInvalid is returned (wrapped) when a trigger, a run, a sender's
// result or a query is refused as malformed; the message names the
// field. Nothing is written then.
var ErrInvalid = errors.New("invalid")

// ChangeTrigger means the triggers in IDs were created, paused, resumed
// or deleted: read them again (GetTrigger says ErrNotFound for a deleted
// one). A ChangeReload covers triggers too.
const ChangeTrigger ChangeKind = "trigger"

// ChangeRun means a run was queued for each machine in IDs: the replica
// holding the machine sends it at once rather than at its next look at
// the queue. A ChangeReload may hide one; senders still look on their own
// now and then.
const ChangeRun ChangeKind = "run"

// ChangeRunState means runs of the triggers in IDs moved: claimed by a
// sender, started, failed, given back to the queue or expired. Nothing
// of the gateway's own waits on it; it tells the dashboard's views.
const ChangeRunState ChangeKind = "run-state"

// runStateChange is the ChangeRunState of runs (nil for none).
func runStateChange(triggerIDs []string) []Change {
	if len(triggerIDs) == 0 {
		return nil
	}
	slices.Sort(triggerIDs)
	return []Change{{Kind: ChangeRunState, IDs: slices.Compact(triggerIDs)}}
}

// TriggerIDPrefix and RunIDPrefix begin trigger and run ids.
const (
	TriggerIDPrefix = "trg_"
	RunIDPrefix     = "run_"
)

// idChars is the length of an id after its prefix: 128 random bits in
// base32.
const idChars = 26

var (
	triggerIDRule = regexp.MustCompile(`^` + TriggerIDPrefix + `[0-9a-z]{` + strconv.Itoa(idChars) + `}$`)
	runIDRule     = regexp.MustCompile(`^` + RunIDPrefix + `[0-9a-z]{` + strconv.Itoa(idChars) + `}$`)
)

// NewTriggerID returns a new random trigger id: a webhook's URL holds it,
// so it must not be guessable from others or from when it was made.
func NewTriggerID() string { return TriggerIDPrefix + strings.ToLower(rand.Text()) }

// NewRunID returns a new random run id. It is also the idempotency key
// the connector sees, unique across replicas without coordination.
func NewRunID() string { return RunIDPrefix + strings.ToLower(rand.Text()) }

// Check is the validation CreateTrigger applies: every field within its
// bound and fit for its kind. Its errors wrap ErrInvalid and name the
// field.
func (t Trigger) Check() error {
	bad := func(field string, problem error) error { return invalid("trigger", field, problem) }
	if !triggerIDRule.MatchString(t.ID) {
		return bad("id", fmt.Errorf("%s is not a trigger id (%q and %d lowercase letters or digits; NewTriggerID makes one)", quoteShort(t.ID), TriggerIDPrefix, idChars))
	}
	if t.Kind != TriggerWebhook && t.Kind != TriggerSchedule {
		return bad("kind", fmt.Errorf("%s is neither %q nor %q", quoteShort(string(t.Kind)), TriggerWebhook, TriggerSchedule))
	}
	for _, f := range []struct {
		name string
		err  error
	}{
		{"machine", checkConnectorName(t.Machine)},
		{"workflow", checkLine(t.Workflow, MaxTriggerWorkflowBytes, true)},
		{"prompt", checkText(t.Prompt, MaxTriggerPromptBytes)},
		{"note", checkText(t.Note, MaxTriggerNoteBytes)},
		{"createdBy", checkLine(t.CreatedBy, MaxTriggerCreatedByBytes, false)},
		{"expire", checkExpire(t.Expire)},
	} {
		if f.err != nil {
			return bad(f.name, f.err)
		}
	}
	if t.Kind == TriggerWebhook {
		if err := checkSecret(t.Secret); err != nil {
			return bad("secret", err)
		}
		for _, f := range [][2]string{{"schedule", t.Schedule}, {"timeZone", t.TimeZone}, {"missed", string(t.Missed)}} {
			if f[1] != "" {
				return bad(f[0], errors.New("only schedule triggers have one"))
			}
		}
		return nil
	}
	if t.Secret != "" {
		return bad("secret", errors.New("only webhooks have one"))
	}
	if t.Schedule == "" {
		return bad("schedule", errors.New("empty: a schedule trigger needs a cron expression"))
	}
	if err := checkLine(t.Schedule, MaxTriggerScheduleBytes, true); err != nil {
		return bad("schedule", err)
	}
	if err := checkTimeZone(t.TimeZone); err != nil {
		return bad("timeZone", err)
	}
	switch t.Missed {
	case "", MissedRunOnce, MissedSkip:
	default:
		return bad("missed", fmt.Errorf("%s is neither %q nor %q", quoteShort(string(t.Missed)), MissedRunOnce, MissedSkip))
	}
	return nil
}

// withDefaults is t as stored: its expiry, a schedule's missed policy and
// its creation time filled in.
func (t Trigger) withDefaults(now time.Time) Trigger {
	if t.Expire == 0 {
		t.Expire = DefaultRunExpiry
	}
	if t.Kind == TriggerSchedule && t.Missed == "" {
		t.Missed = MissedRunOnce
	}
	if t.CreatedAt.IsZero() {
		t.CreatedAt = now
	}
	return t
}

// invalid is the error of a field refused: ErrInvalid, what the field
// belongs to, the field and what is wrong with it.
func invalid(what, field string, problem error) error {
	return fmt.Errorf("%w %s: %s: %v", ErrInvalid, what, field, problem)
}

// quoteShort quotes s for an error message, cut so that an over-long
// value does not make an over-long message.
func quoteShort(s string) string {
	const shown = 64
	if len(s) <= shown {
		return strconv.Quote(s)
	}
	return fmt.Sprintf("%q… (%d bytes)", truncateRunes(strings.ToValidUTF8(s, "\uFFFD"), shown), len(s))
}

// checkLine refuses a name-like value: over maxBytes, not UTF-8, holding
// a control character (a newline in a name breaks the lines it is
// printed on), or empty when required.
func checkLine(s string, maxBytes int, required bool) error {
	switch {
	case s == "" && required:
		return errors.New("empty")
	case len(s) > maxBytes:
		return fmt.Errorf("%d bytes, at most %d", len(s), maxBytes)
	case !utf8.ValidString(s):
		return errors.New("not valid UTF-8")
	}
	if i := strings.IndexFunc(s, unicode.IsControl); i >= 0 {
		r, _ := utf8.DecodeRuneInString(s[i:])
		return fmt.Errorf("a control character (%U) at byte %d", r, i)
	}
	return nil
}

// checkText refuses a text over maxBytes, or one that neither backend can
// store as it is (invalid UTF-8, NUL, which PostgreSQL refuses). Line
// breaks and tabs are text.
func checkText(s string, maxBytes int) error {
	switch {
	case len(s) > maxBytes:
		return fmt.Errorf("%d bytes, at most %d", len(s), maxBytes)
	case !utf8.ValidString(s):
		return errors.New("not valid UTF-8")
	}
	if i := strings.IndexByte(s, 0); i >= 0 {
		return fmt.Errorf("a NUL byte at byte %d", i)
	}
	return nil
}

// checkConnectorName refuses what no connector may be called: a run for
// it could never start.
func checkConnectorName(s string) error {
	switch {
	case s == "":
		return errors.New("empty")
	case !presence.ValidName(s):
		return fmt.Errorf("%s is not a connector name (1 to 63 lowercase letters, digits and hyphens, starting and ending with a letter or digit)", quoteShort(s))
	}
	return nil
}

// checkExpire refuses an expiry outside its bounds (0 is the default).
func checkExpire(d time.Duration) error {
	if d != 0 && (d < MinRunExpiry || d > MaxRunExpiry) {
		return fmt.Errorf("%v is not from %v to %v (0 is the default, %v)", d, MinRunExpiry, formatDuration(MaxRunExpiry), formatDuration(DefaultRunExpiry))
	}
	return nil
}

// checkTimeZone refuses a name that is not an IANA zone. "Local" would
// be the zone of whichever replica fires, so it is refused too.
func checkTimeZone(s string) error {
	if s == "" {
		return nil
	}
	if err := checkLine(s, MaxTriggerTimeZoneBytes, true); err != nil {
		return err
	}
	if s == "Local" {
		return errors.New(`"Local" is the server's zone, not an IANA time zone`)
	}
	if _, err := time.LoadLocation(s); err != nil {
		return fmt.Errorf("%s is not an IANA time zone: %v", quoteShort(s), err)
	}
	return nil
}

// formatDuration writes d without its zero trailing units: "24h", not
// "24h0m0s".
func formatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}

// RunState is where a run stands.
type RunState string

const (
	// RunQueued is waiting for its machine (or for a sender).
	RunQueued RunState = "queued"
	// RunSending is claimed by a sender, under a lease.
	RunSending RunState = "sending"
	// RunStarted means the connector answered with a thread (ThreadID).
	RunStarted RunState = "started"
	// RunExpired means its machine did not come back in time.
	RunExpired RunState = "expired"
	// RunFailed means the connector refused it (Error says why).
	RunFailed RunState = "failed"
)

// RunStates are every state, in the order a run goes through them.
var RunStates = []RunState{RunQueued, RunSending, RunStarted, RunExpired, RunFailed}

// finishedStates is SQL's list of the states a run ends in.
const finishedStates = `('started', 'expired', 'failed')`

// TriggerRun is one firing of a trigger.
type TriggerRun struct {
	// ID is "run_" and 26 lowercase base32 characters; AddRun makes one
	// if empty.
	ID string
	// TriggerID is the trigger that fired.
	TriggerID string
	// Machine and Workflow are copied from the trigger when the run is
	// added (AddRun), unless given.
	Machine  string
	Workflow string
	// Prompt is the rendered prompt, at most MaxRunPromptBytes.
	Prompt string
	// DeliveryID is a webhook sender's delivery id, or "schedule:" and
	// the scheduled time; "" for none. A trigger records each once.
	DeliveryID string
	// ScheduledFor is, for a schedule, the cron time this run is for.
	ScheduledFor *time.Time
	// State is where it stands.
	State RunState
	// ThreadID is the thread it started (RunStarted).
	ThreadID string
	// Error is why it failed or expired, or why its last attempt did not
	// start it.
	Error string
	// Attempts counts the claims, each one a send begun.
	Attempts int
	// CreatedAt is when it fired; ExpiresAt when it stops waiting for its
	// machine (CreatedAt and the trigger's Expire); UpdatedAt when its
	// state last changed.
	CreatedAt time.Time
	ExpiresAt time.Time
	UpdatedAt time.Time
}

// RunResult is a sender's outcome for a claimed run.
type RunResult struct {
	// ID is the run, Owner the claim it was sent under.
	ID, Owner string
	// State is RunStarted (ThreadID set), RunFailed (Error set), or
	// RunQueued to try again later (Error may say why).
	State RunState
	// ThreadID is the thread the connector started.
	ThreadID string
	// Error is why it failed; the store keeps MaxRunErrorRunes of it.
	Error string
}

// RunQuery selects runs for ListRuns; zero fields do not filter.
type RunQuery struct {
	// TriggerID and Machine keep only this trigger's, this machine's runs.
	TriggerID, Machine string
	// State keeps only runs in this state.
	State RunState
	// Limit is the page size: DefaultRunLimit if zero, at most
	// MaxRunLimit. Offset skips that many runs.
	Limit, Offset int
}

// RunPage is one page of runs, newest first.
type RunPage struct {
	// Runs is the page.
	Runs []TriggerRun
	// Total is how many runs match, over all pages.
	Total int
}

// RunCounts is the queue's depth for metrics: runs by state, every state
// present (0 when none).
type RunCounts map[RunState]int

// Triggers keeps triggers and their runs (triggers.go).
type Triggers interface {
	// CreateTrigger records t (Check first; ErrExists if the id is taken).
	// Expire 0, a schedule's Missed "" and a zero CreatedAt are stored as
	// their defaults.
	CreateTrigger(ctx context.Context, t Trigger) error
	// GetTrigger returns one trigger (ErrNotFound).
	GetTrigger(ctx context.Context, id string) (Trigger, error)
	// ListTriggers returns every trigger, oldest first.
	ListTriggers(ctx context.Context) ([]Trigger, error)
	// DeleteTrigger removes a trigger and its runs (ErrNotFound).
	DeleteTrigger(ctx context.Context, id string) error
	// SetTriggerPaused pauses or resumes a trigger and returns it
	// (ErrNotFound). A paused trigger's queued runs stay queued.
	SetTriggerPaused(ctx context.Context, id string, paused bool) (Trigger, error)
	// RotateTriggerSecret gives a webhook a new secret and returns it
	// (ErrNotFound; ErrInvalid for a schedule or a secret Check refuses).
	// The secret it had stays accepted until previousUntil, nil ending it
	// at once; one before that is forgotten.
	RotateTriggerSecret(ctx context.Context, id, secret string, previousUntil *time.Time) (Trigger, error)
	// AddRun records a new run of r.TriggerID in state queued (ID,
	// Machine, Workflow, CreatedAt, ExpiresAt filled from the trigger when
	// empty/zero; State, ThreadID, Error, Attempts and UpdatedAt are the
	// store's).
	// When the trigger already has a run with the same non-empty
	// DeliveryID, nothing is added and that run is returned with
	// added=false: a delivery repeated, or a scheduled time two replicas
	// both fire (the server sets DeliveryID "schedule:"+RFC3339 UTC
	// time), starts once.
	// With ScheduledFor set, the trigger's LastFired is raised to it in
	// the same transaction (never lowered).
	// A trigger keeps its newest MaxFinishedRuns finished runs: AddRun
	// deletes the older ones, in the same transaction.
	// ErrNotFound when the trigger does not exist; ErrExists when a given
	// ID is taken; ErrInvalid for a field out of its bounds.
	AddRun(ctx context.Context, r TriggerRun) (run TriggerRun, added bool, err error)
	// ClaimRuns takes up to limit queued runs of machine, oldest first (in
	// order of CreatedAt, then ID), that are not expired and not held by
	// another owner's unexpired lease (a lapsed "sending" run is claimable
	// again), for owner until lease from now, counting an attempt on
	// each, and sets them sending. Runs of paused triggers are not
	// claimed. Two owners never hold the same run.
	ClaimRuns(ctx context.Context, machine, owner string, lease time.Duration, limit int) ([]TriggerRun, error)
	// FinishRun records a claimed run's outcome. ErrNotFound when the run
	// is not owner's claim any more.
	FinishRun(ctx context.Context, r RunResult) error
	// ExpireRuns marks every queued (or lapsed sending) run whose
	// ExpiresAt is ≤ now expired, with Error "expired: machine X was
	// offline for D" ("expired: trigger paused: not started within D"
	// when its trigger is paused), and returns how many.
	ExpireRuns(ctx context.Context, now time.Time) (int, error)
	// GetRun returns one run (ErrNotFound).
	GetRun(ctx context.Context, id string) (TriggerRun, error)
	// ListRuns returns matching runs, newest first, and how many match.
	ListRuns(ctx context.Context, q RunQuery) (RunPage, error)
	// QueuedMachines names every machine with a queued (or lapsed
	// sending) unexpired run of an unpaused trigger, sorted.
	QueuedMachines(ctx context.Context) ([]string, error)
	// CountRuns is the number of runs by state, for metrics.
	CountRuns(ctx context.Context) (RunCounts, error)
}

const triggerCols = "id, kind, machine, workflow, prompt, note, secret, schedule, time_zone, missed, expire_ns, paused, created_at, created_by, last_fired, previous_secret, previous_until"

func scanTrigger(row scanner) (Trigger, error) {
	var t Trigger
	var kind, missed string
	var expire int64
	err := row.Scan(&t.ID, &kind, &t.Machine, &t.Workflow, &t.Prompt, &t.Note, &t.Secret, &t.Schedule, &t.TimeZone, &missed,
		&expire, &t.Paused, timeDest{&t.CreatedAt}, &t.CreatedBy, nullTimeDest{&t.LastFired}, &t.PreviousSecret, nullTimeDest{&t.PreviousUntil})
	t.Kind, t.Missed, t.Expire = TriggerKind(kind), MissedPolicy(missed), time.Duration(expire)
	return t, err
}

const runCols = "id, trigger_id, machine, workflow, prompt, delivery_id, scheduled_for, state, thread_id, error, attempts, created_at, expires_at, updated_at"

func scanRun(row scanner) (TriggerRun, error) {
	var r TriggerRun
	var state string
	err := row.Scan(&r.ID, &r.TriggerID, &r.Machine, &r.Workflow, &r.Prompt, &r.DeliveryID, nullTimeDest{&r.ScheduledFor}, &state,
		&r.ThreadID, &r.Error, &r.Attempts, timeDest{&r.CreatedAt}, timeDest{&r.ExpiresAt}, timeDest{&r.UpdatedAt})
	r.State = RunState(state)
	return r, err
}

// waitingRun is the condition on alias's run that it waits for a sender
// at the time in param: queued, or sending under a lease that lapsed.
func waitingRun(alias, param string) string {
	return "(" + alias + ".state = 'queued' OR (" + alias + ".state = 'sending' AND " + alias + ".lease_until <= " + param + "))"
}

// lockRows is what a PostgreSQL SELECT ends with to lock the rows it
// reads (clause "FOR UPDATE", with what to lock and how); SQLite has no
// row locks, and its one writer at a time needs none.
func (s *sqlStore) lockRows(clause string) string {
	if s.backend == BackendPostgres {
		return " " + clause
	}
	return ""
}

// CreateTrigger implements Triggers.
func (s *sqlStore) CreateTrigger(ctx context.Context, t Trigger) error {
	if err := t.Check(); err != nil {
		return fmt.Errorf("store: create trigger: %w", err)
	}
	t = t.withDefaults(s.now())
	return s.write(ctx, "create trigger "+t.ID, func(tx *sql.Tx) ([]Change, error) {
		res, err := tx.ExecContext(ctx, s.q(`INSERT INTO triggers (`+triggerCols+`)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, '', NULL) ON CONFLICT (id) DO NOTHING`),
			t.ID, string(t.Kind), t.Machine, t.Workflow, t.Prompt, t.Note, t.Secret, t.Schedule, t.TimeZone, string(t.Missed),
			int64(t.Expire), t.Paused, s.tv(t.CreatedAt), t.CreatedBy, s.tvp(t.LastFired))
		if err != nil {
			return nil, err
		}
		if n, err := res.RowsAffected(); err != nil {
			return nil, err
		} else if n == 0 {
			return nil, ErrExists
		}
		return []Change{{Kind: ChangeTrigger, IDs: []string{t.ID}}}, nil
	})
}

// GetTrigger implements Triggers.
func (s *sqlStore) GetTrigger(ctx context.Context, id string) (Trigger, error) {
	t, err := scanTrigger(s.r.QueryRowContext(ctx, s.q(`SELECT `+triggerCols+` FROM triggers WHERE id = $1`), id))
	if errors.Is(err, sql.ErrNoRows) {
		return Trigger{}, fmt.Errorf("store: trigger %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return Trigger{}, fmt.Errorf("store: trigger %s: %w", id, err)
	}
	return t, nil
}

// ListTriggers implements Triggers.
func (s *sqlStore) ListTriggers(ctx context.Context) ([]Trigger, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT `+triggerCols+` FROM triggers ORDER BY created_at, id`)
	if err != nil {
		return nil, fmt.Errorf("store: list triggers: %w", err)
	}
	out, err := scanAll(rows, scanTrigger)
	if err != nil {
		return nil, fmt.Errorf("store: list triggers: %w", err)
	}
	return out, nil
}

// DeleteTrigger implements Triggers.
func (s *sqlStore) DeleteTrigger(ctx context.Context, id string) error {
	return s.write(ctx, "delete trigger "+id, func(tx *sql.Tx) ([]Change, error) {
		// The trigger's row first, as AddRun takes it: a run being added
		// meanwhile is added before, and deleted with the others, or not
		// at all.
		var found string
		err := tx.QueryRowContext(ctx, s.q(`SELECT id FROM triggers WHERE id = $1`+s.lockRows("FOR UPDATE")), id).Scan(&found)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, ErrNotFound
		}
		if err != nil {
			return nil, err
		}
		if _, err := tx.ExecContext(ctx, s.q(`DELETE FROM trigger_runs WHERE trigger_id = $1`), id); err != nil {
			return nil, err
		}
		if _, err := tx.ExecContext(ctx, s.q(`DELETE FROM triggers WHERE id = $1`), id); err != nil {
			return nil, err
		}
		return []Change{{Kind: ChangeTrigger, IDs: []string{id}}}, nil
	})
}

// SetTriggerPaused implements Triggers.
func (s *sqlStore) SetTriggerPaused(ctx context.Context, id string, paused bool) (Trigger, error) {
	var out Trigger
	what := "resume trigger " + id
	if paused {
		what = "pause trigger " + id
	}
	err := s.write(ctx, what, func(tx *sql.Tx) ([]Change, error) {
		t, err := scanTrigger(tx.QueryRowContext(ctx, s.q(`UPDATE triggers SET paused = $1 WHERE id = $2 RETURNING `+triggerCols), paused, id))
		if errors.Is(err, sql.ErrNoRows) {
			return nil, ErrNotFound
		}
		if err != nil {
			return nil, err
		}
		out = t
		return []Change{{Kind: ChangeTrigger, IDs: []string{id}}}, nil
	})
	if err != nil {
		return Trigger{}, err
	}
	return out, nil
}

// checkSecret refuses a webhook secret the store does not keep.
func checkSecret(secret string) error {
	if secret == "" {
		return errors.New("empty: a webhook needs the secret its deliveries are signed with")
	}
	return checkLine(secret, MaxTriggerSecretBytes, true)
}

// RotateTriggerSecret implements Triggers.
func (s *sqlStore) RotateTriggerSecret(ctx context.Context, id, secret string, previousUntil *time.Time) (Trigger, error) {
	if err := checkSecret(secret); err != nil {
		return Trigger{}, fmt.Errorf("store: rotate trigger secret: %w", invalid("trigger", "secret", err))
	}
	var out Trigger
	err := s.write(ctx, "rotate the secret of trigger "+id, func(tx *sql.Tx) ([]Change, error) {
		t, err := scanTrigger(tx.QueryRowContext(ctx, s.q(`SELECT `+triggerCols+` FROM triggers WHERE id = $1`+s.lockRows("FOR UPDATE")), id))
		if errors.Is(err, sql.ErrNoRows) {
			return nil, ErrNotFound
		}
		if err != nil {
			return nil, err
		}
		if t.Kind != TriggerWebhook {
			return nil, invalid("trigger", "secret", errors.New("only webhooks have one"))
		}
		previous := t.Secret
		if previousUntil == nil {
			previous = ""
		}
		out, err = scanTrigger(tx.QueryRowContext(ctx, s.q(`UPDATE triggers SET secret = $1, previous_secret = $2, previous_until = $3 WHERE id = $4 RETURNING `+triggerCols),
			secret, previous, s.tvp(previousUntil), id))
		if err != nil {
			return nil, err
		}
		return []Change{{Kind: ChangeTrigger, IDs: []string{id}}}, nil
	})
	if err != nil {
		return Trigger{}, err
	}
	return out, nil
}

// check refuses a run AddRun cannot record as given.
func (r TriggerRun) check() error {
	bad := func(field string, problem error) error { return invalid("run", field, problem) }
	if r.TriggerID == "" {
		return bad("triggerId", errors.New("empty"))
	}
	if r.ID != "" && !runIDRule.MatchString(r.ID) {
		return bad("id", fmt.Errorf("%s is not a run id (%q and %d lowercase letters or digits; NewRunID makes one)", quoteShort(r.ID), RunIDPrefix, idChars))
	}
	if r.Machine != "" {
		if err := checkConnectorName(r.Machine); err != nil {
			return bad("machine", err)
		}
	}
	for _, f := range []struct {
		name string
		err  error
	}{
		{"workflow", checkLine(r.Workflow, MaxTriggerWorkflowBytes, false)},
		{"prompt", checkText(r.Prompt, MaxRunPromptBytes)},
		{"deliveryId", checkLine(r.DeliveryID, MaxDeliveryIDBytes, false)},
	} {
		if f.err != nil {
			return bad(f.name, f.err)
		}
	}
	if r.State != "" && r.State != RunQueued {
		return bad("state", fmt.Errorf("%s: a new run is %s", quoteShort(string(r.State)), RunQueued))
	}
	return nil
}

// runByDelivery reads the trigger's run of a delivery (sql.ErrNoRows
// when there is none).
func (s *sqlStore) runByDelivery(ctx context.Context, tx *sql.Tx, triggerID, delivery string) (TriggerRun, error) {
	return scanRun(tx.QueryRowContext(ctx, s.q(`SELECT `+runCols+` FROM trigger_runs WHERE trigger_id = $1 AND delivery_id = $2`), triggerID, delivery))
}

// AddRun implements Triggers.
func (s *sqlStore) AddRun(ctx context.Context, r TriggerRun) (TriggerRun, bool, error) {
	if err := r.check(); err != nil {
		return TriggerRun{}, false, fmt.Errorf("store: add run of trigger %s: %w", r.TriggerID, err)
	}
	now := s.now()
	if r.ID == "" {
		r.ID = NewRunID()
	}
	if r.CreatedAt.IsZero() {
		r.CreatedAt = now
	}
	if !r.ExpiresAt.IsZero() && !utc(r.ExpiresAt).After(utc(r.CreatedAt)) {
		return TriggerRun{}, false, fmt.Errorf("store: add run of trigger %s: %w", r.TriggerID,
			invalid("run", "expiresAt", fmt.Errorf("%v is not after its creation, %v", r.ExpiresAt, r.CreatedAt)))
	}
	var out TriggerRun
	added := false
	err := s.write(ctx, "add run of trigger "+r.TriggerID, func(tx *sql.Tx) ([]Change, error) {
		// The trigger's row lock makes one replica at a time add its runs:
		// the delivery looked for below cannot be added meanwhile.
		t, err := scanTrigger(tx.QueryRowContext(ctx, s.q(`SELECT `+triggerCols+` FROM triggers WHERE id = $1`+s.lockRows("FOR UPDATE")), r.TriggerID))
		if errors.Is(err, sql.ErrNoRows) {
			return nil, ErrNotFound
		}
		if err != nil {
			return nil, err
		}
		if r.Machine == "" {
			r.Machine = t.Machine
		}
		if r.Workflow == "" {
			r.Workflow = t.Workflow
		}
		if r.ExpiresAt.IsZero() {
			r.ExpiresAt = r.CreatedAt.Add(t.Expire)
		}
		if r.DeliveryID != "" {
			prev, err := s.runByDelivery(ctx, tx, r.TriggerID, r.DeliveryID)
			if err == nil {
				out = prev
				return nil, nil
			}
			if !errors.Is(err, sql.ErrNoRows) {
				return nil, err
			}
		}
		out, err = scanRun(tx.QueryRowContext(ctx, s.q(`INSERT INTO trigger_runs (`+runCols+`)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14) ON CONFLICT DO NOTHING RETURNING `+runCols),
			r.ID, r.TriggerID, r.Machine, r.Workflow, r.Prompt, r.DeliveryID, s.tvp(r.ScheduledFor), string(RunQueued), "", "", 0,
			s.tv(r.CreatedAt), s.tv(r.ExpiresAt), s.tv(now)))
		if errors.Is(err, sql.ErrNoRows) {
			// The delivery is not there (looked for under the lock): the
			// id is taken.
			return nil, fmt.Errorf("run %s: %w", r.ID, ErrExists)
		}
		if err != nil {
			return nil, err
		}
		added = true
		if r.ScheduledFor != nil {
			if _, err := tx.ExecContext(ctx, s.q(`UPDATE triggers SET last_fired = $1 WHERE id = $2 AND (last_fired IS NULL OR last_fired < $1)`),
				s.tv(*r.ScheduledFor), r.TriggerID); err != nil {
				return nil, err
			}
		}
		_, err = tx.ExecContext(ctx, s.q(`DELETE FROM trigger_runs WHERE trigger_id = $1 AND state IN `+finishedStates+` AND id NOT IN (
SELECT id FROM trigger_runs WHERE trigger_id = $1 AND state IN `+finishedStates+` ORDER BY created_at DESC, id DESC LIMIT $2)`),
			r.TriggerID, MaxFinishedRuns)
		if err != nil {
			return nil, err
		}
		return []Change{{Kind: ChangeRun, IDs: []string{out.Machine}}}, nil
	})
	if err != nil {
		return TriggerRun{}, false, err
	}
	return out, added, nil
}

// ClaimRuns implements Triggers.
func (s *sqlStore) ClaimRuns(ctx context.Context, machine, owner string, lease time.Duration, limit int) ([]TriggerRun, error) {
	if machine == "" || owner == "" || lease <= 0 || limit <= 0 {
		return nil, fmt.Errorf("store: claim runs: %w claim: a machine, an owner, a lease and a limit are needed", ErrInvalid)
	}
	now := s.now()
	var out []TriggerRun
	err := s.write(ctx, "claim runs of "+machine, func(tx *sql.Tx) ([]Change, error) {
		// SKIP LOCKED: a replica claiming meanwhile takes other rows rather
		// than wait; a row it meets after this claim commits is read again,
		// leased, and left.
		rows, err := tx.QueryContext(ctx, s.q(`UPDATE trigger_runs SET state = 'sending', lease_owner = $1, lease_until = $2,
attempts = attempts + 1, updated_at = $3 WHERE id IN (
SELECT r.id FROM trigger_runs r JOIN triggers t ON t.id = r.trigger_id
WHERE r.machine = $4 AND `+waitingRun("r", "$3")+` AND r.expires_at > $3 AND NOT t.paused
ORDER BY r.created_at, r.id LIMIT $5`+s.lockRows("FOR UPDATE OF r SKIP LOCKED")+`) RETURNING `+runCols),
			owner, s.tv(now.Add(lease)), s.tv(now), machine, limit)
		if err != nil {
			return nil, err
		}
		if out, err = scanAll(rows, scanRun); err != nil {
			return nil, err
		}
		ids := make([]string, len(out))
		for i, r := range out {
			ids[i] = r.TriggerID
		}
		return runStateChange(ids), nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b TriggerRun) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
	return out, nil
}

// check refuses a result FinishRun cannot record.
func (r RunResult) check() error {
	bad := func(field string, problem error) error { return invalid("run result", field, problem) }
	switch {
	case r.ID == "":
		return bad("id", errors.New("empty"))
	case r.Owner == "":
		return bad("owner", errors.New("empty"))
	}
	switch r.State {
	case RunStarted:
		if err := checkLine(r.ThreadID, MaxThreadIDBytes, true); err != nil {
			return bad("threadId", err)
		}
		return nil
	case RunFailed:
		if strings.TrimSpace(r.Error) == "" {
			return bad("error", errors.New("empty: a failed run says why"))
		}
	case RunQueued:
	default:
		return bad("state", fmt.Errorf("%s is none of %q, %q and %q", quoteShort(string(r.State)), RunStarted, RunFailed, RunQueued))
	}
	if r.ThreadID != "" {
		return bad("threadId", errors.New("only a started run has one"))
	}
	return nil
}

// FinishRun implements Triggers.
func (s *sqlStore) FinishRun(ctx context.Context, r RunResult) error {
	if err := r.check(); err != nil {
		return fmt.Errorf("store: finish run %s: %w", r.ID, err)
	}
	msg := cleanText(r.Error)
	if utf8.RuneCountInString(msg) > MaxRunErrorRunes {
		msg = truncateRunes(msg, MaxRunErrorRunes-1) + CutMark
	}
	return s.write(ctx, "finish run "+r.ID, func(tx *sql.Tx) ([]Change, error) {
		var trigger string
		err := tx.QueryRowContext(ctx, s.q(`UPDATE trigger_runs SET state = $1, thread_id = $2, error = $3, updated_at = $4,
lease_owner = '', lease_until = NULL WHERE id = $5 AND lease_owner = $6 AND state = 'sending' RETURNING trigger_id`),
			string(r.State), r.ThreadID, msg, s.tv(s.now()), r.ID, r.Owner).Scan(&trigger)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, fmt.Errorf("not claimed by %s: %w", r.Owner, ErrNotFound)
		}
		if err != nil {
			return nil, err
		}
		return runStateChange([]string{trigger}), nil
	})
}

// expireChunk bounds the runs of one ExpireRuns statement, as touchChunk
// does the machines of TouchMachines.
const expireChunk = 500

// ExpireRuns implements Triggers.
func (s *sqlStore) ExpireRuns(ctx context.Context, now time.Time) (int, error) {
	expired := 0
	err := s.write(ctx, "expire runs", func(tx *sql.Tx) ([]Change, error) {
		rows, err := tx.QueryContext(ctx, s.q(`SELECT r.id, r.trigger_id, r.machine, r.created_at, r.expires_at, t.paused
FROM trigger_runs r JOIN triggers t ON t.id = r.trigger_id WHERE r.expires_at <= $1 AND `+waitingRun("r", "$1")+
			s.lockRows("FOR UPDATE OF r SKIP LOCKED")), s.tv(now))
		if err != nil {
			return nil, err
		}
		// Runs are grouped by their message, so that a backlog expiring
		// at once costs a statement per few hundred runs.
		byMessage := map[string][]string{}
		type due struct {
			id, trigger, msg string
		}
		list, err := scanAll(rows, func(row scanner) (due, error) {
			var id, trigger, machine string
			var created, expires time.Time
			var paused bool
			if err := row.Scan(&id, &trigger, &machine, timeDest{&created}, timeDest{&expires}, &paused); err != nil {
				return due{}, err
			}
			waited := formatDuration(expires.Sub(created))
			if paused {
				return due{id, trigger, "expired: trigger paused: not started within " + waited}, nil
			}
			return due{id, trigger, "expired: machine " + machine + " was offline for " + waited}, nil
		})
		if err != nil {
			return nil, err
		}
		var triggers []string
		for _, d := range list {
			byMessage[d.msg] = append(byMessage[d.msg], d.id)
			triggers = append(triggers, d.trigger)
		}
		for _, msg := range slices.Sorted(maps.Keys(byMessage)) {
			for chunk := range slices.Chunk(byMessage[msg], expireChunk) {
				args := []any{msg, s.tv(now)}
				marks := make([]string, len(chunk))
				for i, id := range chunk {
					args = append(args, id)
					marks[i] = "$" + strconv.Itoa(i+3)
				}
				res, err := tx.ExecContext(ctx, s.q(`UPDATE trigger_runs SET state = 'expired', error = $1, updated_at = $2,
lease_owner = '', lease_until = NULL WHERE state IN ('queued', 'sending') AND id IN (`+strings.Join(marks, ", ")+`)`), args...)
				if err != nil {
					return nil, err
				}
				n, err := res.RowsAffected()
				if err != nil {
					return nil, err
				}
				expired += int(n)
			}
		}
		return runStateChange(triggers), nil
	})
	if err != nil {
		return 0, err
	}
	return expired, nil
}

// GetRun implements Triggers.
func (s *sqlStore) GetRun(ctx context.Context, id string) (TriggerRun, error) {
	r, err := scanRun(s.r.QueryRowContext(ctx, s.q(`SELECT `+runCols+` FROM trigger_runs WHERE id = $1`), id))
	if errors.Is(err, sql.ErrNoRows) {
		return TriggerRun{}, fmt.Errorf("store: run %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return TriggerRun{}, fmt.Errorf("store: run %s: %w", id, err)
	}
	return r, nil
}

// ListRuns implements Triggers.
func (s *sqlStore) ListRuns(ctx context.Context, q RunQuery) (RunPage, error) {
	var w conditions
	if q.TriggerID != "" {
		w.add("trigger_id = ?", q.TriggerID)
	}
	if q.Machine != "" {
		w.add("machine = ?", q.Machine)
	}
	if q.State != "" {
		if !slices.Contains(RunStates, q.State) {
			return RunPage{}, fmt.Errorf("store: list runs: %w", invalid("run query", "state", fmt.Errorf("%s is not a run state", quoteShort(string(q.State)))))
		}
		w.add("state = ?", string(q.State))
	}
	limit := q.Limit
	if limit <= 0 {
		limit = DefaultRunLimit
	}
	limit, offset := min(limit, MaxRunLimit), max(q.Offset, 0)
	var page RunPage
	err := s.read(ctx, func(tx *sql.Tx) error {
		cond := w.clause()
		if err := tx.QueryRowContext(ctx, s.q(`SELECT count(*) FROM trigger_runs`+cond), w.args...).Scan(&page.Total); err != nil {
			return err
		}
		n := len(w.args)
		rows, err := tx.QueryContext(ctx, s.q(fmt.Sprintf(`SELECT %s FROM trigger_runs%s ORDER BY created_at DESC, id DESC LIMIT $%d OFFSET $%d`,
			runCols, cond, n+1, n+2)), append(w.args, limit, offset)...)
		if err != nil {
			return err
		}
		page.Runs, err = scanAll(rows, scanRun)
		return err
	})
	if err != nil {
		return RunPage{}, fmt.Errorf("store: list runs: %w", err)
	}
	return page, nil
}

// QueuedMachines implements Triggers.
func (s *sqlStore) QueuedMachines(ctx context.Context) ([]string, error) {
	rows, err := s.r.QueryContext(ctx, s.q(`SELECT DISTINCT r.machine FROM trigger_runs r JOIN triggers t ON t.id = r.trigger_id
WHERE `+waitingRun("r", "$1")+` AND r.expires_at > $1 AND NOT t.paused ORDER BY r.machine`), s.tv(s.now()))
	if err != nil {
		return nil, fmt.Errorf("store: queued machines: %w", err)
	}
	out, err := scanAll(rows, func(row scanner) (string, error) {
		var name string
		err := row.Scan(&name)
		return name, err
	})
	if err != nil {
		return nil, fmt.Errorf("store: queued machines: %w", err)
	}
	return out, nil
}

// CountRuns implements Triggers.
func (s *sqlStore) CountRuns(ctx context.Context) (RunCounts, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT state, count(*) FROM trigger_runs GROUP BY state`)
	if err != nil {
		return nil, fmt.Errorf("store: count runs: %w", err)
	}
	type count struct {
		state string
		n     int
	}
	list, err := scanAll(rows, func(row scanner) (count, error) {
		var c count
		err := row.Scan(&c.state, &c.n)
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("store: count runs: %w", err)
	}
	out := RunCounts{}
	for _, st := range RunStates {
		out[st] = 0
	}
	for _, c := range list {
		out[RunState(c.state)] = c.n
	}
	return out, nil
}
