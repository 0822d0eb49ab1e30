package host

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/uncaged/workflow/engine/node"
	"github.com/uncaged/workflow/engine/questions"
	"github.com/uncaged/workflow/engine/registry"
	"github.com/uncaged/workflow/engine/storage"
	"github.com/uncaged/workflow/engine/threads"
	"github.com/uncaged/workflow/engine/workflow"
	"github.com/uncaged/workflow/engine/yamlwf"
	"github.com/uncaged/workflow/shared/testkit"
)

// approvalYAML asks a person to approve, then a command records that it
// ran with the answer as the previous step's meta. route is the approve
// role's graph entry.
func approvalYAML(agent, route string) string {
	return `version: 1
description: approval
roles:
  approve:
    description: a person approves
    prompt: Ship the plan?
    agent: ` + agent + `
    output:
      type: object
      properties:
        status: {enum: [approved, rejected]}
        note: {type: string, maxLength: 20}
      required: [status]
  ship:
    description: ships
    prompt: ship
    agent: {type: exec, command: /bin/echo, args: ['{"shipped":true}']}
graph:
  __start__: approve
  approve: ` + route + `
  ship: __end__
`
}

// waitFixture is a host over a root whose only workflow is a YAML one.
type waitFixture struct {
	*fixture
	src string
}

const waitBundle = "APPR0VA100000"

func newWaitFixture(t *testing.T, src string) *waitFixture {
	f := &waitFixture{fixture: &fixture{t: t, l: storage.Layout{Root: privateDir(t)}}, src: src}
	f.load = func(hash string) (workflow.Workflow, error) {
		if hash != waitBundle {
			return nil, fmt.Errorf("no bundle %s", hash)
		}
		return yamlwf.Load([]byte(f.src), yamlwf.Options{})
	}
	if err := registry.Update(f.l.RegistryFile(), func(r *registry.Registry) error {
		r.Register("approval", waitBundle, 1)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	f.startHost(0)
	return f
}

// status is the thread's status as the CLI and the API derive it.
func (f *waitFixture) status(id string) threads.Status {
	seen := Sight(nil)
	if f.cancel != nil {
		seen = Sight(f.client.Running)
	}
	rec, err := threads.Resolve(f.l, id)
	if err != nil {
		return ""
	}
	st, _ := seen.Status(f.host.exec.CAS, rec)
	return st
}

func (f *waitFixture) waitStatus(id string, want threads.Status) {
	f.t.Helper()
	testkit.WaitUntil(f.t, fmt.Sprintf("thread %s to be %s", id, want), func() bool { return f.status(id) == want })
}

func (f *waitFixture) run() string {
	id, err := f.client.Run(RunRequest{Workflow: "approval", Prompt: "the plan"})
	if err != nil {
		f.t.Fatal(err)
	}
	return id
}

func (f *waitFixture) roles(id string) string {
	rec, err := threads.Resolve(f.l, id)
	if err != nil {
		f.t.Fatal(err)
	}
	frames, err := threads.Walk(f.host.exec.CAS, rec.Head)
	if err != nil {
		f.t.Fatal(err)
	}
	var out []string
	for _, fr := range frames {
		out = append(out, fr.State.Payload.Role)
	}
	return strings.Join(out, ",")
}

func (f *waitFixture) answer(id, answer, questionHash string) (Answered, error) {
	return f.client.Answer(id, AnswerRequest{Answer: json.RawMessage(answer), By: "ana@laptop", QuestionHash: questionHash})
}

func TestAHumanRoleWaitsForAValidAnswer(t *testing.T) {
	f := newWaitFixture(t, approvalYAML("{type: human, assignee: ana}", "{approved: ship, rejected: __end__}"))
	id := f.run()
	f.waitStatus(id, threads.StatusWaiting)
	rec, err := threads.Resolve(f.l, id)
	if err != nil {
		t.Fatal(err)
	}
	qs := questions.Open(f.l)
	qrec, err := qs.Pending(waitBundle, id, rec.Head)
	if err != nil {
		t.Fatalf("the waiting thread has no pending question: %v", err)
	}
	q, err := qs.Question(qrec)
	if err != nil || q.Text != "Ship the plan?" || q.Assignee != "ana" || q.Role != "approve" || q.Workflow != "approval" {
		t.Fatalf("question = %+v, %v", q, err)
	}

	// Answers that do not fit the form are refused field by field, and
	// change nothing.
	for _, bad := range []struct{ answer, path string }{
		{`{"status":"maybe"}`, "/status"},
		{`{}`, ""},
		{`{"status":"approved","note":"far too long for the twenty runes"}`, "/note"},
		{`[1]`, ""},
		{`"approved"`, ""},
		{`null`, ""},
	} {
		_, err := f.answer(id, bad.answer, "")
		var invalid *questions.InvalidAnswerError
		if !errors.As(err, &invalid) {
			t.Fatalf("answer %s: got %v, want an invalid answer", bad.answer, err)
		}
		if invalid.Fields[0].Path != bad.path {
			t.Errorf("answer %s: first field %q (%s), want %q", bad.answer, invalid.Fields[0].Path, invalid.Fields[0].Message, bad.path)
		}
		if f.status(id) != threads.StatusWaiting {
			t.Fatalf("after answer %s the thread is %s", bad.answer, f.status(id))
		}
	}
	if _, err := f.answer(id, `{"status":"approved"}`, "0000000000000"); !errors.Is(err, questions.ErrAnswered) {
		t.Fatalf("an answer to another question: %v, want ErrAnswered", err)
	}

	got, err := f.answer(id, `{ "status": "approved", "note": "lgtm" }`, qrec.Question)
	if err != nil || got.AnsweredBy != "ana@laptop" || got.ThreadID != id {
		t.Fatalf("answer: %+v, %v", got, err)
	}
	testkit.WaitUntil(t, "the thread to complete", func() bool { return f.status(id) == threads.StatusCompleted })
	if r := f.roles(id); r != "approve,ship,__end__" {
		t.Fatalf("chain %s", r)
	}
	_, err = f.answer(id, `{"status":"rejected"}`, qrec.Question)
	if !errors.Is(err, questions.ErrAnswered) || !strings.Contains(err.Error(), "ana@laptop") {
		t.Fatalf("a second answer: %v, want ErrAnswered naming who answered", err)
	}

	// The step's meta is the answer, and its content keeps the answer
	// node, which keeps the question.
	rec, _ = threads.Resolve(f.l, id)
	frames, _ := threads.Walk(f.host.exec.CAS, rec.Head)
	st := frames[0].State
	if b, _ := st.Payload.Meta.MarshalJSON(); string(b) != `{"status":"approved","note":"lgtm"}` {
		t.Fatalf("approve's meta %s", b)
	}
	n, err := f.host.exec.CAS.GetNode(st.Payload.Content)
	if err != nil {
		t.Fatal(err)
	}
	refs := n.(node.Content).Refs
	final, _ := qs.Read(waitBundle, id)
	if len(refs) != 1 || refs[0] != final.Answer {
		t.Fatalf("content refs %v, want the answer %s", refs, final.Answer)
	}
	a, err := qs.AnswerOf(final)
	if err != nil || a.AnsweredBy != "ana@laptop" {
		t.Fatalf("answer node %+v, %v", a, err)
	}
}

func TestAWaitOutlivesItsHost(t *testing.T) {
	f := newWaitFixture(t, approvalYAML("{type: human}", "{approved: ship, rejected: __end__}"))
	id := f.run()
	f.waitStatus(id, threads.StatusWaiting)
	f.stopHost()
	// No host: the record still says the thread waits.
	f.waitStatus(id, threads.StatusWaiting)
	f.startHost(0)
	f.waitStatus(id, threads.StatusWaiting)
	if _, err := f.answer(id, `{"status":"rejected"}`, ""); err != nil {
		t.Fatal(err)
	}
	f.waitStatus(id, threads.StatusCompleted)
	if r := f.roles(id); r != "approve,__end__" {
		t.Fatalf("chain %s", r)
	}
}

func TestAWaitThatRunsOutTakesFallbackOrFails(t *testing.T) {
	t.Run("fallback", func(t *testing.T) {
		f := newWaitFixture(t, approvalYAML(`{type: human, timeout: "1ms"}`, "{approved: __end__, rejected: __end__, FALLBACK: ship}"))
		id := f.run()
		f.waitStatus(id, threads.StatusCompleted)
		if r := f.roles(id); r != "approve,ship,__end__" {
			t.Fatalf("chain %s", r)
		}
		rec, _ := threads.Resolve(f.l, id)
		frames, _ := threads.Walk(f.host.exec.CAS, rec.Head)
		if b, _ := frames[0].State.Payload.Meta.MarshalJSON(); string(b) != `{"timedOut":true}` {
			t.Fatalf("the timed-out step's meta %s", b)
		}
	})
	t.Run("no fallback", func(t *testing.T) {
		f := newWaitFixture(t, approvalYAML(`{type: human, timeout: 1}`, "{approved: ship, rejected: __end__}"))
		id := f.run()
		f.waitStatus(id, threads.StatusFailed)
		rec, _ := threads.Resolve(f.l, id)
		end, _ := threads.HeadEnd(f.host.exec.CAS, rec.Head)
		if s := end.Summary(); !strings.Contains(s, "got no answer within 1ms") || !strings.Contains(s, "no FALLBACK") {
			t.Fatalf("summary %q", s)
		}
	})
}

func TestAWaitingThreadGivesBackItsSlot(t *testing.T) {
	f := newWaitFixture(t, approvalYAML("{type: human}", "{approved: ship, rejected: __end__}"))
	// One slot by default would hide it: take every slot with waiting
	// threads, then one more must still reach its question.
	var ids []string
	for range f.host.opts.MaxThreads + 2 {
		ids = append(ids, f.run())
	}
	for _, id := range ids {
		f.waitStatus(id, threads.StatusWaiting)
	}
	for _, id := range ids {
		if _, err := f.answer(id, `{"status":"rejected"}`, ""); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range ids {
		f.waitStatus(id, threads.StatusCompleted)
	}
}

func TestAKilledWaitingThreadEnds(t *testing.T) {
	f := newWaitFixture(t, approvalYAML("{type: human}", "{approved: ship, rejected: __end__}"))
	id := f.run()
	f.waitStatus(id, threads.StatusWaiting)
	if err := f.client.Kill(id); err != nil {
		t.Fatal(err)
	}
	f.waitStatus(id, threads.StatusKilled)
	if _, err := f.answer(id, `{"status":"approved"}`, ""); !errors.Is(err, questions.ErrNotWaiting) {
		t.Fatalf("answering a killed thread: %v, want ErrNotWaiting", err)
	}
}
