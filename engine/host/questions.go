package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"time"

	"github.com/uncaged/workflow/engine/agents"
	"github.com/uncaged/workflow/engine/executor"
	"github.com/uncaged/workflow/engine/questions"
	"github.com/uncaged/workflow/engine/storage"
	"github.com/uncaged/workflow/engine/threadenv"
	"github.com/uncaged/workflow/engine/threads"
)

// A thread at a human role waits for a person. While the host runs it,
// its run waits in the role (Host.ask) without holding one of the host's
// thread slots; an answer (Host.Answer) wakes it. The question and any
// answer are on disk (package questions) before anything is said about
// them, so a wait outlives the host: a thread whose host stopped while it
// waited is still waiting (Liveness), and the answer that comes later
// starts it again from the same head, where the role finds its answer.
//
// Asks and answers of this host are made under Host.qmu: an answer that
// finds no run waiting for it knows that none will start waiting for that
// question without reading the answer first.

// maxAnsweredBy bounds who answered, as a person or the gateway names them.
const maxAnsweredBy = 200

// AnswerRequest answers the question a thread waits on.
type AnswerRequest struct {
	// Answer is the answer, a JSON object valid against the question's
	// form.
	Answer json.RawMessage `json:"answer"`
	// By names who answers ("ana@laptop", "ana via gateway").
	By string `json:"by"`
	// QuestionHash, when set, must be the question's node: an answer to a
	// question the thread no longer asks is refused (409).
	QuestionHash string `json:"questionHash,omitempty"`
	// Caller is the environment the thread goes on with when the answer
	// has to start it again (its host stopped while it waited).
	Caller *Caller `json:"caller,omitempty"`
}

// Answered is what Host.Answer recorded.
type Answered struct {
	ThreadID   string `json:"threadId"`
	AnsweredBy string `json:"answeredBy"`
	// AnsweredAt is ms since the epoch.
	AnsweredAt int64 `json:"answeredAt"`
}

// WaitsAt reports whether thread (of bundle) of root l waits for an answer
// at head: its question record was asked there and is not answered.
func WaitsAt(l storage.Layout, bundle, thread, head string) bool {
	_, err := (&questions.Store{Layout: l}).Pending(bundle, thread, head)
	return err == nil
}

// ask is the Env.Ask of a thread the host runs (hd): it records the
// question, then waits, its slot given back, until the answer is there,
// the deadline passed or ctx ended.
func (h *Host) ask(hd *handle) func(ctx context.Context, req executor.AskRequest) (agents.HumanAnswer, error) {
	return func(ctx context.Context, req executor.AskRequest) (agents.HumanAnswer, error) {
		now := time.Now()
		q := questions.Question{
			Workflow: req.Workflow, Role: req.Question.Role, Text: req.Question.Text, Schema: req.Question.Schema,
			Assignee: req.Question.Assignee, AskedAt: now.UnixMilli(),
		}
		if len(q.Schema) == 0 {
			q.Schema = json.RawMessage(`{"type":"object"}`)
		}
		if req.Question.Timeout > 0 {
			q.Deadline = now.Add(req.Question.Timeout).UnixMilli()
		}
		h.qmu.Lock()
		rec, err := h.questions.Ask(req.BundleHash, req.ThreadID, req.Head, q)
		h.qmu.Unlock()
		if err != nil {
			return agents.HumanAnswer{}, err
		}
		for {
			if rec.Answered() {
				return h.answerOf(rec)
			}
			if rec.Expired(time.Now()) {
				return agents.HumanAnswer{}, &agents.NoAnswerError{Role: rec.Role, Timeout: time.Duration(rec.Deadline-rec.AskedAt) * time.Millisecond}
			}
			if rec, err = h.waitForAnswer(ctx, hd, req, rec); err != nil {
				return agents.HumanAnswer{}, err
			}
		}
	}
}

// waitForAnswer waits until thread hd, which waits on rec, is answered,
// its deadline passes or ctx ends, and returns the record then.
func (h *Host) waitForAnswer(ctx context.Context, hd *handle, req executor.AskRequest, rec questions.Record) (questions.Record, error) {
	wake := make(chan struct{})
	// Read again and listen under qmu: an answer made before this holds
	// the lock is in the record; one made after it finds hd.wake.
	h.qmu.Lock()
	cur, err := h.questions.Read(req.BundleHash, req.ThreadID)
	if err != nil || cur.Head != req.Head || cur.Answered() {
		h.qmu.Unlock()
		if err == nil && cur.Head != req.Head {
			err = fmt.Errorf("thread %s's question record was replaced while it waited", req.ThreadID)
		}
		return cur, err
	}
	h.mu.Lock()
	hd.waiting, hd.wake = &cur, wake
	h.mu.Unlock()
	h.qmu.Unlock()
	h.publish(Change{Kind: ChangeStatus, ThreadID: req.ThreadID, BundleHash: req.BundleHash, Status: threads.StatusWaiting})
	slotGiven := h.giveSlot(hd)

	var deadline <-chan time.Time
	if cur.Deadline != 0 {
		t := time.NewTimer(time.Until(time.UnixMilli(cur.Deadline)))
		defer t.Stop()
		deadline = t.C
	}
	select {
	case <-wake:
	case <-deadline:
	case <-ctx.Done():
	}
	h.mu.Lock()
	hd.waiting, hd.wake = nil, nil
	h.mu.Unlock()
	if slotGiven && !h.takeSlot(ctx, hd) {
		return cur, context.Cause(ctx)
	}
	if ctx.Err() != nil {
		return cur, context.Cause(ctx)
	}
	h.publish(Change{Kind: ChangeStatus, ThreadID: req.ThreadID, BundleHash: req.BundleHash, Status: hd.gate.Status()})
	h.qmu.Lock()
	defer h.qmu.Unlock()
	return h.questions.Read(req.BundleHash, req.ThreadID)
}

// giveSlot gives back the thread slot hd holds, if it holds one (a child
// thread runs on its parent's): a person may take hours, and other
// threads should not wait for them.
func (h *Host) giveSlot(hd *handle) bool {
	if !hd.holdsSlot.CompareAndSwap(true, false) {
		return false
	}
	<-h.sem
	return true
}

// takeSlot takes a slot back for hd once it was answered; false when ctx
// ended first.
func (h *Host) takeSlot(ctx context.Context, hd *handle) bool {
	select {
	case h.sem <- struct{}{}:
		hd.holdsSlot.Store(true)
		return true
	case <-ctx.Done():
		return false
	}
}

// answerOf reads the answer rec names.
func (h *Host) answerOf(rec questions.Record) (agents.HumanAnswer, error) {
	a, err := h.questions.AnswerOf(rec)
	if err != nil {
		return agents.HumanAnswer{}, err
	}
	return agents.HumanAnswer{Answer: a.Answer, Node: rec.Answer, By: a.AnsweredBy, At: time.UnixMilli(a.AnsweredAt)}, nil
}

// Answer answers the question thread id waits on: the answer is checked
// against the question's form (a *questions.InvalidAnswerError names each
// field at fault, and the thread keeps waiting), recorded with who gave it,
// and the thread goes on. A second answer is refused with
// questions.ErrAnswered, naming who answered first; a thread that waits
// for nothing with questions.ErrNotWaiting.
func (h *Host) Answer(id string, req AnswerRequest) (Answered, error) {
	by := strings.Join(strings.Fields(req.By), " ")
	if by == "" {
		return Answered{}, errors.New("an answer must say who gives it")
	}
	if r := []rune(by); len(r) > maxAnsweredBy {
		by = string(r[:maxAnsweredBy]) + "…"
	}
	if err := h.admit(); err != nil {
		return Answered{}, err
	}
	env, err := h.threadEnv(req.Caller)
	if err != nil {
		return Answered{}, err
	}
	trec, err := threads.Resolve(h.opts.Layout, id)
	if err != nil {
		return Answered{}, err
	}
	h.qmu.Lock()
	rec, err := h.answer(trec, req, by)
	if err != nil {
		h.qmu.Unlock()
		return Answered{}, err
	}
	h.mu.Lock()
	hd := h.running[trec.ThreadID]
	woken := hd != nil && hd.wake != nil
	if woken {
		close(hd.wake)
		hd.wake = nil
	}
	h.mu.Unlock()
	h.qmu.Unlock()
	out := Answered{ThreadID: trec.ThreadID, AnsweredBy: rec.AnsweredBy, AnsweredAt: rec.AnsweredAt}
	if woken || hd != nil {
		return out, nil
	}
	// Nobody runs the thread: its host stopped while it waited. The
	// answer is recorded; going on from it is a resume.
	if err := h.resumeAnswered(trec.ThreadID, env); err != nil {
		h.opts.Logger.Warn("engine host: an answered thread could not go on", "thread", trec.ThreadID, "err", err)
		return out, fmt.Errorf("the answer is recorded, but the thread could not go on: %w (resume it with `uncaged-workflow thread resume %s`)", err, trec.ThreadID)
	}
	return out, nil
}

// answer checks and records req for thread trec; the caller holds qmu.
func (h *Host) answer(trec threads.Record, req AnswerRequest, by string) (questions.Record, error) {
	rec, err := h.questions.Read(trec.BundleHash, trec.ThreadID)
	if err != nil {
		return rec, err
	}
	if rec.Answered() { // refused, saying who answered and when
		return h.questions.Answer(trec.BundleHash, trec.ThreadID, trec.Head, req.QuestionHash, nil, by, time.Now())
	}
	if trec.Source != threads.SourceActive || rec.Head != trec.Head {
		return rec, fmt.Errorf("thread %s went on without an answer (its wait ran out, or it was killed): it is %w", trec.ThreadID, questions.ErrNotWaiting)
	}
	q, err := h.questions.Question(rec)
	if err != nil {
		return rec, err
	}
	answer, err := questions.Validate(q.Schema, req.Answer)
	if err != nil {
		return rec, err
	}
	return h.questions.Answer(trec.BundleHash, trec.ThreadID, trec.Head, req.QuestionHash, answer, by, time.Now())
}

// resumeAnswered starts thread id again after its answer, unless a
// resume or kill got to it first.
func (h *Host) resumeAnswered(id string, env *threadenv.Env) error {
	if err := h.admit(); err != nil {
		return err
	}
	h.mu.Lock()
	if h.running[id] != nil || h.admitting[id] != nil {
		h.mu.Unlock()
		return nil
	}
	release := h.claimLocked(id, resuming)
	h.mu.Unlock()
	defer release()
	_, wf, t, err := h.resumable(id, "cannot go on with", "it goes on there")
	if err != nil {
		return err
	}
	return h.start(wf, t, env, true, nil)
}

// resumeWaits runs when the host opens: a thread that was answered while
// no host ran it (the host stopped between recording the answer and
// starting it) goes on, and one whose wait has a deadline goes on to its
// timeout when it passes. Those still waiting stay as they are: the
// answer starts them.
func (h *Host) resumeWaits() {
	matches, _ := filepath.Glob(filepath.Join(h.opts.Layout.Root, "logs", "*", "*.question.json"))
	for _, path := range matches {
		bundle := filepath.Base(filepath.Dir(path))
		id := strings.TrimSuffix(filepath.Base(path), ".question.json")
		rec, err := h.questions.Read(bundle, id)
		if err != nil {
			h.opts.Logger.Warn("engine host: a question record it cannot read", "path", path, "err", err)
			continue
		}
		trec, err := threads.Resolve(h.opts.Layout, id)
		if err != nil || trec.Source != threads.SourceActive || trec.Head != rec.Head {
			continue // a wait that is over, kept for late answers
		}
		if !rec.Answered() {
			if rec.Deadline == 0 {
				continue
			}
			h.timeoutAt(id, time.UnixMilli(rec.Deadline))
			continue
		}
		env, _ := h.threadEnv(nil)
		if err := h.resumeAnswered(id, env); err != nil {
			h.opts.Logger.Warn("engine host: an answered thread could not go on", "thread", id, "err", err)
		}
	}
}

// timeoutAt starts waiting thread id at its deadline, so that its role
// takes its timeout, unless something started it before.
func (h *Host) timeoutAt(id string, at time.Time) {
	h.mu.Lock()
	h.deadlines++
	h.mu.Unlock()
	time.AfterFunc(time.Until(at), func() {
		h.mu.Lock()
		h.deadlines--
		h.mu.Unlock()
		if h.baseCtx.Err() != nil {
			return
		}
		env, _ := h.threadEnv(nil)
		if err := h.resumeAnswered(id, env); err != nil {
			h.opts.Logger.Warn("engine host: a thread whose wait ran out could not go on", "thread", id, "err", err)
		}
	})
}

// serveAnswer answers POST /v1/threads/{id}/answer: 200 with Answered, 400
// with the fields at fault, 404 when the thread waits for nothing, 409 when
// the question was answered already.
func (h *Host) serveAnswer(w http.ResponseWriter, r *http.Request) {
	var req AnswerRequest
	if !readJSON(w, r, &req) {
		return
	}
	id, ok := threadID(w, r)
	if !ok {
		return
	}
	out, err := h.Answer(id, req)
	var invalid *questions.InvalidAnswerError
	switch {
	case err == nil:
		writeJSON(w, http.StatusOK, out)
	case errors.As(err, &invalid):
		writeJSON(w, http.StatusBadRequest, answerError{Error: err.Error(), Fields: invalid.Fields})
	case errors.Is(err, questions.ErrNotWaiting), errors.Is(err, threads.ErrNotFound):
		writeJSON(w, http.StatusNotFound, apiError{err.Error()})
	default:
		writeError(w, err)
	}
}

// answerError is the body of a refused answer: the fields at fault, when
// the answer does not fit the form.
type answerError struct {
	Error  string                 `json:"error"`
	Fields []questions.FieldError `json:"fields,omitempty"`
}

// Answer answers the question thread id waits on (Host.Answer), with the
// client's caller's environment for a thread the answer starts again. The
// errors are Host.Answer's: a *questions.InvalidAnswerError, or ones that
// match questions.ErrNotWaiting or questions.ErrAnswered.
func (c *Client) Answer(id string, req AnswerRequest) (Answered, error) {
	req.Caller = c.callerOr(req.Caller)
	var out Answered
	status, body, err := c.call(http.MethodPost, "/v1/threads/"+id+"/answer", req)
	if err != nil {
		return out, err
	}
	var refused answerError
	if status != http.StatusOK {
		if json.Unmarshal(body, &refused) != nil || refused.Error == "" {
			return out, fmt.Errorf("engine host: answering: status %d", status)
		}
	}
	switch status {
	case http.StatusOK:
		return out, json.Unmarshal(body, &out)
	case http.StatusBadRequest:
		if len(refused.Fields) > 0 {
			return out, &questions.InvalidAnswerError{Fields: refused.Fields}
		}
		return out, errors.New(refused.Error)
	case http.StatusNotFound:
		return out, &refusal{refused.Error, questions.ErrNotWaiting}
	case http.StatusConflict:
		if strings.Contains(refused.Error, questions.ErrAnswered.Error()) {
			return out, &refusal{refused.Error, questions.ErrAnswered}
		}
	}
	return out, errors.New(refused.Error)
}

// refusal is a host's message that matches the error it stands for.
type refusal struct {
	msg  string
	kind error
}

func (r *refusal) Error() string        { return r.msg }
func (r *refusal) Is(target error) bool { return target == r.kind }
