package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/uncaged/workflow/engine/host"
	"github.com/uncaged/workflow/engine/ids"
	"github.com/uncaged/workflow/engine/questions"
	"github.com/uncaged/workflow/engine/threads"
	"github.com/uncaged/workflow/shared/fleet"
	"github.com/uncaged/workflow/shared/tunnel"
)

// QuestionView is GET /api/threads/:id/question: what a waiting thread
// asks, and, once someone answered, the answer, who gave it and when.
type QuestionView struct {
	ThreadID string `json:"threadId"`
	Workflow string `json:"workflow"`
	Role     string `json:"role"`
	// Question is the role's prompt (Markdown), whole.
	Question string `json:"question"`
	// Schema is the form of the answer, a JSON Schema of an object.
	Schema   json.RawMessage `json:"schema"`
	Assignee string          `json:"assignee"`
	AskedAt  string          `json:"askedAt"`
	Deadline *string         `json:"deadline"`
	// QuestionHash names the question; an answer may send it back so that
	// it cannot answer a later question by mistake.
	QuestionHash string          `json:"questionHash"`
	Answered     bool            `json:"answered"`
	Answer       json.RawMessage `json:"answer,omitempty"`
	AnsweredBy   string          `json:"answeredBy,omitempty"`
	AnsweredAt   *string         `json:"answeredAt"`
}

// AnswerBody is POST /api/threads/:id/answer.
type AnswerBody struct {
	Answer       json.RawMessage `json:"answer"`
	QuestionHash string          `json:"questionHash,omitempty"`
}

// AnswerRefused is the 400 of an answer that does not fit the form.
type AnswerRefused struct {
	Error  string                 `json:"error"`
	Fields []questions.FieldError `json:"fields"`
}

// getQuestion is GET /api/threads/:id/question: 404 when the thread
// waits for nothing and has no answered question to show.
func (s *server) getQuestion(c echo.Context) error {
	rec, err := s.resolve(c, c.Param("id"))
	if err != nil {
		return err
	}
	qs := &questions.Store{Layout: s.opts.Layout, CAS: s.store}
	qrec, err := qs.Read(rec.BundleHash, rec.ThreadID)
	if errors.Is(err, questions.ErrNotWaiting) {
		return fail(http.StatusNotFound, "thread %s waits for no answer", rec.ThreadID)
	}
	if err != nil {
		return s.internal(c, err)
	}
	if !qrec.Answered() && (rec.Source != threads.SourceActive || qrec.Head != rec.Head) {
		return fail(http.StatusNotFound, "thread %s waits for no answer: it went on without one", rec.ThreadID)
	}
	q, err := qs.Question(qrec)
	if err != nil {
		return s.internal(c, err)
	}
	out := QuestionView{
		ThreadID: rec.ThreadID, Workflow: q.Workflow, Role: q.Role, Question: q.Text, Schema: q.Schema,
		Assignee: q.Assignee, AskedAt: isoTime(q.AskedAt), QuestionHash: qrec.Question, Answered: qrec.Answered(),
	}
	if q.Deadline != 0 {
		d := isoTime(q.Deadline)
		out.Deadline = &d
	}
	if qrec.Answered() {
		a, err := qs.AnswerOf(qrec)
		if err != nil {
			return s.internal(c, err)
		}
		at := isoTime(a.AnsweredAt)
		out.Answer, out.AnsweredBy, out.AnsweredAt = a.Answer, a.AnsweredBy, &at
	}
	return c.JSON(http.StatusOK, out)
}

// answerThread is POST /api/threads/:id/answer: 200 with who answered and
// when; 400 naming each field at fault (the thread keeps waiting); 404
// when it waits for nothing; 409 when someone answered first.
func (s *server) answerThread(c echo.Context) error {
	rec, err := s.resolve(c, c.Param("id"))
	if err != nil {
		return err
	}
	body, err := readBody(c)
	if err != nil {
		return err
	}
	var req AnswerBody
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return fail(http.StatusBadRequest, "request body must be a JSON object {answer, questionHash?}: %s", err.Error())
	}
	if dec.More() {
		return fail(http.StatusBadRequest, "request body must be one JSON object")
	}
	if len(req.Answer) == 0 || bytes.Equal(req.Answer, []byte("null")) {
		return c.JSON(http.StatusBadRequest, AnswerRefused{Error: "answer is required", Fields: []questions.FieldError{{Message: "answer is required"}}})
	}
	if req.QuestionHash != "" {
		if _, err := ids.ParseHash(req.QuestionHash); err != nil {
			return fail(http.StatusBadRequest, "questionHash: %s", err.Error())
		}
	}
	eng, err := s.engine()
	if err != nil {
		return err
	}
	out, err := eng.Answer(rec.ThreadID, host.AnswerRequest{Answer: req.Answer, QuestionHash: req.QuestionHash, By: answerer(c)})
	var invalid *questions.InvalidAnswerError
	switch {
	case err == nil:
		s.log.Info("thread answered", "thread", rec.ThreadID, "by", out.AnsweredBy)
		return c.JSON(http.StatusOK, map[string]any{"threadId": out.ThreadID, "answeredBy": out.AnsweredBy, "answeredAt": isoTime(out.AnsweredAt)})
	case errors.As(err, &invalid):
		return c.JSON(http.StatusBadRequest, AnswerRefused{Error: invalid.Error(), Fields: invalid.Fields})
	case errors.Is(err, questions.ErrNotWaiting):
		return fail(http.StatusNotFound, "%s", err.Error())
	case errors.Is(err, questions.ErrAnswered):
		return fail(http.StatusConflict, "%s", err.Error())
	}
	s.log.Info("answer refused", "thread", rec.ThreadID, "err", err)
	return fail(http.StatusConflict, "%s", err.Error())
}

// answerer names who answers: the dashboard user the gateway names for a
// request that came through the tunnel, else whoever runs this connector,
// on this machine.
func answerer(c echo.Context) string {
	if user, tunneled := tunnel.UserFrom(c.Request().Context()); tunneled {
		user = strings.Join(strings.Fields(user), " ")
		if user == "" {
			user = "a dashboard user"
		}
		return user + " via gateway"
	}
	return questions.LocalAnswerer()
}

// waitingOf is what a waiting thread asks, for the fleet's change stream;
// nil when its question cannot be read (it is logged).
func (s *server) waitingOf(rec threads.Record) *fleet.Waiting {
	qs := &questions.Store{Layout: s.opts.Layout, CAS: s.store}
	qrec, err := qs.Pending(rec.BundleHash, rec.ThreadID, rec.Head)
	if err != nil {
		return nil
	}
	q, err := qs.Question(qrec)
	if err != nil {
		s.log.Warn("events: reading a waiting thread's question", "thread", rec.ThreadID, "err", err)
		return nil
	}
	w := &fleet.Waiting{Role: q.Role, Question: fleet.Truncate(q.Text, fleet.QuestionMaxRunes), Assignee: q.Assignee, Since: time.UnixMilli(q.AskedAt).UTC()}
	if q.Deadline != 0 {
		d := time.UnixMilli(q.Deadline).UTC()
		w.Deadline = &d
	}
	return w
}
