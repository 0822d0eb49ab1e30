package executor

import (
	"errors"
	"fmt"
	"strings"

	"github.com/uncaged/workflow/engine/canonyaml"
	"github.com/uncaged/workflow/engine/cas"
	"github.com/uncaged/workflow/engine/node"
	"github.com/uncaged/workflow/engine/threads"
	"github.com/uncaged/workflow/engine/workflow"
)

// startInfo is what a thread's start node says.
type startInfo struct {
	payload node.StartPayload
	prompt  string
}

func (e *Executor) readStart(hash string) (startInfo, error) {
	n, err := e.CAS.GetNode(hash)
	if errors.Is(err, cas.ErrNotFound) {
		return startInfo{}, fmt.Errorf("start node missing in CAS: %s", hash)
	}
	if err != nil {
		return startInfo{}, err
	}
	s, ok := n.(node.Start)
	if !ok {
		return startInfo{}, fmt.Errorf("CAS blob is not a StartNode: %s", hash)
	}
	if len(s.Refs) == 0 {
		return startInfo{}, errors.New("StartNode refs[0] must be the prompt hash")
	}
	pn, err := e.CAS.GetNode(s.Refs[0])
	if err != nil {
		return startInfo{}, fmt.Errorf("prompt CAS blob missing: %s", s.Refs[0])
	}
	c, ok := pn.(node.Content)
	if !ok {
		return startInfo{}, fmt.Errorf("prompt CAS blob has unexpected shape: %s", s.Refs[0])
	}
	return startInfo{payload: s.Payload, prompt: c.Payload}, nil
}

// roleSteps turns state frames into the steps a workflow sees, skipping
// __end__ and __fork__ frames.
func (e *Executor) roleSteps(frames []threads.Frame) []workflow.RoleStep {
	var steps []workflow.RoleStep
	for _, f := range frames {
		p := f.State.Payload
		if p.Role == node.RoleEnd || p.Role == node.RoleFork {
			continue
		}
		refs := []string{}
		if n, err := e.CAS.GetNode(p.Content); err == nil {
			refs = append(refs, n.References()...)
		}
		steps = append(steps, workflow.RoleStep{Role: p.Role, Meta: p.Meta, ContentHash: p.Content, Refs: refs, Timestamp: p.Timestamp})
	}
	return steps
}

// ResumeThread rebuilds an unfinished thread so Run continues it after its
// last completed step: nothing already written is written again.
func (e *Executor) ResumeThread(rec threads.Record) (Thread, error) {
	start, err := e.readStart(rec.Start)
	if err != nil {
		return Thread{}, err
	}
	frames, err := threads.Walk(e.CAS, rec.Head)
	if err != nil {
		return Thread{}, err
	}
	if n := len(frames); n > 0 && frames[n-1].State.IsEnd() {
		return Thread{}, fmt.Errorf("thread %s has already finished", rec.ThreadID)
	}
	t := Thread{
		ID: rec.ThreadID, BundleHash: rec.BundleHash, WorkflowName: start.payload.Name,
		Depth: int(start.payload.Depth), ParentState: start.payload.ParentState, Prompt: start.prompt,
		StartHash: rec.Start, Resume: &Chain{Head: rec.Head, Steps: e.roleSteps(frames)},
	}
	if n := len(frames); n > 0 {
		t.Resume.HeadAncestors = frames[n-1].State.Payload.Ancestors
	}
	return t, nil
}

// PrepareFork makes newID a fork of the thread rec: it shares rec's start
// node and replays its steps up to and including the first step of
// fromRole — or, with fromRole "", all but the last step, so the last role
// runs again. A __fork__ marker links the new chain to the fork point. The
// new thread is not listed yet: List lists it, once whoever runs it says so
// (a thread listed before its runner knows it would read as interrupted).
func (e *Executor) PrepareFork(rec threads.Record, newID, fromRole string) (Thread, error) {
	return e.prepareFork(rec, newID, func(meaningful []threads.Frame) (int, error) {
		if fromRole == "" {
			return len(meaningful) - 2, nil
		}
		var roles []string
		seen := map[string]bool{}
		for _, f := range meaningful {
			if r := f.State.Payload.Role; !seen[r] {
				seen[r] = true
				roles = append(roles, r)
			}
		}
		for i, f := range meaningful {
			if f.State.Payload.Role == fromRole {
				return i, nil
			}
		}
		return 0, fmt.Errorf("role not found in thread: %s (available: %s)", fromRole, strings.Join(roles, ", "))
	})
}

// PrepareForkAt is PrepareFork at a step rather than a role: the fork
// replays rec's steps up to and including its step-th role step (1-based,
// fork markers and __end__ not counted, as a thread's records list them),
// so a role that ran twice can be forked from its second run.
func (e *Executor) PrepareForkAt(rec threads.Record, newID string, step int) (Thread, error) {
	return e.prepareFork(rec, newID, func(meaningful []threads.Frame) (int, error) {
		if step < 1 || step > len(meaningful) {
			return 0, fmt.Errorf("step %d not in thread: it has steps 1 to %d", step, len(meaningful))
		}
		return step - 1, nil
	})
}

// prepareFork is PrepareFork with the fork point chosen by pick: the index
// of the last role step to replay, -1 to re-run the whole thread.
func (e *Executor) prepareFork(rec threads.Record, newID string, pick func(meaningful []threads.Frame) (int, error)) (Thread, error) {
	start, err := e.readStart(rec.Start)
	if err != nil {
		return Thread{}, err
	}
	frames, err := threads.Walk(e.CAS, rec.Head)
	if err != nil {
		return Thread{}, err
	}
	var meaningful []threads.Frame
	for _, f := range frames {
		if r := f.State.Payload.Role; r != node.RoleEnd && r != node.RoleFork {
			meaningful = append(meaningful, f)
		}
	}
	if len(meaningful) == 0 {
		return Thread{}, errors.New("thread has no completed role steps to fork from")
	}
	point, err := pick(meaningful)
	if err != nil {
		return Thread{}, err
	}
	t := Thread{
		ID: newID, BundleHash: rec.BundleHash, WorkflowName: start.payload.Name,
		Depth: int(start.payload.Depth), ParentState: start.payload.ParentState, Prompt: start.prompt,
		StartHash: rec.Start, Resume: &Chain{Head: rec.Start},
	}
	if point >= 0 {
		forkPoint := meaningful[point]
		t.Resume.Steps = e.roleSteps(meaningful[:point+1])
		empty, err := e.CAS.PutNode(node.NewContent("", nil))
		if err != nil {
			return Thread{}, err
		}
		ancestors := node.Ancestors(forkPoint.Hash, forkPoint.State.Payload.Ancestors)
		marker, err := e.CAS.PutNode(node.NewState(node.StatePayload{
			Role: node.RoleFork, Meta: canonyaml.Map{{Key: "forkFrom", Value: rec.ThreadID}}, Start: rec.Start,
			Content: empty, Ancestors: ancestors, Timestamp: e.now().UnixMilli(),
		}))
		if err != nil {
			return Thread{}, err
		}
		t.Resume.Head, t.Resume.HeadAncestors = marker, ancestors
	}
	return t, nil
}

// List names t, a thread PrepareFork or PrepareForkAt made, in its
// workflow's threads.json, at the head it resumes from.
func (e *Executor) List(t Thread) error {
	head := t.StartHash
	if t.Resume != nil {
		head = t.Resume.Head
	}
	return threads.Upsert(e.Layout.BundleDir(t.BundleHash), t.ID, threads.Entry{Head: head, Start: t.StartHash, UpdatedAt: e.now().UnixMilli()})
}
