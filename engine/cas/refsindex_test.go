package cas

import (
	"os"
	"reflect"
	"testing"

	"github.com/uncaged/workflow/engine/node"
)

// A check of the refs index names every line a collection has to skip.
func TestCheckRefsIndexNamesUnusableLines(t *testing.T) {
	s := Open(t.TempDir())
	a, _ := s.Put("a")
	b, _ := s.PutNode(node.NewContent("b", []string{a}))
	f, _ := os.OpenFile(s.RefsIndexPath(), os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString("not a line\n" + b + " " + a)
	f.Close()
	idx, flaws, err := s.CheckRefsIndex()
	if err != nil || !reflect.DeepEqual(idx[b], []string{a}) {
		t.Fatalf("index = %v, %v", idx, err)
	}
	want := []RefsIndexFlaw{{Line: 3, Reason: "not a hash followed by hashes"}, {Line: 4, Reason: "the last line is cut short"}}
	if !reflect.DeepEqual(flaws, want) {
		t.Fatalf("flaws = %+v, want %+v", flaws, want)
	}
}

// A rebuild writes what the caller read from the blobs, replacing a wrong
// entry, and indexes a blob stored since from its own bytes.
func TestRebuildRefsIndexTrustsOnlyBlobs(t *testing.T) {
	s := Open(t.TempDir())
	a, _ := s.Put("a")
	b, _ := s.PutNode(node.NewContent("b", []string{a}))
	f, _ := os.OpenFile(s.RefsIndexPath(), os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(b + "\n") // a wrong entry: b "points" nowhere
	f.Close()
	if err := s.RebuildRefsIndex(map[string][]string{a: {}}); err != nil {
		t.Fatal(err)
	}
	idx, flaws, err := s.CheckRefsIndex()
	if err != nil || len(flaws) != 0 || !reflect.DeepEqual(idx, map[string][]string{a: {}, b: {a}}) {
		t.Fatalf("rebuilt index = %v, %v, %v", idx, flaws, err)
	}
}
