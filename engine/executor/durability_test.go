package executor

import (
	"context"
	"os"
	"testing"

	"github.com/uncaged/workflow/engine/atomicfile"
	"github.com/uncaged/workflow/engine/node"
	"github.com/uncaged/workflow/engine/threads"
)

// TestStepSyncsWhatItsDurabilityNeeds counts the fsyncs of a role step: the
// agent's content node and the state node (one each, before they are
// renamed into place), one directory sync for both names, and threads.json
// replaced (its file and its directory) — five, where writing each node as
// a durable file on its own took six. Not parallel: the count is the
// process's.
func TestStepSyncsWhatItsDurabilityNeeds(t *testing.T) {
	e := newExec(t)
	th := begin(t, e, "SYNCS")
	dir := e.Layout.BundleDir(th.BundleHash)
	var marks []uint64
	env := Env{OnStep: func(head string) {
		marks = append(marks, atomicfile.Syncs())
		// What the index names is already stored, and so is the content
		// node the state names (the two are written side by side).
		if idx, err := threads.ReadIndex(dir); err == nil {
			if h := idx["SYNCS"].Head; h != "" && h != th.StartHash {
				if ok, err := e.CAS.Exists(h); err != nil || !ok {
					t.Errorf("threads.json names %s, which is not stored (%v)", h, err)
				}
				n, err := e.CAS.GetNode(h)
				st, isState := n.(node.State)
				if err != nil || !isState {
					t.Errorf("head %s: %T, %v", h, n, err)
				} else if ok, err := e.CAS.Exists(st.Payload.Content); err != nil || !ok {
					t.Errorf("the head's content %s is not stored (%v)", st.Payload.Content, err)
				}
			}
		}
	}}
	const steps = 5
	res, err := e.Run(context.Background(), linear{roles: []string{"a", "b", "c", "d", "e"}}, th, env)
	if err != nil || res.ReturnCode != 0 {
		t.Fatalf("run = %+v, %v", res, err)
	}
	if len(marks) != steps+1 {
		t.Fatalf("%d published states, want %d role steps and __end__", len(marks), steps)
	}
	perStep := float64(marks[steps-1]-marks[0]) / (steps - 1)
	if perStep != 5 {
		t.Errorf("%.2f fsyncs per role step, want 5", perStep)
	}
	// The end: the summary and the __end__ node (one each) and their
	// names (one); then the history's new file and its directory, and
	// threads.json without the thread (file and directory).
	if got := marks[steps] - marks[steps-1]; got != 3 {
		t.Errorf("the __end__ node took %d fsyncs, want 3", got)
	}
	if got := atomicfile.Syncs() - marks[steps]; got != 4 {
		t.Errorf("history and index after __end__ took %d fsyncs, want 4", got)
	}
	if got := roles(t, e, res.RootHash); len(got) != steps+1 {
		t.Errorf("chain = %v", got)
	}
}

// TestBeginSyncsItsNodesOnce: the prompt and start nodes share one
// directory sync before the index lists the thread (2 + 1 + 2 fsyncs).
func TestBeginSyncsItsNodesOnce(t *testing.T) {
	e := newExec(t)
	before := atomicfile.Syncs()
	th := begin(t, e, "BEGIN")
	if got := atomicfile.Syncs() - before; got != 5 {
		t.Errorf("Begin made %d fsyncs, want 5", got)
	}
	if _, err := os.Stat(e.Layout.BundleDir(th.BundleHash)); err != nil {
		t.Fatal(err)
	}
}
