// Package fleet is the wire format of the fleet's memory: how a connector
// tells the gateway about its threads, so the gateway can remember them
// after the machine goes offline.
//
// The connector serves GET /api/events (EventsPath) as server-sent events,
// a resumable change stream of thread summaries ([Thread]):
//
//	event: reset    id: <instance>-0     data: {"instance":"<instance>"}
//	event: thread   id: <instance>-<seq> data: Thread
//	...
//	event: synced   id: <instance>-<seq> data: {}
//	event: thread   id: <instance>-<seq> data: Thread   (live, as threads change)
//	: ping                                               (a comment, now and then)
//
// Every event id is "<instance>-<seq>" (FormatEventID): instance is random
// for each start of the connector process, seq counts the connector's
// changes. A reader that reconnects sends the last id it saw as
// Last-Event-ID. When the connector can resume from it (same instance, a
// seq it has given out), it sends only the threads that changed since, then
// synced; otherwise (no id, another instance — the connector restarted —
// or an id it does not know) it sends reset, every thread it has, then
// synced. After synced come live changes. A thread's event carries its
// whole summary, so a reader keeps the last one per thread id; a thread
// that changed several times while the reader was away is sent once.
// Threads removed from the machine are not announced: the gateway's memory
// outlives a connector's own history.
package fleet

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// EventsPath is the connector API's change stream.
const EventsPath = "/api/events"

// Event names of the change stream.
const (
	// EventReset starts a full snapshot: what the reader kept from this
	// connector may be stale, every thread follows.
	EventReset = "reset"
	// EventThread carries one thread's current summary (a Thread).
	EventThread = "thread"
	// EventSynced says the reader has caught up: every thread the
	// connector knew when the stream (re)started has been sent.
	EventSynced = "synced"
)

// PromptMaxRunes is how much of a prompt a Thread carries: enough to
// recognise and search a thread without copying whole documents.
const PromptMaxRunes = 500

// Thread is one thread's summary as the connector reports it.
type Thread struct {
	// ID is the thread's id on its machine.
	ID string `json:"id"`
	// Workflow is the workflow's registered name (else the name its start
	// node records).
	Workflow string `json:"workflow"`
	// Status is running, waiting (for a person's answer), pausing, paused,
	// completed, failed, killed, interrupted or damaged (its head or start
	// cannot back a status).
	Status string `json:"status"`
	// Prompt is the thread's prompt, cut to PromptMaxRunes runes (the last
	// CutMark when cut).
	Prompt string `json:"prompt"`
	// StartedAt is when the thread started.
	StartedAt time.Time `json:"startedAt"`
	// UpdatedAt is its last activity (its end once finished).
	UpdatedAt time.Time `json:"updatedAt"`
	// DurationMs is UpdatedAt minus StartedAt: how long it ran, so far.
	DurationMs int64 `json:"durationMs"`
	// Steps counts its role steps.
	Steps int `json:"steps"`
	// ReturnCode is its exit status once ended, else null.
	ReturnCode *int `json:"returnCode"`
	// Summary is the workflow's summary of its outcome, once ended.
	Summary string `json:"summary"`
	// Usage is the LLM usage as a JSON object when the connector records
	// it; absent otherwise.
	Usage json.RawMessage `json:"usage,omitempty"`
	// Tokens is how many LLM tokens (prompt and completion) the thread
	// used so far; absent (0) when the connector does not know.
	Tokens int64 `json:"tokens,omitempty"`
	// Cost is what those tokens cost, in US dollars; absent (0) when
	// unknown.
	Cost float64 `json:"cost,omitempty"`
	// Waiting is what the thread waits for while its status is waiting;
	// nil otherwise (and from a connector that predates waiting).
	Waiting *Waiting `json:"waiting,omitempty"`
}

// QuestionMaxRunes is how much of a question a Waiting carries: enough
// for an inbox line and a notification, not a whole document.
const QuestionMaxRunes = 2000

// Waiting is the question a waiting thread asks a person.
type Waiting struct {
	// Role is the role a person plays.
	Role string `json:"role"`
	// Question is the role's prompt, cut to QuestionMaxRunes runes (the
	// last CutMark when cut).
	Question string `json:"question"`
	// Assignee is who is asked; "" when anyone may answer.
	Assignee string `json:"assignee"`
	// Since is when the thread began to wait.
	Since time.Time `json:"since"`
	// Deadline is when the wait times out; nil when it never does.
	Deadline *time.Time `json:"deadline,omitempty"`
}

// Reset is the data of a reset event.
type Reset struct {
	// Instance is the connector process's instance, as in the event ids.
	Instance string `json:"instance"`
}

// CutMark ends a prompt TruncatePrompt cut, so that a reader sees there
// was more (the gateway's store marks what it cuts the same way).
const CutMark = "…"

// TruncatePrompt cuts s to PromptMaxRunes runes, never inside a rune, the
// last of them CutMark when it cut.
func TruncatePrompt(s string) string { return Truncate(s, PromptMaxRunes) }

// Truncate cuts s to limit runes, never inside a rune, the last of them
// CutMark when it cut.
func Truncate(s string, limit int) string {
	if utf8.RuneCountInString(s) <= limit {
		return s
	}
	n := 0
	for i := range s {
		if n == limit-1 {
			return s[:i] + CutMark
		}
		n++
	}
	return s
}

// NewInstance returns a random instance name (16 hex digits; never holds
// '-', so an event id splits unambiguously).
func NewInstance() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b[:])
}

// FormatEventID is the id of the event after the seq-th change of instance.
func FormatEventID(instance string, seq uint64) string {
	return instance + "-" + strconv.FormatUint(seq, 10)
}

// ErrBadEventID is returned (wrapped) by ParseEventID.
var ErrBadEventID = errors.New("not a fleet event id")

// MaxEventIDBytes bounds an event id: FormatEventID's are at most 37
// bytes. A reader keeps the last id it saw and sends it back, so a longer
// one is refused rather than kept.
const MaxEventIDBytes = 64

// ParseEventID splits an id made by FormatEventID.
func ParseEventID(id string) (instance string, seq uint64, err error) {
	if len(id) > MaxEventIDBytes {
		return "", 0, fmt.Errorf("%w: %d bytes, more than %d", ErrBadEventID, len(id), MaxEventIDBytes)
	}
	i := strings.IndexByte(id, '-')
	if i <= 0 {
		return "", 0, fmt.Errorf("%w: %q: want <instance>-<seq>", ErrBadEventID, id)
	}
	seq, err = strconv.ParseUint(id[i+1:], 10, 64)
	if err != nil {
		return "", 0, fmt.Errorf("%w: %q: want <instance>-<seq>", ErrBadEventID, id)
	}
	return id[:i], seq, nil
}

// Event is one server-sent event of the stream.
type Event struct {
	// ID is the event id ("" for none).
	ID string
	// Name is the event's type (EventReset, EventThread, EventSynced).
	Name string
	// Data is the event's data, a JSON document.
	Data []byte
}

// AppendEvent appends ev in the text/event-stream format to buf. Data must
// be one line (compact JSON is).
func AppendEvent(buf []byte, ev Event) []byte {
	if ev.ID != "" {
		buf = append(buf, "id: "...)
		buf = append(buf, ev.ID...)
		buf = append(buf, '\n')
	}
	buf = append(buf, "event: "...)
	buf = append(buf, ev.Name...)
	buf = append(buf, "\ndata: "...)
	buf = append(buf, ev.Data...)
	return append(buf, '\n', '\n')
}

// Ping is the comment a stream sends while idle, so proxies and readers
// see it is alive.
const Ping = ": ping\n\n"

// MaxEventSize bounds one event a Decoder accepts: a summary is small, and
// a stream sending more is broken.
const MaxEventSize = 1 << 20

// Decoder reads events from a text/event-stream body, skipping comments.
type Decoder struct {
	sc *bufio.Scanner
}

// NewDecoder reads events from r.
func NewDecoder(r io.Reader) *Decoder {
	sc := bufio.NewScanner(r)
	// Small at first: a gateway holds a decoder per connector, most of
	// them idle, and the buffer grows (to MaxEventSize) only for long lines.
	sc.Buffer(make([]byte, 0, 4<<10), MaxEventSize)
	return &Decoder{sc: sc}
}

// Next returns the next event; io.EOF at the end of the stream (an event
// cut short by it is dropped, as a browser does).
func (d *Decoder) Next() (Event, error) {
	var ev Event
	seen := false
	for d.sc.Scan() {
		line := d.sc.Bytes()
		switch {
		case len(line) == 0:
			if seen {
				return ev, nil
			}
		case line[0] == ':':
		default:
			k, v, _ := bytes.Cut(line, []byte{':'})
			v = bytes.TrimPrefix(v, []byte{' '})
			seen = true
			switch string(k) {
			case "id":
				ev.ID = string(v)
			case "event":
				ev.Name = string(v)
			case "data":
				if ev.Data != nil {
					ev.Data = append(ev.Data, '\n')
				}
				ev.Data = append(ev.Data, v...)
			}
		}
	}
	if err := d.sc.Err(); err != nil {
		return Event{}, err
	}
	return Event{}, io.EOF
}
