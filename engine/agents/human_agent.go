package agents

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/uncaged/workflow/engine/canonyaml"
)

// MaxAssigneeRunes bounds a human agent's assignee: a name or an address,
// shown on every inbox line.
const MaxAssigneeRunes = 200

// HumanHost is a Host that can put a question to a person and wait for the
// answer: the engine's executor is one. The wait is the engine's business
// (it survives restarts); the agent only says what to ask.
type HumanHost interface {
	// AskHuman asks q and blocks until it is answered (the answer is valid
	// against q.Schema), the timeout passes (a *NoAnswerError) or ctx ends.
	AskHuman(ctx context.Context, q HumanQuestion) (HumanAnswer, error)
}

// HumanQuestion is what a human role asks.
type HumanQuestion struct {
	Role string
	// Text is the role's prompt: the question.
	Text string
	// Schema is the form of the answer (a JSON Schema of an object); nil
	// accepts any object.
	Schema json.RawMessage
	// Assignee is who is asked; "" for anyone.
	Assignee string
	// Timeout is how long to wait; 0 waits for ever.
	Timeout time.Duration
}

// HumanAnswer is a person's answer.
type HumanAnswer struct {
	// Answer is the answer as JSON, valid against the question's schema.
	Answer json.RawMessage
	// Node is the content node that records the answer, who gave it and
	// when, and names the question's node.
	Node string
	// By is who answered; At is when.
	By string
	At time.Time
}

// NoAnswerError is a human role whose wait ran out.
type NoAnswerError struct {
	Role    string
	Timeout time.Duration
}

// Error says which role got no answer within what time.
func (e *NoAnswerError) Error() string {
	return fmt.Sprintf("role %q got no answer within %s", e.Role, e.Timeout)
}

// TimedOutMeta is the meta of a human role whose wait ran out and whose
// route has a FALLBACK: it has no status, so routing takes FALLBACK, and a
// role that reads the step sees why.
func TimedOutMeta() canonyaml.Map { return canonyaml.Map{{Key: "timedOut", Value: true}} }

// IsTimedOutMeta reports whether meta is exactly TimedOutMeta.
func IsTimedOutMeta(meta canonyaml.Map) bool {
	if len(meta) != 1 {
		return false
	}
	v, ok := meta.Get("timedOut")
	return ok && v == true
}

// humanAgent asks a person: the role's prompt is the question and its
// output schema the form of the answer.
type humanAgent struct{ spec Spec }

func (h humanAgent) Run(ctx context.Context, call Call) (Result, error) {
	host, ok := call.Host.(HumanHost)
	if !ok {
		return Result{}, errors.New("a human agent needs an engine host that can wait for answers; this one cannot")
	}
	a, err := host.AskHuman(ctx, HumanQuestion{
		Role: call.Role, Text: call.SystemPrompt, Schema: call.Schema,
		Assignee: h.spec.Assignee, Timeout: h.spec.TimeoutMs.Duration(),
	})
	if err != nil {
		return Result{}, err
	}
	tree, err := canonyaml.FromJSON(a.Answer)
	if err != nil {
		return Result{}, fmt.Errorf("the answer: %w", err)
	}
	meta, ok := tree.(canonyaml.Map)
	if !ok {
		return Result{}, errors.New("the answer is not a JSON object")
	}
	return Result{Meta: meta, Refs: []string{a.Node}}, nil
}
