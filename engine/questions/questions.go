// Package questions keeps the questions threads wait on: a role whose
// agent is a person (agent type "human") asks its prompt, with its output
// schema as the form of the answer, and the thread waits until someone
// answers or the role's timeout passes.
//
// A question lives in two places. Its text, form and circumstances are a
// content node in the CAS (the question node); a small record beside the
// thread's debug log, logs/<bundle>/<thread>.question.json, names that
// node, the head the thread had when it asked, and — once given — the
// answer, itself a content node that names the question. The record is
// what makes a wait survive restarts: a host that starts again finds the
// thread waiting, and the role, run again from the same head, finds its
// question (and maybe its answer) instead of asking anew. A record whose
// head is no longer the thread's head is the thread's last wait, over: it
// stays (until the thread asks again or is removed) so that an answer
// arriving late is told who answered first, and when.
//
// Writers: only the engine host writes records (it asks on the thread's
// behalf and takes answers over its socket), one request at a time per
// thread, so an answer can be refused as second (ErrAnswered) by reading
// the record it is about to replace.
package questions

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/user"
	"time"

	"github.com/uncaged/workflow/engine/atomicfile"
	"github.com/uncaged/workflow/engine/cas"
	"github.com/uncaged/workflow/engine/ids"
	"github.com/uncaged/workflow/engine/node"
	"github.com/uncaged/workflow/engine/storage"
)

// Errors callers tell apart.
var (
	// ErrNotWaiting: the thread has no open question (it never asked, or
	// has moved on).
	ErrNotWaiting = errors.New("not waiting for an answer")
	// ErrAnswered: the question was answered already; a second answer is
	// refused so two people can never both answer.
	ErrAnswered = errors.New("already answered")
)

// maxRecordBytes bounds a record file: it holds a few hashes and names,
// and anything larger is not one of ours.
const maxRecordBytes = 64 << 10

// Record is the file that says a thread waits, or has just been answered.
type Record struct {
	ThreadID string `json:"thread"`
	Role     string `json:"role"`
	// Head is the thread's head when the role asked: the question belongs
	// to that point of the chain only.
	Head string `json:"head"`
	// Question is the question node's hash.
	Question string `json:"question"`
	// AskedAt and Deadline are Unix milliseconds; Deadline is 0 when the
	// role waits for ever.
	AskedAt  int64  `json:"askedAt"`
	Deadline int64  `json:"deadline,omitempty"`
	Assignee string `json:"assignee,omitempty"`
	// Answer is the answer node's hash, "" while the thread waits.
	Answer     string `json:"answer,omitempty"`
	AnsweredBy string `json:"answeredBy,omitempty"`
	AnsweredAt int64  `json:"answeredAt,omitempty"`
}

// Answered reports whether the record holds an answer.
func (r Record) Answered() bool { return r.Answer != "" }

// Expired reports whether the record's deadline has passed at now.
func (r Record) Expired(now time.Time) bool {
	return r.Deadline != 0 && !r.Answered() && now.UnixMilli() >= r.Deadline
}

// Question is what a role asks: the text of its question node.
type Question struct {
	Workflow string `json:"workflow,omitempty"`
	Role     string `json:"role"`
	// Text is the role's prompt: what the person is asked.
	Text string `json:"question"`
	// Schema is the JSON Schema the answer must satisfy (an object schema).
	Schema   json.RawMessage `json:"schema"`
	Assignee string          `json:"assignee,omitempty"`
	AskedAt  int64           `json:"askedAt"`
	Deadline int64           `json:"deadline,omitempty"`
}

// Answer is the text of an answer node: the answer and who gave it.
type Answer struct {
	Answer     json.RawMessage `json:"answer"`
	AnsweredBy string          `json:"answeredBy"`
	AnsweredAt int64           `json:"answeredAt"`
}

// Store reads and writes the questions of one storage root.
type Store struct {
	Layout storage.Layout
	CAS    *cas.Store
}

// Open returns the question store of root l.
func Open(l storage.Layout) *Store {
	return &Store{Layout: l, CAS: cas.Open(l.CASDir())}
}

// Ask records that thread (of bundle) waits at head for the answer to q,
// and returns the record. When a record for the same head is there
// already — the role runs again after a restart — it is returned as it is
// (answered or not), and q is not stored again: the question asked first
// stands.
func (s *Store) Ask(bundle, thread, head string, q Question) (Record, error) {
	if rec, err := s.Read(bundle, thread); err == nil && rec.Head == head {
		return rec, nil
	} else if err != nil && !errors.Is(err, ErrNotWaiting) {
		return Record{}, err
	}
	text, err := json.Marshal(q)
	if err != nil {
		return Record{}, err
	}
	qh, err := s.CAS.PutNode(node.NewContent(string(text), nil))
	if err != nil {
		return Record{}, fmt.Errorf("storing the question: %w", err)
	}
	rec := Record{ThreadID: thread, Role: q.Role, Head: head, Question: qh, AskedAt: q.AskedAt, Deadline: q.Deadline, Assignee: q.Assignee}
	return rec, s.write(bundle, rec)
}

// Read returns thread's record, ErrNotWaiting when it has none. A record
// that cannot be read as one is an error naming the file: nothing is
// guessed about a thread's wait.
func (s *Store) Read(bundle, thread string) (Record, error) {
	path := s.Layout.QuestionFile(bundle, thread)
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Record{}, fmt.Errorf("thread %s is %w", thread, ErrNotWaiting)
	}
	if err != nil {
		return Record{}, err
	}
	defer func() { _ = f.Close() }() // opened read-only
	var rec Record
	b, err := io.ReadAll(io.LimitReader(f, maxRecordBytes+1))
	if err != nil {
		return Record{}, fmt.Errorf("%s: %w", path, err)
	}
	if len(b) > maxRecordBytes {
		return Record{}, fmt.Errorf("%s: larger than %d bytes, not a question record", path, maxRecordBytes)
	}
	if err := json.Unmarshal(b, &rec); err != nil {
		return Record{}, fmt.Errorf("%s: not a question record: %w", path, err)
	}
	if rec.ThreadID != thread {
		return Record{}, fmt.Errorf("%s: the record is thread %q's, not %s's", path, rec.ThreadID, thread)
	}
	for _, h := range []struct{ name, hash string }{{"head", rec.Head}, {"question", rec.Question}} {
		if _, err := ids.ParseHash(h.hash); err != nil {
			return Record{}, fmt.Errorf("%s: its %s: %w", path, h.name, err)
		}
	}
	if rec.Answer != "" {
		if _, err := ids.ParseHash(rec.Answer); err != nil {
			return Record{}, fmt.Errorf("%s: its answer: %w", path, err)
		}
	}
	return rec, nil
}

// Pending returns thread's record when it waits at head: ErrNotWaiting
// when it has none, or one asked at another head (stale: the thread moved
// on), or one already answered.
func (s *Store) Pending(bundle, thread, head string) (Record, error) {
	rec, err := s.Read(bundle, thread)
	if err != nil {
		return Record{}, err
	}
	if rec.Head != head || rec.Answered() {
		return Record{}, fmt.Errorf("thread %s is %w", thread, ErrNotWaiting)
	}
	return rec, nil
}

// Question reads the question node rec names.
func (s *Store) Question(rec Record) (Question, error) {
	var q Question
	return q, s.readContent(rec.Question, "question", &q)
}

// AnswerOf reads the answer node rec names.
func (s *Store) AnswerOf(rec Record) (Answer, error) {
	var a Answer
	if !rec.Answered() {
		return a, fmt.Errorf("thread %s's question has no answer yet", rec.ThreadID)
	}
	return a, s.readContent(rec.Answer, "answer", &a)
}

func (s *Store) readContent(hash, what string, into any) error {
	n, err := s.CAS.GetNode(hash)
	if err != nil {
		return fmt.Errorf("the %s node %s: %w", what, hash, err)
	}
	c, ok := n.(node.Content)
	if !ok {
		return fmt.Errorf("the %s node %s is a %s node, not content", what, hash, n.Type())
	}
	if err := json.Unmarshal([]byte(c.Payload), into); err != nil {
		return fmt.Errorf("the %s node %s: %w", what, hash, err)
	}
	return nil
}

// Answer records answer (already validated by the caller against the
// question's form) as given by by at now, for the question thread waits on
// at head. questionHash, when not "", must be the question's hash: an
// answer meant for an earlier question of the thread is refused as
// ErrAnswered, since that one was answered. It returns the record as
// written.
func (s *Store) Answer(bundle, thread, head, questionHash string, answer json.RawMessage, by string, now time.Time) (Record, error) {
	rec, err := s.Read(bundle, thread)
	if err != nil {
		return Record{}, err
	}
	if rec.Answered() { // at this head or an earlier one: either way, not again
		return rec, s.answeredErr(rec)
	}
	if rec.Head != head {
		return Record{}, fmt.Errorf("thread %s is %w (its wait ended without an answer)", thread, ErrNotWaiting)
	}
	if questionHash != "" && questionHash != rec.Question {
		return rec, fmt.Errorf("%w: the thread now waits on question %s, not %s", ErrAnswered, rec.Question, questionHash)
	}
	a := Answer{Answer: answer, AnsweredBy: by, AnsweredAt: now.UnixMilli()}
	text, err := json.Marshal(a)
	if err != nil {
		return Record{}, err
	}
	ah, err := s.CAS.PutNode(node.NewContent(string(text), []string{rec.Question}))
	if err != nil {
		return Record{}, fmt.Errorf("storing the answer: %w", err)
	}
	rec.Answer, rec.AnsweredBy, rec.AnsweredAt = ah, by, a.AnsweredAt
	return rec, s.write(bundle, rec)
}

// answeredErr says who answered rec and when.
func (s *Store) answeredErr(rec Record) error {
	return fmt.Errorf("this question was %w by %s at %s", ErrAnswered, rec.AnsweredBy, time.UnixMilli(rec.AnsweredAt).UTC().Format(time.RFC3339))
}

// write stores rec durably: the record names nodes stored before it.
func (s *Store) write(bundle string, rec Record) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	if err := s.CAS.Sync(); err != nil {
		return err
	}
	return atomicfile.Write(s.Layout.QuestionFile(bundle, rec.ThreadID), append(b, '\n'), 0o644)
}

// LocalAnswerer names the person answering from this machine's command
// line or its local API: "<user>@<host>", as well as they can be told.
func LocalAnswerer() string {
	name := os.Getenv("USER")
	if u, err := user.Current(); err == nil && u.Username != "" {
		name = u.Username
	}
	if name == "" {
		name = fmt.Sprintf("uid %d", os.Getuid())
	}
	hostname, err := os.Hostname()
	if err != nil || hostname == "" {
		hostname = "this machine"
	}
	return name + "@" + hostname
}
