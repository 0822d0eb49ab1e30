package threads

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/uncaged/workflow/engine/canonyaml"
	"github.com/uncaged/workflow/engine/cas"
	"github.com/uncaged/workflow/engine/node"
)

// HeadEnd tells an __end__ head, a head that is not one yet (a step or
// the start), and a head that cannot be trusted — a *NodeError, never
// "not ended" — apart; ReadStatus names the line of the last kind.
func TestHeadEndTellsAnUnsoundHeadFromAnUnfinishedOne(t *testing.T) {
	t.Parallel()
	store := cas.Open(t.TempDir())
	put := func(n node.Node) string {
		h, err := store.PutNode(n)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	prompt := put(node.NewContent("p", nil))
	start := put(node.NewStart(node.StartPayload{Name: "w", Hash: "B"}, prompt))
	step := put(node.NewState(node.StatePayload{Role: "coder", Start: start, Content: prompt}))
	end := put(node.NewState(node.StatePayload{Role: node.RoleEnd, Meta: canonyaml.Map{{Key: "returnCode", Value: 0}}, Start: start, Content: prompt, Ancestors: []string{step}}))
	changed := put(node.NewContent("to be changed", nil))
	if err := os.WriteFile(filepath.Join(store.Dir(), changed+".txt"), []byte("changed"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		head    string
		ended   bool
		problem string // "" for a sound head
	}{
		{head: end, ended: true},
		{head: step},
		{head: start},
		{head: "0000000000000", problem: "is not in the CAS"},
		{head: changed, problem: "does not hash to its name"},
		{head: prompt, problem: "is a content node"},
	} {
		got, err := HeadEnd(store, c.head)
		if c.problem == "" {
			if err != nil || (got != nil) != c.ended {
				t.Errorf("HeadEnd(%s) = %v, %v; want ended %v", c.head, got, err, c.ended)
			}
			continue
		}
		if got != nil || !errors.Is(err, ErrUnsoundNode) || !strings.Contains(err.Error(), c.problem) {
			t.Errorf("HeadEnd(%s) = %v, %v; want %q", c.head, got, err, c.problem)
		}
		rec := Record{ThreadID: "T", Head: c.head, Start: start, Source: SourceHistory, Path: "h.jsonl", Line: 3}
		if st, d := ReadStatus(store, rec, NotExecuting); st != StatusDamaged || d == nil || d.Thread != "T" ||
			!strings.HasPrefix(d.Error(), "damaged file h.jsonl, line 3: thread T: head "+c.head+" "+c.problem) ||
			!strings.HasSuffix(d.Error(), ", so its status cannot be known") {
			t.Errorf("ReadStatus(%s) = %s, %v", c.head, st, d)
		}
	}
}
